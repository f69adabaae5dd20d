"""The LM layer, public: what a guard program needs to call a model and report a failure:
raw chat through a ``dspy.LM``, an answer's tokens and price (``Usage``; ``parse_usage`` reads a
provider's usage dict), a failure's kind, secrets masked,
and the budgets of GEPA's and MIPROv2's ``auto`` presets. Importing this does not import DSPy.
"""

from sp_dspy._lm import (
    ChatResult,
    achat,
    answer_price,
    chat,
    classify_error,
    effort_setting,
    gepa_auto_metric_calls,
    history_batched,
    history_usage,
    mipro_auto_run,
)
from sp_dspy._redact import redact
from sp_dspy._usage import Usage, parse_usage

__all__ = [
    "ChatResult",
    "Usage",
    "achat",
    "answer_price",
    "chat",
    "classify_error",
    "effort_setting",
    "gepa_auto_metric_calls",
    "history_batched",
    "history_usage",
    "mipro_auto_run",
    "parse_usage",
    "redact",
]
