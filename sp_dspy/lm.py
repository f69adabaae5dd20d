"""The LM layer, public: what a guard program needs to call a model and report a failure.

- :func:`chat` / :func:`achat`: raw chat messages through a ``dspy.LM`` (no adapter),
  with DSPy's cache, retries and history, answered as a :class:`ChatResult` (text,
  :class:`TokenUsage`, cost, cache hit);
- :func:`history_usage` / :func:`answer_price`: the tokens of one ``lm.history`` entry
  (and whether it was replayed from the cache) and the price of an answer, so a
  program reports cached answers as the official path does;
- :func:`classify_error` / :func:`redact`: the failure kind of an exception (``rate_limit``,
  ``timeout``, ...) and a message with every known secret masked;
- :func:`gepa_auto_metric_calls` / :func:`mipro_auto_run`: the budgets DSPy's GEPA and
  MIPROv2 ``auto`` presets will run, by DSPy's own formulas (for cost projections).

Re-exported from ``sp_dspy._lm``; importing this module does not import DSPy.
"""

from sp_dspy._lm import (
    ChatResult,
    TokenUsage,
    achat,
    answer_price,
    chat,
    classify_error,
    history_usage,
    redact,
)
from sp_dspy._lm._compat import gepa_auto_metric_calls, mipro_auto_run

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
