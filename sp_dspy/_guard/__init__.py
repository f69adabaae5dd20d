"""Deploying a guard: ``Guard.load(artifact_or_name).check(policy, conversation) -> Verdict``.

Importing this package does not import DSPy or LiteLLM; loading a guard does.
"""

from ._batch import LineAnswer, answer_lines, check_lines
from ._check import CheckConfig, CheckInput, CheckOutcome, load_check_guard, read_check_input, run_check
from ._guard import DEADLINE, DEFAULT_DEADLINE_S, Guard
from ._verdict import Verdict

__all__ = [
    "DEADLINE",
    "DEFAULT_DEADLINE_S",
    "CheckConfig",
    "CheckInput",
    "CheckOutcome",
    "Guard",
    "LineAnswer",
    "Verdict",
    "answer_lines",
    "check_lines",
    "load_check_guard",
    "read_check_input",
    "run_check",
]
