"""The official SafePyramid protocol: prompts, per-rule targets and output parsers (public: ``sp_dspy.protocol``).

The prompts are protocol text of the SafePyramid evaluation harness, Apache-2.0, byte for byte.
"""

from sp_dspy._protocol._parse_policy import case_rule_numbers, keep_policy_rules, parse_policy_output
from sp_dspy._protocol._parse_verdict import parse_verdict_output
from sp_dspy._protocol._prompts import per_policy_messages
from sp_dspy._protocol._targets import build_targets, per_rule_messages, shared_prefix_ratio

__all__ = [
    "build_targets",
    "case_rule_numbers",
    "keep_policy_rules",
    "parse_policy_output",
    "parse_verdict_output",
    "per_policy_messages",
    "per_rule_messages",
    "shared_prefix_ratio",
]
