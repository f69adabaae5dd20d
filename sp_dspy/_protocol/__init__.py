"""The official SafePyramid protocol: prompts, per-rule targets and output parsers.

The prompt constants are protocol text of the SafePyramid evaluation harness,
Apache-2.0, reproduced byte for byte (contract sections 3 and 5). The ``"prefix"``
per-rule layout and the ``"robust"`` parsing mode are this package's additions and
are not part of the official protocol.
"""

from sp_dspy._protocol._parse import parse_policy_output, parse_verdict_output
from sp_dspy._protocol._parse_models import (
    PARSE_MODES,
    ParseMode,
    ParseStatus,
    PolicyParse,
    Status,
    Verdict,
    VerdictParse,
)
from sp_dspy._protocol._parse_policy import PolicyRules, case_rule_numbers, keep_policy_rules
from sp_dspy._protocol._prefix import (
    PREFIX_PRIORITY,
    PREFIX_SYSTEM,
    PREFIX_VERDICT_LOGIC,
    render_prompt,
    shared_prefix_ratio,
)
from sp_dspy._protocol._prompts import (
    ATTRIBUTION,
    CONTEXT_HEADER_BASE,
    CONTEXT_HEADER_EXCEPTION,
    CONVERSATION_HEADER,
    CONVERSATION_USER_HEADER,
    EMPTY_CONTEXT_LINE,
    EVALUATION_NOTE,
    FRAMEWORK_HEADER,
    PER_POLICY_SYSTEM_TEMPLATE,
    PER_RULE_SYSTEM_BASE,
    PER_RULE_SYSTEM_EXCEPTION,
    TARGET_HEADER_TEMPLATE,
    per_policy_messages,
    per_policy_system,
    target_header,
)
from sp_dspy._protocol._targets import (
    LAYOUTS,
    Layout,
    Protocol,
    RuleTarget,
    TargetType,
    build_targets,
    per_rule_messages,
)

__all__ = [
    "ATTRIBUTION",
    "CONTEXT_HEADER_BASE",
    "CONTEXT_HEADER_EXCEPTION",
    "CONVERSATION_HEADER",
    "CONVERSATION_USER_HEADER",
    "EMPTY_CONTEXT_LINE",
    "EVALUATION_NOTE",
    "FRAMEWORK_HEADER",
    "LAYOUTS",
    "PARSE_MODES",
    "PER_POLICY_SYSTEM_TEMPLATE",
    "PER_RULE_SYSTEM_BASE",
    "PER_RULE_SYSTEM_EXCEPTION",
    "PREFIX_PRIORITY",
    "PREFIX_SYSTEM",
    "PREFIX_VERDICT_LOGIC",
    "TARGET_HEADER_TEMPLATE",
    "Layout",
    "ParseMode",
    "ParseStatus",
    "PolicyParse",
    "PolicyRules",
    "Protocol",
    "RuleTarget",
    "Status",
    "TargetType",
    "Verdict",
    "VerdictParse",
    "build_targets",
    "case_rule_numbers",
    "keep_policy_rules",
    "parse_policy_output",
    "parse_verdict_output",
    "per_policy_messages",
    "per_policy_system",
    "per_rule_messages",
    "render_prompt",
    "shared_prefix_ratio",
    "target_header",
]
