"""The one factory of LMs: ``fake/...`` gets the fake engine, several ``api_bases`` the replica
router, a profiled provider sp-dspy's HTTP engine (unless ``transport: dspy``), anything else DSPy's own.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

from .._errors import ConfigError
from .._redact import redact
from ._cache import ENDPOINT_GROUP_KEY, endpoint_key, ensure_cache_configured, register_endpoint_group
from ._config import LMConfig, display_endpoint
from ._direct import AsyncDirectEngine, DirectChat, DirectEngine
from ._dspy import import_dspy
from ._fake import AsyncFakeEngine, FakeEngine
from ._profiles import PROFILES, SELF_HOSTED_PLACEHOLDER_KEY, key_for, model_id
from ._replicas import AsyncReplicaEngine, ReplicaEngine, ReplicaPool

if TYPE_CHECKING:
    import dspy

SCHEMA_PROVIDER = "sp-openai-compatible"


@functools.cache
def register_schema_provider() -> str:
    """Declare :data:`SCHEMA_PROVIDER` to DSPy (once) and return its id: DSPy's engine sends
    ``response_format`` only to a model known to support JSON schemas, and this provider says so."""
    dspy = import_dspy()
    lm15 = dspy.lm15
    access = lm15.AccessPolicy(
        provider=SCHEMA_PROVIDER,
        supports=lm15.EndpointSupport(complete=True, stream=True, models=True),
        auth_modes=("bearer",),
        # A placeholder: every LM built here passes its own api_base.
        base_url="http://127.0.0.1:8000/v1",
    )
    compat = dataclasses.replace(lm15.OpenAIChatCompat.preset("vllm"), json_schema="send")
    definition = lm15.ProviderDefinition.chat(
        access,
        compat=compat,
        placeholder_key=SELF_HOSTED_PLACEHOLDER_KEY,
        note="self-hosted OpenAI-compatible server with JSON-schema output (sp-dspy)",
    )
    lm15.register_provider(definition, supports=lm15.ModelSupport(response_schema=True))
    return SCHEMA_PROVIDER


def make_lm(config: LMConfig, *, endpoint: int | None = None) -> dspy.LM:
    """A ``dspy.LM`` for ``config``; ``endpoint`` picks one of several ``api_bases``, and with
    none the LM spreads its requests over all of them (``_replicas``).

    Raises:
        ConfigError: a missing key, an endpoint out of range, a transport that cannot serve
            the config, or a setting DSPy refuses (e.g. temperature 0 on an OpenAI reasoning model).
    """
    if config.is_fake:
        engine = FakeEngine(config.model)
        # Never cached: the answers depend on registered gold cases and queued replies.
        uncached = config.model_copy(update={"cache": False})
        return _lm(uncached, config.model, engine=engine, async_engine=AsyncFakeEngine(engine))
    bases = config.api_bases
    name = config.display_name()
    if endpoint is None and len(bases) > 1:
        if config.transport == "direct":
            raise ConfigError(
                f"model '{name}': transport 'direct' serves one endpoint; "
                "replicas (a comma-separated --api-base) go through LiteLLM's router: use 'auto' or 'dspy'"
            )
        return _replica_lm(config, key_for(config, bases[0]) or SELF_HOSTED_PLACEHOLDER_KEY)
    endpoint = endpoint or 0
    if bases and not 0 <= endpoint < len(bases):
        raise ConfigError(f"model '{name}': endpoint {endpoint} of {len(bases)} does not exist")
    if len(bases) > 1:
        register_endpoint_group(bases)
    ensure_cache_configured()
    profile = PROFILES.get(config.provider)
    if profile is not None and config.transport != "dspy" and (bases or profile.base_url is not None):
        api_base = bases[endpoint] if bases else str(profile.base_url)
        client = DirectChat(config, api_base)
        engines = {"engine": DirectEngine(client), "async_engine": AsyncDirectEngine(client)}
        # The endpoint's group in DSPy's cache keys, as results show endpoints (no credentials).
        metadata = {ENDPOINT_GROUP_KEY: display_endpoint(endpoint_key(api_base))}
        return _lm(config, config.model, metadata=metadata, **engines)
    if config.transport == "direct":
        known = ", ".join(sorted(PROFILES))
        raise ConfigError(
            f"model '{name}': transport 'direct' (sp-dspy's HTTP engine) speaks to {known}; "
            f"use 'auto' or 'dspy' for {config.provider or config.model}"
        )
    return _dspy_engine_lm(config, bases[endpoint] if bases else None)


def _replica_lm(config: LMConfig, api_key: str) -> dspy.LM:
    """An LM spreading its requests over all ``api_bases`` (``lm.endpoint_requests``: what each served)."""
    register_endpoint_group(config.api_bases)
    pool = ReplicaPool(config.api_bases, model_id(config.model), api_key=api_key, timeout=config.timeout)
    ensure_cache_configured()
    engine = ReplicaEngine(pool, json_schema=config.json_schema)
    async_engine = AsyncReplicaEngine(pool, json_schema=config.json_schema)
    effort = {} if config.reasoning_effort is None else {"reasoning_effort": config.reasoning_effort}
    # Saved with programs and shown in history: the group as the manifest writes endpoints.
    metadata = {ENDPOINT_GROUP_KEY: ",".join(pool.counter)}
    lm = _lm(config, config.model, engine=engine, async_engine=async_engine, metadata=metadata, **effort)
    lm.endpoint_requests = pool.counter
    return lm


def _dspy_engine_lm(config: LMConfig, api_base: str | None) -> dspy.LM:
    """An LM on DSPy's own engine (its native clients or LiteLLM), keys and endpoint given; its
    answers masked as each call returns them (DSPy produces them, not an sp-dspy engine)."""
    from ._dspy_answers import ANSWER_REDACTION  # imports DSPy

    key = key_for(config, api_base)
    model = config.model
    if api_base is not None and config.json_schema:
        model = f"{register_schema_provider()}/{model_id(config.model)}"
    settings = {
        "api_base": api_base,
        "api_key": key,
        "timeout": config.timeout,
        "reasoning_effort": config.reasoning_effort,
        "thinking": dict(config.thinking) if config.thinking is not None else None,
        "extra_headers": dict(config.extra_headers) if config.extra_headers else None,
        "extra_body": dict(config.extra_body) if config.extra_body else None,
        "callbacks": [ANSWER_REDACTION],
    }
    return _lm(config, model, **{name: value for name, value in settings.items() if value is not None})


def _lm(config: LMConfig, model: str, **kwargs: object) -> dspy.LM:
    dspy = import_dspy()
    try:
        return dspy.LM(
            model,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            cache=config.cache,
            num_retries=config.num_retries,
            **kwargs,
        )
    except (ValueError, TypeError, dspy.LMError) as exc:
        raise ConfigError(f"model '{config.display_name()}': {redact(str(exc)).splitlines()[0]}") from None


def fake_engine(lm: object) -> FakeEngine | None:
    """The :class:`FakeEngine` behind ``lm``, or None for a real model."""
    engine = getattr(lm, "engine", None)
    return engine if isinstance(engine, FakeEngine) else None
