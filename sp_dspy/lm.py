"""The LM layer, public: what a guard program needs to call a model and report a failure.

:func:`chat` / :func:`achat` send raw messages through a ``dspy.LM`` (DSPy's cache, retries,
history) and answer a :class:`ChatResult`; :func:`history_usage` / :func:`answer_price` read
an ``lm.history`` entry's tokens and price as the official path reports them;
:func:`classify_error` / :func:`redact` name a failure's kind and mask secrets;
:func:`gepa_auto_metric_calls` / :func:`mipro_auto_run` are the budgets of GEPA's and
MIPROv2's ``auto`` presets. Importing this module does not import DSPy.
"""

from sp_dspy._lm._chat import achat, answer_price, chat, history_usage
from sp_dspy._lm._compat import gepa_auto_metric_calls, mipro_auto_run
from sp_dspy._lm._errors import classify_error
from sp_dspy._lm._result import ChatResult, TokenUsage
from sp_dspy._redact import redact

__all__ = [
    "ChatResult",
    "TokenUsage",
    "achat",
    "answer_price",
    "chat",
    "classify_error",
    "gepa_auto_metric_calls",
    "history_usage",
    "mipro_auto_run",
    "redact",
]
