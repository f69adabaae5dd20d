"""Provider profiles: how each model-string provider is reached on the wire, and which key it gets.

Keys come from the environment only and are resolved when an LM is built, so a missing key stops
a run before its first call. Self-hosted servers (vLLM, llama.cpp) accept a placeholder key;
``openai/`` gets it only at a loopback or private-network address.
"""

from __future__ import annotations

import ipaddress
import os
import re
import urllib.parse
from dataclasses import dataclass
from typing import Literal

from .._errors import ConfigError
from .._redact import register_secret
from ._config import LMConfig

Wire = Literal["openai-chat", "anthropic-messages"]


@dataclass(frozen=True, kw_only=True)
class ProviderProfile:
    """How one provider's requests are addressed, authenticated and spelled."""

    wire: Wire
    #: The provider's public endpoint (None: self-hosted, ``api_base`` is required).
    base_url: str | None = None
    #: The environment variable holding the provider's key (None: keyless servers).
    key_env: str | None = None
    #: Whether a server of this kind may get the placeholder key (``EMPTY``) when none is set.
    self_hosted: bool = False
    #: Whether the prefix also names self-run compatible servers (``openai/``): at a loopback
    #: or private-network ``api_base`` it is treated as self-hosted.
    compatible_servers: bool = False
    #: ``(model-id regex, field)``: models whose output cap is not ``max_tokens``.
    limit_field_for: tuple[tuple[str, str], ...] = ()
    #: Output cap sent when none is configured (Anthropic requires one); None: send none.
    default_limit: int | None = None
    #: Dotted body path of the reasoning effort (``reasoning.effort`` nests it); None: the server
    #: reads none (a harmony model there takes it in its system message, ``effort_setting``).
    effort_field: str | None = "reasoning_effort"
    #: Extra fixed headers of the wire (the API version Anthropic requires).
    headers: tuple[tuple[str, str], ...] = ()

    def limit_field_of(self, model_id: str) -> str:
        """The output-cap field for ``model_id`` (``max_completion_tokens`` for gpt-5.5)."""
        for pattern, field in self.limit_field_for:
            if re.search(pattern, model_id.lower()):
                return field
        return "max_tokens"


# OpenAI's reasoning families (o1, o3, o4-mini, every gpt-5 generation except -chat).
_OPENAI_REASONING = r"^(?:o[1345](?:-|$)|gpt-5(?:\.\d+)*(?!.*-chat))"
_SELF_HOSTED = ProviderProfile(wire="openai-chat", self_hosted=True)

PROFILES: dict[str, ProviderProfile] = {
    "openai": ProviderProfile(
        wire="openai-chat",
        base_url="https://api.openai.com/v1",
        key_env="OPENAI_API_KEY",
        compatible_servers=True,
        limit_field_for=((_OPENAI_REASONING, "max_completion_tokens"),),
    ),
    "anthropic": ProviderProfile(
        wire="anthropic-messages",
        base_url="https://api.anthropic.com",
        key_env="ANTHROPIC_API_KEY",
        default_limit=4096,
        headers=(("anthropic-version", "2023-06-01"),),
    ),
    # Google's OpenAI-compatible endpoint (what the reference harness uses), not generateContent.
    "gemini": ProviderProfile(
        wire="openai-chat",
        base_url="https://generativelanguage.googleapis.com/v1beta/openai",
        key_env="GEMINI_API_KEY",
    ),
    "xai": ProviderProfile(wire="openai-chat", base_url="https://api.x.ai/v1", key_env="XAI_API_KEY"),
    "openrouter": ProviderProfile(
        wire="openai-chat",
        base_url="https://openrouter.ai/api/v1",
        key_env="OPENROUTER_API_KEY",
        effort_field="reasoning.effort",
    ),
    "hosted_vllm": _SELF_HOSTED,
    "openai_like": _SELF_HOSTED,
    # llama.cpp's server has no reasoning-effort field.
    "llamacpp": ProviderProfile(wire="openai-chat", self_hosted=True, effort_field=None),
    "sp-openai-compatible": _SELF_HOSTED,
}


def model_id(model: str) -> str:
    """``hosted_vllm/Qwen/Qwen3-8B`` -> ``Qwen/Qwen3-8B`` (what the provider calls it)."""
    _, sep, rest = model.partition("/")
    return rest if sep else model


def is_private_endpoint(url: str) -> bool:
    """Whether ``url`` points at this machine or a private network (a self-run server)."""
    host = urllib.parse.urlsplit(url.strip()).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


#: What self-hosted servers (vLLM, llama.cpp) accept when they check no key.
SELF_HOSTED_PLACEHOLDER_KEY = "EMPTY"


def key_for(config: LMConfig, api_base: str | None) -> str | None:
    """The key sent to ``api_base``, registered for redaction (None: a provider without a profile,
    whose key DSPy's engine finds): ``api_key_env`` first, then the provider's usual variable; a
    self-hosted server without either gets :data:`SELF_HOSTED_PLACEHOLDER_KEY`. A password in
    ``api_base`` (``https://user:KEY@host``) is registered too.

    Raises:
        ConfigError: the variable holding the key is not set (one line naming it).
    """
    register_secret(urllib.parse.urlsplit(api_base.strip()).password if api_base else None)
    if config.api_key_env is not None:
        value = os.environ.get(config.api_key_env, "")
        if not value.strip():
            raise ConfigError(
                f"model '{config.display_name()}': api_key_env names {config.api_key_env}, which is not set"
            )
        register_secret(value)
        return value
    profile = PROFILES.get(config.provider)
    if profile is None:  # a provider without a profile: LiteLLM reads its own variable, never a placeholder
        return None
    value = os.environ.get(profile.key_env, "").strip() if profile.key_env else ""
    # A server of the user's own (a self-hosted kind, or ``openai/`` at a private address) gets
    # the placeholder only when the provider's variable is not set.
    own_server = profile.compatible_servers and api_base is not None and is_private_endpoint(api_base)
    if not value and (profile.self_hosted or own_server):
        return SELF_HOSTED_PLACEHOLDER_KEY
    if not value:
        raise ConfigError(
            f"model '{config.display_name()}': no API key: set {profile.key_env} "
            f"(or name the variable holding the key with --api-key-env)"
        )
    register_secret(value)
    return value
