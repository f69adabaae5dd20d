"""The guard service: one ``Guard`` (one LM, one connection pool, one budget) behind HTTP.

Every check of every route is ``Guard.acheck`` through one path (``GuardService.judge``: the
limits, the budget, the metrics); the service adds only what a network needs (a bearer token,
body, message, rule and in-flight limits, one-line errors, metrics, a readiness probe, a
graceful stop). It is stateless: replicas behind a load balancer need nothing shared.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from .._budget import Admission, BudgetExceeded, Ledger, Reservation, Spend, spent, worst_case
from .._data import Case, Source, policy_rules
from .._errors import ConfigError, DataError
from .._guard import DEADLINE, Guard, Verdict
from .._interrupt import graceful_stop
from .._lm import achat, classify_error
from .._pricing import Pricing, prompt_bound
from .._redact import redact
from .._usage import Usage
from ._gateways import ON_ERROR, gateway_routes
from ._http import (
    Handler,
    JsonServer,
    Refused,
    error_answer,
    json_answer,
    json_body,
    refusal_class,
    unreadable_body,
    validated,
)
from ._limits import ServiceLimits
from ._metrics import ServiceMetrics
from ._models import BatchRequest, CheckRequest, ErrorBody
from ._openapi import openapi_document

#: The one endpoint a bearer token does not guard: a load balancer's liveness check.
OPEN = "/healthz"
#: Prometheus' text exposition format.
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
#: Seconds a stopping server, every check answered and no longer listening, still reads the
#: requests of connections it accepted just before (they get 503)...
LINGER_S = 0.25
#: ... and then waits for a connection whose request never came before closing it.
SHUTDOWN_S = 2.0
#: ``Retry-After`` seconds of a 429 (past ``--max-in-flight``).
RETRY_AFTER_S = 1
#: What the readiness probe asks the LM (a few tokens; never answered from the cache).
PROBE_MESSAGES = [{"role": "user", "content": "Reply with the word OK."}]


@dataclass(frozen=True)
class CheckLedger:
    """The service's caps (per process, since it started): the ledger each check is admitted by, the
    worst case of a check (every call of it) and the rate its answers are priced at."""

    ledger: Ledger
    pricing: Pricing
    worst: Callable[[Case], Reservation]

    def admitted(self, case: Case) -> AbstractAsyncContextManager[Admission]:
        """Admit one check of ``case`` (every call of it) for the block, which sets ``used``; raises
        ``BudgetExceeded`` when a cap cannot cover it, or once a cap refused a check (as eval does)."""
        if self.ledger.exhausted:
            raise BudgetExceeded(f"{self.ledger.refused_by} reached")
        return self.ledger.aadmitted("guard", self.worst(case))

    def probe(self) -> AbstractAsyncContextManager[Admission]:
        """Admit the readiness probe's call (a few tokens of prompt, the model's output limit)."""
        text = "\n".join(message["content"] for message in PROBE_MESSAGES)
        return self.ledger.aadmitted(
            "probe", worst_case(self.pricing, prompt_bound(text, len(PROBE_MESSAGES)))
        )

    def used(self, usage: Usage, calls: int) -> Spend:
        """What a check's verdict (or the probe's answer) used: a verdict does not say which answers
        were replayed from the cache, so every answer counts."""
        usd = usage.cost
        if usd is None and self.pricing.known:
            usd = self.pricing.usd(usage.prompt_tokens, usage.completion_tokens)
        return spent(
            calls, usage.prompt_tokens, usage.completion_tokens, usd, cached=False, replays_count=True
        )


#: Policies up to this many characters are parsed once each (at most 128 kept: a few MiB).
CACHED_POLICY_CHARS = 32 * 1024


def _rules_of(policy: str) -> dict[int, str]:
    """``{rule: text}`` of a policy: checks repeat a few policies, so those are parsed once each."""
    return _cached_rules(policy) if len(policy) <= CACHED_POLICY_CHARS else _parsed_rules(policy)


def _parsed_rules(policy: str) -> dict[int, str]:
    return policy_rules(policy, source=Source("policy"))


_cached_rules = functools.lru_cache(maxsize=128)(_parsed_rules)


class GuardService:
    """The HTTP service of one guard: :meth:`handle` answers a request, :meth:`run` serves them.

    ``scope`` is what a check judges unless its request says otherwise (``Guard.check``'s), and
    ``on_error`` what the gateway routes answer when the guard gives no verdict: ``block`` or ``allow``.
    """

    def __init__(
        self,
        guard: Guard,
        *,
        policy: str | None = None,
        limits: ServiceLimits = ServiceLimits(),
        budget: CheckLedger | None = None,
        token: str | None = None,
        log: Callable[[str], None] = lambda line: None,
        scope: str = "conversation",
        on_error: str = "block",
    ) -> None:
        if policy is not None:
            _rules_of(policy)  # a bad --policy is an error at start, not on every request
        guard.refuse_scope(scope)
        if on_error not in ON_ERROR:
            raise ConfigError(f"--on-error {on_error}: expected block or allow")
        self.scope = scope
        self.on_error = on_error
        self.guard = guard
        self.policy = policy
        self.limits = limits
        self.budget = budget
        self.token = token
        self.log = log
        self.metrics = ServiceMetrics()
        self.draining = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._probe: tuple[float, ErrorBody | None] | None = None  # (monotonic time, failure or None)
        self._probe_lock: asyncio.Lock | None = None
        self._expected = f"Bearer {token}".encode()
        self._routes = self.routes()

    # -- the application ---------------------------------------------------------------------

    def routes(self) -> dict[str, dict[str, Handler]]:
        """``{path: {method: handler}}`` of every endpoint (the gateways' included)."""
        return {
            "/v1/check": {"POST": self._check},
            "/v1/check/batch": {"POST": self._batch},
            **gateway_routes(self),
            "/healthz": {"GET": self._healthz},
            "/readyz": {"GET": self._readyz},
            "/metrics": {"GET": self._metrics},
            "/openapi.json": {"GET": self._openapi},
        }

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        """Every request: routed, its token checked, every failure one JSON line (never a
        traceback), every answer counted by endpoint."""
        routes = self._routes
        try:
            methods = routes.get(request.path)
            if methods is None:
                raise Refused(404, f"no such endpoint; the service has {', '.join(routes)}")
            if request.method not in methods:
                allowed = ", ".join(methods)
                raise Refused(405, f"method {request.method} not allowed here; use {allowed}",
                              headers={"Allow": allowed})  # fmt: skip
            self._check_token(request)
            response = await methods[request.method](request)
        except Refused as refusal:
            response = error_answer(refusal.status, str(refusal), refusal.error_class, refusal.headers)
        except (ConnectionError, HttpProcessingError) as exc:  # the body broke off, or its framing did
            line = unreadable_body(exc)
            self.log(redact(f"refused a malformed request from {request.remote}: 400 {line}"))
            response = error_answer(400, line, "malformed")
        except web.HTTPRequestEntityTooLarge:
            response = error_answer(
                413, f"body: larger than the limit of {self.limits.max_body_bytes} bytes (--max-body-kb)"
            )
        except Exception as exc:
            self.log(redact(f"internal error on {request.method} {request.path}: " + "".join(
                traceback.format_exception(exc)).rstrip()))  # fmt: skip
            response = error_answer(
                500, f"internal error ({type(exc).__name__}); the service's log has the details"
            )
        self.metrics.request(request.path if request.path in routes else "other", response.status)
        return response

    def _check_token(self, request: web.BaseRequest) -> None:
        if self.token is None or request.path == OPEN:
            return
        given = request.headers.get("Authorization", "")
        # Header bytes aiohttp could not decode arrive as surrogates: still a wrong token, not a 500.
        if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), self._expected):
            why = "missing" if not given else "wrong"
            raise Refused(401, f"Authorization: {why} bearer token", headers={"WWW-Authenticate": "Bearer"})

    # -- endpoints ---------------------------------------------------------------------------

    async def _check(self, request: web.BaseRequest) -> web.Response:
        self.refuse_draining()  # before the body: a stopping server may not read it in full
        body = validated(CheckRequest, await json_body(request))
        (answer,) = await self.judge(request.path, [body])
        if isinstance(answer, Refused):  # one check, nothing paid: the request's answer is the refusal
            raise answer
        status = 200
        if answer["status"] == "error":
            status = 504 if answer["error_class"] == DEADLINE else 502
        return json_answer(status, answer)

    async def _batch(self, request: web.BaseRequest) -> web.Response:
        self.refuse_draining()
        body = validated(BatchRequest, await json_body(request))
        count = len(body.checks)
        if count > self.limits.max_batch:
            raise Refused(
                422, f"checks: {count} checks, more than the limit of {self.limits.max_batch} (--max-batch)"
            )
        answers: list[dict[str, Any]] = []
        judged = await self.judge(request.path, body.checks)
        for number, (check, found) in enumerate(zip(body.checks, judged, strict=True), start=1):
            head: dict[str, Any] = {"line": number} if check.id is None else {"line": number, "id": check.id}
            if isinstance(found, Refused):
                error = redact(f"checks[{number - 1}]: {found}")
                answers.append({**head, "error": error, "error_class": refusal_class(found)})
            else:
                del found["id"]  # the line's own comes first
                answers.append({**head, **found})
        return json_answer(200, {"answers": answers})

    async def _healthz(self, request: web.BaseRequest) -> web.Response:
        return json_answer(200, {"status": "up"})

    async def _readyz(self, request: web.BaseRequest) -> web.Response:
        if self.draining:
            raise Refused(503, "shutting down", error_class="draining")
        if self.budget is not None and self.budget.ledger.exhausted:
            raise Refused(503, f"budget: {self.budget.ledger.refused_by} reached", error_class="budget")
        failure = await self._probed()
        if failure is not None:
            raise Refused(503, failure.error, error_class=failure.error_class)
        return json_answer(200, {"status": "ready"})

    async def _metrics(self, request: web.BaseRequest) -> web.Response:
        return web.Response(
            body=self.metrics.text(None if self.budget is None else self.budget.ledger).encode("utf-8"),
            headers={"Content-Type": PROMETHEUS_TEXT},
        )

    async def _openapi(self, request: web.BaseRequest) -> web.Response:
        return json_answer(200, openapi_document())

    # -- checks ------------------------------------------------------------------------------

    def rules(self, policy: str | None) -> dict[int, str]:
        """``{rule: text}`` of a request's policy (``None``: the service has none either); a 422 if bad."""
        if policy is None:
            raise Refused(422, _NO_POLICY)
        try:
            return _rules_of(policy)
        except DataError as exc:
            raise Refused(422, str(exc)) from None

    async def judge(self, route: str, checks: Sequence[CheckRequest]) -> list[dict[str, Any] | Refused]:
        """Every check of one request to ``route``, concurrently, holding that many ``--max-in-flight``
        slots: each its answer (a ``CheckAnswer``'s JSON data), or the refusal that kept it from a
        verdict (a bad input, a budget cap, an internal error). The one path of every route: a refused
        check never takes the others' paid answers with it; the route decides what to answer for it."""
        with self.slots(len(checks)):
            return list(await asyncio.gather(*(self._judged(route, check) for check in checks)))

    async def _judged(self, route: str, check: CheckRequest) -> dict[str, Any] | Refused:
        try:
            return await self._answer_check(route, check)
        except Refused as refusal:
            self.metrics.refusal(route, refusal_class(refusal))
            return refusal
        except Exception as exc:  # one check's failure: logged, its request's other checks still answered
            self.log(redact(f"internal error on POST {route}: " + "".join(
                traceback.format_exception(exc)).rstrip()))  # fmt: skip
            self.metrics.refusal(route, "internal")
            return Refused(500, f"internal error ({type(exc).__name__}); the service's log has the details")

    async def _answer_check(self, route: str, check: CheckRequest) -> dict[str, Any]:
        """One check through the guard, inside the limits and the budget; a bad input is a 422. Its
        policy and scope ``None``: the service's (``--policy``, ``--scope``)."""
        started = time.perf_counter()
        policy = check.policy if check.policy is not None else self.policy
        scope = check.scope or self.scope
        dialogue, framework = check.dialogue, check.framework
        rules = self.rules(policy)
        assert policy is not None  # rules() refused a missing one
        try:
            self.guard.refuse_scope(scope)
        except ConfigError as exc:
            raise Refused(422, str(exc)) from None
        if len(rules) > self.limits.max_rules:
            raise Refused(
                422,
                f"policy: {len(rules)} rules, more than the limit of {self.limits.max_rules} (--max-rules)",
            )
        if isinstance(dialogue, list) and len(dialogue) > self.limits.max_messages:
            raise Refused(422, f"messages: {len(dialogue)} messages, more than the limit of "
                          f"{self.limits.max_messages} (--max-messages)")  # fmt: skip
        verdict = await self._verdict(policy, dialogue, framework, scope)
        seconds = time.perf_counter() - started
        self.metrics.check(route, verdict, seconds)
        # A ``CheckAnswer`` (its schema is the API's), built as JSON data: validating the verdict
        # again would cost more than the rest of the service's work on it.
        answer = verdict.model_dump(mode="json")
        answer["violated"] = None if verdict.violated_rules is None else [
            {"rule": rule, "text": rules.get(rule, "")} for rule in verdict.violated_rules
        ]  # fmt: skip
        if verdict.error is not None:
            answer["error"] = redact(verdict.error)
        answer.update(latency_ms=round(seconds * 1000, 3), id=check.id)
        return answer

    async def _verdict(
        self, policy: str, dialogue: str | list[dict[str, Any]], framework: str, scope: str
    ) -> Verdict:
        """The guard's verdict, the check admitted by the budget first (a bad input is a 422 and costs nothing)."""
        try:
            if self.budget is None:
                return await self.guard.acheck(policy, dialogue, framework=framework, scope=scope)
            case = self.guard.case(policy, dialogue, framework=framework, scope=scope)
            async with self.budget.admitted(case) as admission:
                verdict = await self.guard.acheck(policy, dialogue, framework=framework, scope=scope)
                admission.used = self.budget.used(verdict.usage, admission.ticket.calls)
                return verdict
        except DataError as exc:
            raise Refused(422, str(exc)) from None
        except BudgetExceeded as exc:
            raise Refused(503, f"budget: {exc} (the service's caps count since it started)",
                          error_class="budget") from None  # fmt: skip

    @contextmanager
    def slots(self, count: int) -> Iterator[None]:
        """Hold ``count`` of the ``--max-in-flight`` checks while the block runs, or refuse (429, 503)."""
        self.refuse_draining()
        metrics = self.metrics
        if count > self.limits.max_in_flight:  # waiting would never help: refused for good
            raise Refused(413, f"checks: {count} in one request, more than the limit of "
                          f"{self.limits.max_in_flight} checks in flight (--max-in-flight); split it")  # fmt: skip
        if metrics.in_flight + count > self.limits.max_in_flight:
            raise Refused(429, f"too many checks in flight (limit {self.limits.max_in_flight}, --max-in-flight); "
                          f"retry after {RETRY_AFTER_S} s", error_class="busy",
                          headers={"Retry-After": str(RETRY_AFTER_S)})  # fmt: skip
        metrics.in_flight += count
        self._idle.clear()
        try:
            yield
        finally:
            metrics.in_flight -= count
            if metrics.in_flight == 0:
                self._idle.set()

    def refuse_draining(self) -> None:
        if self.draining:
            raise Refused(
                503, "shutting down: no new checks", error_class="draining", headers={"Connection": "close"}
            )

    async def _probed(self) -> ErrorBody | None:
        """The last probe's failure (None: the LM answered), probing again past ``probe_interval_s``."""
        if self._probe_lock is None:
            self._probe_lock = asyncio.Lock()
        async with self._probe_lock:
            now = time.monotonic()
            if self._probe is None or now - self._probe[0] >= self.limits.probe_interval_s:
                self._probe = (now, await self._probe_once())
            return self._probe[1]

    async def _probe_once(self) -> ErrorBody | None:
        lm = self.guard.lm
        if lm is None:
            return ErrorBody(error="no LM configured", error_class="no_lm")
        try:
            async with asyncio.timeout(self.guard.deadline):
                if self.budget is None:
                    await achat(lm, PROBE_MESSAGES, cache=False)
                else:  # a paid call like any other: admitted by the caps
                    async with self.budget.probe() as admission:
                        answer = await achat(lm, PROBE_MESSAGES, cache=False)
                        admission.used = self.budget.used(answer.usage or Usage(), 1)
        except BudgetExceeded as exc:
            return ErrorBody(error=f"budget: {exc}", error_class="budget")
        except Exception as exc:
            kind = DEADLINE if isinstance(exc, TimeoutError) else classify_error(exc)
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return ErrorBody(error=redact(f"LM probe failed ({kind}): {message}"), error_class=kind)
        return None

    # -- serving -----------------------------------------------------------------------------

    async def run(self, host: str, port: int, *, announce: Callable[[str], None]) -> None:
        """Serve on ``host:port`` (``announce`` gets its URL) until Ctrl-C, SIGTERM or this task's
        cancellation, then stop gracefully: new checks get 503 while those in flight finish, then
        the listener and the LM's pool close. A second Ctrl-C or SIGTERM stops at once."""
        # By cleanup every check has been answered: what is left is a connection that raced the stop.
        server = JsonServer(
            self.handle, log=self.log, client_max_size=self.limits.max_body_bytes, access_log=None
        )
        runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=SHUTDOWN_S)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port, backlog=1024)
            try:
                await site.start()
            except OSError as exc:
                raise ConfigError(
                    f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})"
                ) from None
            bound = runner.addresses[0][1] if runner.addresses else port  # port 0: the one the OS picked
            shown = f"[{host}]" if ":" in host else host
            announce(f"http://{shown}:{bound}")
            stop = asyncio.Event()
            with graceful_stop(asyncio.get_running_loop(), stop.set):
                try:
                    await stop.wait()
                except asyncio.CancelledError:  # the caller's stop (no signal handlers off the main thread)
                    task = asyncio.current_task()
                    if task is not None:
                        task.uncancel()
                self.draining = True
                if not self._idle.is_set():
                    self.log(
                        f"stopping: {self.metrics.in_flight} check(s) in flight finish; new ones get 503"
                    )
                await self._idle.wait()
                # Stop listening, then let connections accepted just before read their request
                # and answer it (503) before the open connections close.
                await site.stop()
                await asyncio.sleep(LINGER_S)
        finally:
            await runner.cleanup()
            await self.guard.aclose()


_NO_POLICY = "policy: missing (give it in the body, or start the service with --policy FILE)"
