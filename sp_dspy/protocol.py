"""The SafePyramid protocol, public: the official prompts, per-rule targets, parsers and answer schemas.

What a guard program needs to speak the benchmark's protocol (contract sections 3-5), so
programs written outside the package (and ``programs/`` itself) depend on these names only:
chat messages per policy or per :class:`RuleTarget` (the system templates are the
contract's bytes), parsers in ``"strict"`` (the reference's) or ``"robust"`` mode, and the
OpenAI ``response_format`` of each answer for servers that constrain decoding.
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
    Speaker,
    Status,
    TargetType,
    VerdictParse,
    build_targets,
    conversation_turns,
    framework_for,
    parse_policy_output,
    parse_verdict_output,
    per_policy_messages,
    per_rule_messages,
    policy_response_format,
    speaker_lines,
    verdict_response_format,
)

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
    "Speaker",
    "Status",
    "TargetType",
    "VerdictParse",
    "build_targets",
    "conversation_turns",
    "framework_for",
    "parse_policy_output",
    "parse_verdict_output",
    "per_policy_messages",
    "per_rule_messages",
    "policy_response_format",
    "speaker_lines",
    "verdict_response_format",
]
