"""Serving a guard over HTTP (``sp-dspy serve --guard``): one ``Guard`` behind an aiohttp service.

Names are imported from their modules on first use: the command line reads ``ServiceLimits``
for its help without importing aiohttp's server, which loads only when a guard is served.
``serve_guard`` runs a ``GuardServiceConfig`` (what ``serve --guard`` builds from its flags).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

_MODULES: dict[str, tuple[str, ...]] = {
    "._config": ("DEFAULT_GUARD_PORT", "GuardServiceConfig", "build_guard_service_config"),
    "._limits": ("ServiceLimits",),
    "._models": ("BatchRequest", "CheckAnswer", "CheckRequest"),
    "._openapi": ("openapi_document",),
    "._gateway_models": ("GuardrailAnswer", "GuardrailRequest", "ModerationAnswer", "ModerationRequest"),
    "._http": ("is_loopback", "refuse_open_bind"),
    "._service": ("CheckLedger", "GuardService"),
    "._start": ("ServingGuard", "StoppedAtOnce", "bearer_token", "build_service", "serve", "serve_guard"),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:  # the names as type checkers see them ("as" re-exports them)
    from ._config import DEFAULT_GUARD_PORT as DEFAULT_GUARD_PORT
    from ._config import GuardServiceConfig as GuardServiceConfig
    from ._config import build_guard_service_config as build_guard_service_config
    from ._gateway_models import GuardrailAnswer as GuardrailAnswer
    from ._gateway_models import GuardrailRequest as GuardrailRequest
    from ._gateway_models import ModerationAnswer as ModerationAnswer
    from ._gateway_models import ModerationRequest as ModerationRequest
    from ._http import is_loopback as is_loopback
    from ._http import refuse_open_bind as refuse_open_bind
    from ._limits import ServiceLimits as ServiceLimits
    from ._models import BatchRequest as BatchRequest
    from ._models import CheckAnswer as CheckAnswer
    from ._models import CheckRequest as CheckRequest
    from ._openapi import openapi_document as openapi_document
    from ._service import CheckLedger as CheckLedger
    from ._service import GuardService as GuardService
    from ._start import ServingGuard as ServingGuard
    from ._start import StoppedAtOnce as StoppedAtOnce
    from ._start import bearer_token as bearer_token
    from ._start import build_service as build_service
    from ._start import serve as serve
    from ._start import serve_guard as serve_guard

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
