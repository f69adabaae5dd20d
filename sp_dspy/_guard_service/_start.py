"""Starting the guard service from its config (``GuardServiceConfig``, what ``serve --guard`` builds from its
flags): token, bind address and policy checked, then the guard, its budget, and serving until stopped."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from .._budget import NO_ERROR_LIMIT, BudgetCaps, Ledger, require_prices
from .._data import Source, policy_rules
from .._errors import ConfigError
from .._guard import Guard
from .._lm import LMConfig
from .._redact import redact, register_secret
from .._regular import read_text
from .._runner import case_worst_case, run_pricing
from ._config import GuardServiceConfig
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


#: Turns the LM config into the one to call for the service's life (``sp-dspy serve`` starts ``local``).
Session = Callable[[LMConfig], AbstractContextManager[LMConfig]]


@dataclass(frozen=True)
class ServingGuard:
    """What ``serve_guard`` tells ``on_ready`` once the service listens: where, what and on which LM."""

    url: str
    guard: str  # the guard's label: the artifact directory or program name
    protocol: str
    model: str  # the LM's display name
    caps: BudgetCaps
    auth: bool  # whether every endpoint but /healthz needs the bearer token


class StoppedAtOnce(KeyboardInterrupt):
    """A second Ctrl-C or SIGTERM stopped the guard service at once: checks still in flight got no answer."""


def serve_guard(
    config: GuardServiceConfig,
    lm: LMConfig,
    *,
    session: Session | None = None,
    on_ready: Callable[[ServingGuard], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> None:
    """Serve ``config``'s guard on ``lm`` over HTTP until Ctrl-C or SIGTERM (handled in the main thread),
    then return once every check in flight was answered (new ones get 503); a second signal raises
    :class:`StoppedAtOnce`. An application with its own event loop runs ``GuardService.run`` instead.

    The token, bind address and policy are checked before ``session`` (which may start a local
    server) opens; ``log`` gets the service's log lines (default: the ``sp_dspy`` logger, redacted).
    Raises ``ConfigError`` / ``DataError``: one line naming the setting (as its flag) that is wrong.
    """
    token = bearer_token(config.auth_token_env)
    refuse_open_bind(config.host, token)  # before an LM or a local server starts
    policy = None
    if config.policy is not None:  # checked here to name the file: a bad policy costs nothing
        policy = read_text(config.policy, "--policy")
        policy_rules(policy, source=Source("policy", str(config.policy)))
    with (session or nullcontext)(lm) as live:
        service = build_service(
            config.guard, live, protocol=config.protocol, parser=config.parser, policy=policy, caps=config.caps,
            limits=config.limits, token=token, log=log or _log, scope=config.scope, on_error=config.on_error,
        )  # fmt: skip

        def announce(url: str) -> None:
            if on_ready is not None:
                guard = service.guard
                on_ready(ServingGuard(url, guard.label, guard.protocol, live.display_name(), config.caps,
                                      auth=token is not None))  # fmt: skip

        try:
            serve(service, config.host, config.port, announce=announce)
        except KeyboardInterrupt:
            raise StoppedAtOnce from None


def _log(line: str) -> None:
    logging.getLogger("sp_dspy").warning(redact(line))
