"""Import DSPy the way sp-dspy needs it: offline (no price list fetched over the network)."""

from __future__ import annotations

import os
from types import ModuleType


def ensure_offline_env() -> None:
    """Stop LiteLLM from fetching its price list over the network on import."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def import_dspy() -> ModuleType:
    """``import dspy`` with the offline environment in place (call this, not ``import``)."""
    ensure_offline_env()
    import dspy

    return dspy
