"""Build a ``dspy.LM`` from an :class:`LMConfig`: hosted APIs, self-hosted servers, the fake.

Everything that talks to a model (the official baseline, DSPy programs, optimizers)
gets its LM here, so keys, endpoints, retries, timeouts and caching are decided once.

Self-hosted servers (a config with ``api_base``) never receive a provider's ambient key
such as ``OPENAI_API_KEY``: they get the key named by ``api_key_env`` or the
placeholder ``EMPTY`` that vLLM and llama.cpp accept.

Structured output on self-hosted servers: DSPy only sends ``response_format`` to a
model it knows supports JSON schemas. A self-hosted model is unknown to its metadata,
so a config with ``json_schema: true`` and an ``api_base`` is routed through a provider
registered with ``dspy.lm15.register_provider`` that states schema support
(``sp-openai-compatible``: the OpenAI chat wire with vLLM's conventions). Its LM's
model string is ``sp-openai-compatible/<model id>``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from types import ModuleType
from typing import TYPE_CHECKING

from .._errors import ConfigError
from ._config import LMConfig
from ._redact import redact, register_secret

if TYPE_CHECKING:
    import dspy

    from ._fake import FakeEngine

SCHEMA_PROVIDER = "sp-openai-compatible"
SELF_HOSTED_PLACEHOLDER_KEY = "EMPTY"


def ensure_offline_env() -> None:
    """Stop LiteLLM from fetching its price list over the network on import."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def import_dspy() -> ModuleType:
    """``import dspy`` with the offline environment in place (call this, not ``import``)."""
    ensure_offline_env()
    import dspy

    return dspy


def api_key_for(config: LMConfig) -> str | None:
    """The key named by ``config.api_key_env`` (registered for redaction), or None."""
    if config.api_key_env is None:
        return None
    value = os.environ.get(config.api_key_env, "")
    if not value.strip():
        raise ConfigError(
            f"model '{config.display_name()}': api_key_env names {config.api_key_env}, which is not set"
        )
    register_secret(value)
    return value


@functools.cache
def register_schema_provider() -> str:
    """Declare :data:`SCHEMA_PROVIDER` to DSPy (once per process) and return its id."""
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


def _model_id(model: str) -> str:
    """``hosted_vllm/Qwen/Qwen3-8B`` -> ``Qwen/Qwen3-8B`` (what the server calls it)."""
    _, sep, rest = model.partition("/")
    return rest if sep else model


def _make_fake(config: LMConfig) -> dspy.LM:
    from ._fake import AsyncFakeEngine, FakeEngine, behaviour_of

    dspy = import_dspy()
    engine = FakeEngine(behaviour_of(config.model))
    # Never cached: the fake's answers depend on registered gold cases and queued
    # replies, which a cache keyed on the prompt cannot see.
    return dspy.LM(
        config.model,
        engine=engine,
        async_engine=AsyncFakeEngine(engine),
        cache=False,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        num_retries=config.num_retries,
    )


def make_lm(config: LMConfig, *, endpoint: int | None = None) -> dspy.LM:
    """A ``dspy.LM`` for ``config``; ``endpoint`` picks one of several ``api_bases``.

    With several ``api_bases`` and no ``endpoint``, the LM spreads its requests over
    all of them through LiteLLM's router (see ``_replicas``); ``lm.endpoint_requests``
    then counts what each endpoint served.

    Raises:
        ConfigError: a missing key variable, an endpoint index out of range, or a
            setting DSPy refuses (e.g. temperature 0 on an OpenAI reasoning model).
    """
    if config.is_fake:
        return _make_fake(config)
    dspy = import_dspy()
    from ._cache import ensure_cache_configured, register_endpoint_group

    bases = config.api_bases
    if endpoint is None and len(bases) > 1:
        from ._replicas import make_replica_lm

        if config.transport == "direct":
            raise ConfigError(
                f"model '{config.display_name()}': transport 'direct' serves one endpoint; "
                "replicas (a comma-separated --api-base) go through LiteLLM's router: use 'auto' or 'dspy'"
            )

        shared_key = api_key_for(config) or SELF_HOSTED_PLACEHOLDER_KEY
        return make_replica_lm(config, model_id=_model_id(config.model), api_key=shared_key)
    endpoint = endpoint or 0
    if bases and not 0 <= endpoint < len(bases):
        raise ConfigError(
            f"model '{config.display_name()}': endpoint {endpoint} of {len(bases)} does not exist"
        )
    kwargs: dict[str, object] = {}
    key = api_key_for(config)
    model = config.model
    if bases:
        kwargs["api_base"] = bases[endpoint]
        kwargs["api_key"] = key or SELF_HOSTED_PLACEHOLDER_KEY
        if len(bases) > 1:
            register_endpoint_group(bases)
        if config.json_schema:
            model = f"{register_schema_provider()}/{_model_id(config.model)}"
    elif key is not None:
        kwargs["api_key"] = key
    if config.timeout is not None:
        kwargs["timeout"] = config.timeout
    if config.reasoning_effort is not None:
        kwargs["reasoning_effort"] = config.reasoning_effort
    ensure_cache_configured()
    try:
        lm = dspy.LM(
            model,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            cache=config.cache,
            num_retries=config.num_retries,
            **kwargs,
        )
    except (ValueError, TypeError, dspy.utils.exceptions.LMError) as exc:
        raise ConfigError(f"model '{config.display_name()}': {redact(str(exc)).splitlines()[0]}") from None
    _attach_direct(lm, config, bases[endpoint] if bases else None, str(kwargs.get("api_key") or ""))
    return lm


def _attach_direct(lm: dspy.LM, config: LMConfig, api_base: str | None, api_key: str) -> None:
    """Give ``lm`` the direct transport when ``config.transport`` allows and the endpoint fits."""
    from ._direct import DirectChat, attach, direct_eligible

    if config.transport == "dspy":
        return
    if api_base is None or not direct_eligible(config, one_of_replicas=len(config.api_bases) > 1):
        if config.transport == "direct":
            raise ConfigError(
                f"model '{config.display_name()}': transport 'direct' needs one OpenAI-compatible "
                f"endpoint (--api-base with an openai/ or hosted_vllm/ model); use 'auto' or 'dspy'"
            )
        return
    attach(lm, DirectChat(config, api_base=api_base, api_key=api_key, model_id=_model_id(config.model)))


def make_lms(config: LMConfig) -> list[dspy.LM]:
    """One LM per endpoint of ``config`` (one LM when it has no or a single endpoint)."""
    return [make_lm(config, endpoint=i) for i in range(max(1, len(config.api_bases)))]


def fake_engine(lm: object) -> FakeEngine | None:
    """The :class:`FakeEngine` behind ``lm``, or None for a real model."""
    from ._fake import FakeEngine

    engine = getattr(lm, "engine", None)
    return engine if isinstance(engine, FakeEngine) else None
