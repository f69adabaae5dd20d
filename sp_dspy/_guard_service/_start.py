"""Starting the guard service from the command line's settings: guard, budget, token, then serve."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

from .._budget import NO_ERROR_LIMIT, BudgetCaps, Ledger, require_prices
from .._errors import ConfigError
from .._guard import Guard
from .._lm import LMConfig
from .._redact import register_secret
from .._runner._admission import case_worst_case
from .._runner._cost import run_pricing
from ._http import refuse_open_bind
from ._limits import ServiceLimits
from ._service import CheckLedger, GuardService


def bearer_token(variable: str | None) -> str | None:
    """The token ``--auth-token-env VAR`` names (registered as a secret: never in a line written)."""
    if variable is None:
        return None
    token = os.environ.get(variable, "")
    if not token.strip():
        raise ConfigError(f"--auth-token-env {variable}: the environment variable is not set or empty")
    if len(token) < 16:
        raise ConfigError(
            f"--auth-token-env {variable}: the token has {len(token)} characters; use at least 16"
        )
    register_secret(token)
    return token


def build_service(
    guard_spec: str | Path,
    lm_config: LMConfig,
    *,
    protocol: str | None,
    parser: str,
    policy: str | None,
    caps: BudgetCaps,
    limits: ServiceLimits,
    token: str | None,
    log: Callable[[str], None],
    scope: str = "conversation",
    on_error: str = "block",
) -> GuardService:
    """The service of ``guard_spec`` (an artifact directory or a program name) on ``lm_config``;
    ``scope`` and ``on_error`` as :class:`GuardService`'s."""
    guard = Guard.load(
        guard_spec, lm=lm_config, protocol=protocol, parser=parser, deadline=limits.request_timeout_s
    )
    budget = None
    if caps.any:
        pricing = run_pricing(guard.program, guard.protocol, lm_config)
        require_prices(caps, {lm_config.model: pricing})
        ledger = Ledger(caps, max_lm_errors=NO_ERROR_LIMIT)  # a failing LM: 502s, /readyz
        budget = CheckLedger(ledger, pricing, case_worst_case(guard.program, guard.protocol, pricing))
    return GuardService(
        guard,
        policy=policy,
        limits=limits,
        budget=budget,
        token=token,
        log=log,
        scope=scope,
        on_error=on_error,
    )


def serve(service: GuardService, host: str, port: int, *, announce: Callable[[str], None]) -> None:
    """Serve until Ctrl-C or SIGTERM, then stop gracefully (:meth:`GuardService.run`)."""
    refuse_open_bind(host, service.token)
    asyncio.run(service.run(host, port, announce=announce))
