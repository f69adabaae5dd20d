"""The SafePyramid protocol, public: the official prompts, per-rule targets, parsers and answer schemas.

What a guard program needs to speak the benchmark's protocol (contract sections 3-5),
re-exported from ``sp_dspy._protocol`` so programs written outside the package (and
``programs/`` itself) depend on these names only:

- prompts: :func:`per_policy_messages` (one call per case) and :func:`per_rule_messages`
  (one call per :class:`RuleTarget` from :func:`build_targets`, with the framework
  :func:`framework_for` shows the judge); the system templates are the contract's bytes;
- parsers: :func:`parse_policy_output` / :func:`parse_verdict_output`, in ``"strict"``
  (the reference parser) or ``"robust"`` mode;
- answer schemas: :func:`policy_response_format` / :func:`verdict_response_format`, the
  OpenAI ``response_format`` for servers that constrain decoding.
"""

from sp_dspy._protocol import (
    LAYOUTS,
    PARSE_MODES,
    PER_POLICY_SYSTEM_TEMPLATE,
    PER_RULE_SYSTEM_BASE,
    PER_RULE_SYSTEM_EXCEPTION,
    Layout,
    ParseMode,
    ParseStatus,
    PolicyParse,
    Protocol,
    RuleTarget,
    Status,
    TargetType,
    VerdictParse,
    build_targets,
    parse_policy_output,
    parse_verdict_output,
    per_policy_messages,
    per_rule_messages,
)
from sp_dspy._protocol._schemas import policy_response_format, verdict_response_format
from sp_dspy._protocol._targets import framework_for

__all__ = [
    "LAYOUTS",
    "PARSE_MODES",
    "PER_POLICY_SYSTEM_TEMPLATE",
    "PER_RULE_SYSTEM_BASE",
    "PER_RULE_SYSTEM_EXCEPTION",
    "Layout",
    "ParseMode",
    "ParseStatus",
    "PolicyParse",
    "Protocol",
    "RuleTarget",
    "Status",
    "TargetType",
    "VerdictParse",
    "build_targets",
    "framework_for",
    "parse_policy_output",
    "parse_verdict_output",
    "per_policy_messages",
    "per_rule_messages",
    "policy_response_format",
    "verdict_response_format",
]
