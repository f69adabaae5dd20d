"""The LM layer: every call to a model in sp-dspy goes through here.

:func:`make_lm` builds a ``dspy.LM`` from an :class:`LMConfig` (``_factory``: its engine is
the fake, the replica router, sp-dspy's HTTP engine or DSPy's own); :func:`chat` /
:func:`achat` send raw messages through it. Importing this package does not import DSPy
or LiteLLM (the CLI starts fast); the functions that need them import them on first use.
"""

from .._redact import redact, register_secret
from ._cache import configure_cache
from ._chat import achat, answer_price, chat, history_usage
from ._config import (
    LMConfig,
    bundled_models_file,
    load_configured_models,
    load_model_configs,
    models_files,
    resolve_model_config,
    user_models_file,
)
from ._direct import DirectChat, HttpRequest, closing_transports
from ._dspy import import_dspy
from ._errors import ERROR_KINDS, classify_error, describe_error, is_lasting, is_transient
from ._factory import fake_engine, make_lm, make_lms
from ._fake import (
    BEHAVIOURS,
    GARBAGE_TEXT,
    INSTRUCTION_PHRASE,
    PLAIN_INSTRUCTION,
    PROPOSED_INSTRUCTION,
    REFUSAL_TEXT,
    FakeEngine,
    GoldBook,
)
from ._keys import api_key_for, key_for
from ._result import ChatResult, TokenUsage
from ._stub_server import StubServer

__all__ = [
    "BEHAVIOURS",
    "ERROR_KINDS",
    "GARBAGE_TEXT",
    "INSTRUCTION_PHRASE",
    "PLAIN_INSTRUCTION",
    "PROPOSED_INSTRUCTION",
    "REFUSAL_TEXT",
    "ChatResult",
    "DirectChat",
    "FakeEngine",
    "GoldBook",
    "HttpRequest",
    "LMConfig",
    "StubServer",
    "TokenUsage",
    "achat",
    "answer_price",
    "api_key_for",
    "bundled_models_file",
    "chat",
    "classify_error",
    "closing_transports",
    "configure_cache",
    "describe_error",
    "fake_engine",
    "history_usage",
    "import_dspy",
    "is_lasting",
    "is_transient",
    "key_for",
    "load_configured_models",
    "load_model_configs",
    "make_lm",
    "make_lms",
    "models_files",
    "redact",
    "register_secret",
    "resolve_model_config",
    "user_models_file",
]
