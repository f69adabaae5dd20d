"""The LM layer: every call to a model in sp-dspy goes through a ``dspy.LM`` that :func:`make_lm`
builds from an :class:`LMConfig`. Importing this package does not import DSPy or LiteLLM."""

from .._redact import redact
from ._cache import configure_cache
from ._chat import history_usage
from ._config import LMConfig, load_configured_models, models_files, resolve_model_config
from ._direct import HttpRequest, close_transport, closing_transports, logging_requests
from ._dspy import import_dspy
from ._errors import classify_error, is_lasting
from ._factory import fake_engine, make_lm
from ._fake import BEHAVIOURS
from ._profiles import key_for

__all__ = [
    "BEHAVIOURS",
    "HttpRequest",
    "LMConfig",
    "classify_error",
    "close_transport",
    "closing_transports",
    "configure_cache",
    "fake_engine",
    "history_usage",
    "import_dspy",
    "is_lasting",
    "key_for",
    "load_configured_models",
    "logging_requests",
    "make_lm",
    "models_files",
    "redact",
    "resolve_model_config",
]
