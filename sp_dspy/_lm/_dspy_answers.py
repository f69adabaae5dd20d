"""Answers from DSPy's own engine (``--transport dspy``, providers without a profile) masked as
they leave the LM, through DSPy's public callback hook.

sp-dspy's engines mask an answer as it arrives (``_direct``, ``_replicas``); on DSPy's engine
DSPy produces the answer, so the response cache masks what it stores
(``_dspy_cache.EndpointAwareCache.put``) and :class:`AnswerRedaction` masks what a call returns.
Importing this module imports DSPy (``_factory`` imports it when it builds such an LM).
"""

from __future__ import annotations

from typing import Any

from dspy.utils.callback import BaseCallback

from .._redact import redact_outputs


class AnswerRedaction(BaseCallback):
    """Masks every known key in an LM call's outputs before the adapter parses them.

    DSPy returns to the caller the list it passes here and keeps in the LM's history, so the
    list is masked in place. An LM's callbacks run after the global ones (``dspy.context``);
    sp-dspy's global callback (compile's recorder) reads programs' outputs, after their LM calls.
    """

    def on_lm_end(self, call_id: str, outputs: Any, exception: BaseException | None = None) -> None:
        if isinstance(outputs, list):
            redact_outputs(outputs)


#: The one instance every LM on DSPy's engine carries (it holds no state).
ANSWER_REDACTION = AnswerRedaction()
