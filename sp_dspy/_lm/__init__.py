"""The LM layer: every call to a model in sp-dspy goes through here.

- :class:`LMConfig` / :func:`load_model_configs`: validated model settings from YAML.
- :func:`make_lm`: the one factory: a ``dspy.LM`` whose engine is the fake, the
  replica router, sp-dspy's HTTP engine (:class:`DirectEngine`: requests built from
  the config and the provider's profile in :data:`PROFILES`, exactly as the reference
  harness sends them) or DSPy's own engine.
- :func:`chat` / :func:`achat`: raw messages through that LM (the official baseline);
  on the HTTP engine they go straight to its :class:`DirectChat` client
  (``closing_transports`` closes its pools at the end of an event loop).
- :func:`key_for`: the key an LM sends (named variable, provider's usual one, placeholder).
- :func:`configure_cache`: DSPy's response cache on disk, keyed by endpoint too.
- :class:`FakeEngine`: a deterministic offline guard model (``fake/<behaviour>``).
- :class:`StubServer`: a loopback OpenAI-compatible server for tests and benchmarks.
- :class:`ReplicaEngine`: one LM over several replicas of a model (``api_base`` with
  commas), routed by LiteLLM's router; ``lm.endpoint_requests`` counts what each served.
- :func:`classify_error` / :func:`redact`: failure kinds and secret masking.

Importing this package does not import DSPy or LiteLLM (the CLI starts fast); the
functions that need them import them on first use.
"""

from .._redact import redact, register_secret
from ._cache import (
    CacheSettings,
    cache_settings,
    configure_cache,
    default_cache_dir,
    default_response_cache_dir,
)
from ._chat import ChatResult, TokenUsage, achat, answer_price, chat, history_usage
from ._config import (
    TRANSPORTS,
    LMConfig,
    bundled_models_file,
    load_configured_models,
    load_model_configs,
    models_files,
    resolve_model_config,
    user_models_file,
)
from ._direct import AsyncDirectEngine, DirectChat, DirectEngine, HttpRequest, closing_transports
from ._dspy import import_dspy
from ._errors import (
    ERROR_KINDS,
    LASTING_KINDS,
    TRANSIENT_KINDS,
    classify_error,
    describe_error,
    is_lasting,
    is_transient,
)
from ._factory import SCHEMA_PROVIDER, direct_eligible, fake_engine, make_lm, make_lms
from ._fake import (
    BEHAVIOURS,
    GARBAGE_TEXT,
    INSTRUCTION_PHRASE,
    PLAIN_INSTRUCTION,
    PROPOSED_INSTRUCTION,
    REFUSAL_TEXT,
    AsyncFakeEngine,
    FakeCall,
    FakeEngine,
    GoldBook,
    count_tokens,
)
from ._keys import api_key_for, key_for
from ._profiles import PROFILES, ProviderProfile
from ._replicas import AsyncReplicaEngine, EndpointCounter, ReplicaEngine, ReplicaPool
from ._stub_server import StubRequest, StubServer

__all__ = [
    "BEHAVIOURS",
    "ERROR_KINDS",
    "GARBAGE_TEXT",
    "INSTRUCTION_PHRASE",
    "LASTING_KINDS",
    "PLAIN_INSTRUCTION",
    "PROFILES",
    "PROPOSED_INSTRUCTION",
    "REFUSAL_TEXT",
    "SCHEMA_PROVIDER",
    "TRANSIENT_KINDS",
    "TRANSPORTS",
    "AsyncDirectEngine",
    "AsyncFakeEngine",
    "AsyncReplicaEngine",
    "CacheSettings",
    "ChatResult",
    "DirectChat",
    "DirectEngine",
    "EndpointCounter",
    "FakeCall",
    "FakeEngine",
    "GoldBook",
    "HttpRequest",
    "LMConfig",
    "ProviderProfile",
    "ReplicaEngine",
    "ReplicaPool",
    "StubRequest",
    "StubServer",
    "TokenUsage",
    "achat",
    "answer_price",
    "api_key_for",
    "bundled_models_file",
    "cache_settings",
    "chat",
    "classify_error",
    "closing_transports",
    "configure_cache",
    "count_tokens",
    "default_cache_dir",
    "default_response_cache_dir",
    "describe_error",
    "direct_eligible",
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
