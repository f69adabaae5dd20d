"""The LM layer: every call to a model in sp-dspy goes through a ``dspy.LM`` that :func:`make_lm`
builds from an :class:`LMConfig`. Importing this package does not import DSPy or LiteLLM."""

from .._redact import redact
from ._cache import configure_cache
from ._chat import achat, answer_price, chat, effort_setting, history_batched, history_usage
from ._compat import BATCH_DISCOUNT, gepa_auto_metric_calls, has_batch_prices, mipro_auto_run, price_rates
from ._config import (
    ANSWER_SETTINGS,
    LMConfig,
    display_endpoint,
    load_configured_models,
    models_files,
    resolve_model_config,
)
from ._direct import (
    DirectChat,
    HttpRequest,
    RequestCaptured,
    client_of,
    close_transport,
    closing_transports,
    logging_requests,
)
from ._dspy import import_dspy
from ._errors import classify_error, is_lasting, status_error
from ._factory import fake_engine, make_lm
from ._fake import BEHAVIOURS, FAKE_OUTPUT_LIMIT
from ._profiles import PROFILES, SELF_HOSTED_PLACEHOLDER_KEY, key_for
from ._prompt_cache import before_last_message, marking_prefix, minimum_tokens
from ._rate import RateWatch, limit_bound_s
from ._result import ChatResult

__all__ = [
    "ANSWER_SETTINGS",
    "BATCH_DISCOUNT",
    "BEHAVIOURS",
    "FAKE_OUTPUT_LIMIT",
    "PROFILES",
    "SELF_HOSTED_PLACEHOLDER_KEY",
    "ChatResult",
    "DirectChat",
    "HttpRequest",
    "LMConfig",
    "RateWatch",
    "RequestCaptured",
    "achat",
    "answer_price",
    "before_last_message",
    "chat",
    "classify_error",
    "client_of",
    "close_transport",
    "closing_transports",
    "configure_cache",
    "display_endpoint",
    "effort_setting",
    "fake_engine",
    "gepa_auto_metric_calls",
    "has_batch_prices",
    "history_batched",
    "history_usage",
    "import_dspy",
    "is_lasting",
    "key_for",
    "limit_bound_s",
    "load_configured_models",
    "logging_requests",
    "make_lm",
    "marking_prefix",
    "minimum_tokens",
    "mipro_auto_run",
    "models_files",
    "price_rates",
    "redact",
    "resolve_model_config",
    "status_error",
]
