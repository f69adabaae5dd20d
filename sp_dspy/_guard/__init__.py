"""Deploying a guard: ``Guard.load(artifact_or_name).check(policy, conversation) -> Verdict``.

Importing this package does not import DSPy or LiteLLM; loading a guard does.
"""

from ._case import GUARD_DOMAIN, guard_case
from ._conversation import SPEAKERS, check_turn_text, conversation_text, messages_to_text
from ._guard import PARSERS, Guard
from ._policy import policy_rules
from ._source import Source
from ._verdict import Verdict

__all__ = [
    "GUARD_DOMAIN",
    "PARSERS",
    "SPEAKERS",
    "Guard",
    "Source",
    "Verdict",
    "check_turn_text",
    "conversation_text",
    "guard_case",
    "messages_to_text",
    "policy_rules",
]
