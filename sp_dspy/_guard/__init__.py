"""Deploying a guard: ``Guard.load(artifact_or_name).check(policy, conversation) -> Verdict``.

Importing this package does not import DSPy or LiteLLM; loading a guard does.
"""

from ._case import guard_case
from ._conversation import conversation_text
from ._guard import Guard
from ._policy import policy_rules
from ._source import Source
from ._verdict import Verdict

__all__ = ["Guard", "Source", "Verdict", "conversation_text", "guard_case", "policy_rules"]
