"""The official SafePyramid protocol: prompts, per-rule targets and output parsers (public: ``sp_dspy.protocol``).

The prompts are protocol text of the SafePyramid evaluation harness, Apache-2.0, byte for byte.
"""

from sp_dspy._protocol._parse_models import (
    PARSE_MODES,
    ParseMode,
    ParseStatus,
    PolicyParse,
    Status,
    VerdictParse,
)
from sp_dspy._protocol._parse_policy import case_rule_numbers, keep_policy_rules, parse_policy_output
from sp_dspy._protocol._parse_verdict import parse_verdict_output
from sp_dspy._protocol._prompts import (
    PER_POLICY_SYSTEM_TEMPLATE,
    PER_RULE_SYSTEM_BASE,
    PER_RULE_SYSTEM_EXCEPTION,
    per_policy_messages,
)
from sp_dspy._protocol._schemas import policy_response_format, verdict_response_format
from sp_dspy._protocol._targets import (
    LAYOUTS,
    Layout,
    Protocol,
    RuleTarget,
    TargetType,
    build_targets,
    framework_for,
    per_rule_messages,
    prefix_layout_end,
    shared_prefix_ratio,
)
from sp_dspy._protocol._text import replace_surrogates
from sp_dspy._protocol._turns import Speaker, conversation_turns, speaker_lines

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
    "case_rule_numbers",
    "conversation_turns",
    "framework_for",
    "keep_policy_rules",
    "parse_policy_output",
    "parse_verdict_output",
    "per_policy_messages",
    "per_rule_messages",
    "policy_response_format",
    "prefix_layout_end",
    "replace_surrogates",
    "shared_prefix_ratio",
    "speaker_lines",
    "verdict_response_format",
]
