"""The contexts a unit's program runs in, whichever way it is sent (one at a time, by batch, or
captured for ``--show-request``): the JSON adapter on a schema-constrained server, and Anthropic's
prompt-cache marks."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from sp_dspy.programs import RAW_PROGRAMS

from .._lm import before_last_message, import_dspy, marking_prefix
from .._protocol import prefix_layout_end

if TYPE_CHECKING:
    from .._lm import LMConfig
    from ._config import EvalConfig


@contextlib.contextmanager
def sending_context(config: EvalConfig, lm_config: LMConfig) -> Iterator[None]:
    """Both contexts of ``config``'s program on ``lm_config``'s model."""
    with adapter_context(lm_config.json_schema and config.program not in RAW_PROGRAMS), prompt_marks(config):
        yield


def prompt_marks(config: EvalConfig) -> contextlib.AbstractContextManager[Any]:
    """Anthropic prompt-cache marks: a DSPy program's instructions and demonstrations, the
    ``prefix`` layout's per-case prefix; none in the official baselines' bytes."""
    if config.program not in RAW_PROGRAMS:
        return marking_prefix(before_last_message)
    if config.program == "official" and config.protocol == "per-rule" and config.per_rule_layout == "prefix":
        return marking_prefix(prefix_layout_end)
    return contextlib.nullcontext()


def adapter_context(json_adapter: bool) -> contextlib.AbstractContextManager[Any]:
    """DSPy programs on a schema-constrained server use the JSON adapter (it sends the schema)."""
    if not json_adapter:
        return contextlib.nullcontext()
    dspy = import_dspy()
    return dspy.context(adapter=dspy.JSONAdapter())
