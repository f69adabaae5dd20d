"""Which key an LM sends: the named variable, the provider's usual one, or a placeholder.

Keys come from the environment only, are registered for redaction when read, and are
resolved when an LM is built, so a missing key stops a run before its first call.
"""

from __future__ import annotations

import os

from .._errors import ConfigError
from .._redact import register_secret
from ._config import LMConfig
from ._profiles import PROFILES, is_private_endpoint

#: What self-hosted servers (vLLM, llama.cpp) accept when they check no key.
SELF_HOSTED_PLACEHOLDER_KEY = "EMPTY"


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


def key_for(config: LMConfig, api_base: str | None) -> str | None:
    """The key sent to ``api_base`` (None: a provider without a profile; DSPy's engine finds its key).

    ``api_key_env`` first, then the provider's usual variable; a self-hosted server
    without either gets :data:`SELF_HOSTED_PLACEHOLDER_KEY`.

    Raises:
        ConfigError: a hosted provider with no key set (one line naming the variable).
    """
    if config.api_key_env is not None:
        return api_key_for(config)
    profile = PROFILES.get(config.provider)
    if profile is None:  # a provider without a profile: LiteLLM reads its own variable, never a placeholder
        return None
    # A server of the user's own (a self-hosted kind, or ``openai/`` at a private address).
    own_server = profile.compatible_servers and api_base is not None and is_private_endpoint(api_base)
    if profile.self_hosted or own_server:
        return SELF_HOSTED_PLACEHOLDER_KEY
    value = os.environ.get(profile.key_env, "").strip() if profile.key_env else ""
    if not value:
        raise ConfigError(
            f"model '{config.display_name()}': no API key: set {profile.key_env} "
            f"(or name the variable holding the key with --api-key-env)"
        )
    register_secret(value)
    return value
