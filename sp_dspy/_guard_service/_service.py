"""The guard service: one ``Guard`` (one LM, one connection pool, one budget) behind HTTP.

Every check is ``Guard.acheck``, batches run through ``answer_lines`` as ``check --batch``
does: the service adds only what a network needs (a bearer token, body, message, rule and
in-flight limits, one-line errors, metrics, a readiness probe, a graceful stop). It is
stateless: replicas behind a load balancer need nothing shared.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import ipaddress
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from aiohttp import web
from pydantic import BaseModel, ValidationError

from .._budget import Admission, BudgetExceeded, Ledger, Reservation, Spend, spent
from .._data import BadLine, Case, GuardLine, Source, policy_rules
from .._errors import ConfigError, DataError, validation_problem
from .._guard import Guard, LineAnswer, Verdict, answer_lines
from .._guard._guard import DEADLINE
from .._interrupt import graceful_stop
from .._lm import classify_error
from .._pricing import Pricing
from .._redact import redact
from ._limits import ServiceLimits
from ._metrics import ServiceMetrics
from ._models import BatchRequest, CheckRequest, ErrorBody, openapi_document

_Model = TypeVar("_Model", bound=BaseModel)

#: The endpoints (anything else is counted as ``other`` in the metrics).
ENDPOINTS = ("/v1/check", "/v1/check/batch", "/healthz", "/readyz", "/metrics", "/openapi.json")
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


class Refused(Exception):
    """A request the service answers with an error status and one line (``str``: the line)."""

    def __init__(
        self, status: int, message: str, *, error_class: str | None = None, headers: Mapping[str, str] = {}
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_class = error_class
        self.headers = dict(headers)


@dataclass(frozen=True)
class CheckLedger:
    """The service's caps (per process, since it started): the ledger each check is admitted by, the
    worst case of a check (every call of it) and the rate its answers are priced at."""

    ledger: Ledger
    pricing: Pricing
    worst: Callable[[Case], Reservation]

    def admitted(self, case: Case) -> AbstractContextManager[Admission]:
        """Admit one check of ``case`` (every call of it) for the block, which sets ``used``; raises
        ``BudgetExceeded`` when a cap cannot cover it, or once a cap refused a check (as eval does)."""
        if self.ledger.exhausted:
            raise BudgetExceeded(f"{self.ledger.refused_by} reached")
        return self.ledger.admitted("guard", self.worst(case))

    def spend(self, verdict: Verdict, calls: int) -> Spend:
        """What a check's verdict used: a verdict does not say which answers were replayed from the
        cache, so every answer counts."""
        usage = verdict.usage
        usd = usage.cost
        if usd is None and self.pricing.known:
            usd = self.pricing.usd(usage.prompt_tokens, usage.completion_tokens)
        return spent(
            calls, usage.prompt_tokens, usage.completion_tokens, usd, cached=False, replays_count=True
        )


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the service on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


#: Policies up to this many characters are parsed once each (at most 128 kept: a few MiB).
CACHED_POLICY_CHARS = 32 * 1024


def _rules_of(policy: str) -> dict[int, str]:
    """``{rule: text}`` of a policy: checks repeat a few policies, so those are parsed once each."""
    return _cached_rules(policy) if len(policy) <= CACHED_POLICY_CHARS else _parsed_rules(policy)


def _parsed_rules(policy: str) -> dict[int, str]:
    return policy_rules(policy, source=Source("policy"))


_cached_rules = functools.lru_cache(maxsize=128)(_parsed_rules)


class GuardService:
    """The HTTP service of one guard; :meth:`app` is its aiohttp application, :meth:`run` serves it."""

    def __init__(
        self,
        guard: Guard,
        *,
        policy: str | None = None,
        limits: ServiceLimits = ServiceLimits(),
        budget: CheckLedger | None = None,
        token: str | None = None,
        log: Callable[[str], None] = lambda line: None,
    ) -> None:
        if policy is not None:
            _rules_of(policy)  # a bad --policy is an error at start, not on every request
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

    # -- the application ---------------------------------------------------------------------

    def app(self) -> web.Application:
        """The aiohttp application: routes, then the error, metrics and token middlewares."""
        app = web.Application(
            middlewares=[self._answer_middleware, self._token_middleware],
            client_max_size=self.limits.max_body_bytes,
        )
        app.router.add_post("/v1/check", self._check)
        app.router.add_post("/v1/check/batch", self._batch)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/openapi.json", self._openapi)
        return app

    @web.middleware
    async def _answer_middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Every failure becomes one JSON line (never a traceback), and every answer is counted."""
        try:
            response = await handler(request)
        except Refused as refusal:
            response = _error(refusal.status, str(refusal), refusal.error_class, refusal.headers)
        except web.HTTPException as exc:  # aiohttp's own: 404, 405, 413
            response = _error(exc.status, _http_line(exc, self.limits), None, _kept_headers(exc))
        except Exception as exc:
            self.log(redact(f"internal error on {request.method} {request.path}: " + "".join(
                traceback.format_exception(exc)).rstrip()))  # fmt: skip
            response = _error(
                500, f"internal error ({type(exc).__name__}); the service's log has the details"
            )
        endpoint = request.path if request.path in ENDPOINTS else "other"
        self.metrics.request(endpoint, response.status)
        return response

    @web.middleware
    async def _token_middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if self.token is not None and request.path != OPEN:
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
                why = "missing" if not given else "wrong"
                raise Refused(
                    401, f"Authorization: {why} bearer token", headers={"WWW-Authenticate": "Bearer"}
                )
        return await handler(request)

    # -- endpoints ---------------------------------------------------------------------------

    async def _check(self, request: web.Request) -> web.Response:
        self._refuse_draining()  # before the body: a stopping server may not read it in full
        body = _validated(CheckRequest, await _json_body(request))
        with self._slots(1):
            answer = await self._answer(body.policy, body.dialogue, body.framework, body.id)
        status = 200
        if answer["status"] == "error":
            status = 504 if answer["error_class"] == DEADLINE else 502
        return _json(status, answer)

    async def _batch(self, request: web.Request) -> web.Response:
        self._refuse_draining()
        body = _validated(BatchRequest, await _json_body(request))
        count = len(body.checks)
        if count > self.limits.max_batch:
            raise Refused(
                422, f"checks: {count} checks, more than the limit of {self.limits.max_batch} (--max-batch)"
            )
        lines: list[GuardLine | BadLine] = []
        for number, check in enumerate(body.checks, start=1):
            policy = check.policy if check.policy is not None else self.policy
            if policy is None:
                lines.append(BadLine(number, check.id, f"checks[{number - 1}]: {_NO_POLICY}"))
            else:
                lines.append(GuardLine(number, check.id, policy, check.dialogue, check.framework))
        answers: list[LineAnswer] = []

        async def answer(line: GuardLine) -> dict[str, Any]:
            found = await self._answer(line.policy, line.conversation, line.framework, None)
            del found["id"]  # the line's own comes first
            return found

        with self._slots(count):
            await answer_lines(lines, answer, lambda done: answers.append(_masked(done)), concurrency=count)
        return _json(200, {"answers": answers})

    async def _healthz(self, request: web.Request) -> web.Response:
        return _json(200, {"status": "up"})

    async def _readyz(self, request: web.Request) -> web.Response:
        if self.draining:
            raise Refused(503, "shutting down", error_class="draining")
        if self.budget is not None and self.budget.ledger.exhausted:
            raise Refused(503, f"budget: {self.budget.ledger.refused_by} reached", error_class="budget")
        failure = await self._probed()
        if failure is not None:
            raise Refused(503, failure.error, error_class=failure.error_class)
        return _json(200, {"status": "ready"})

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self.metrics.text(None if self.budget is None else self.budget.ledger).encode("utf-8"),
            headers={"Content-Type": PROMETHEUS_TEXT},
        )

    async def _openapi(self, request: web.Request) -> web.Response:
        return _json(200, openapi_document())

    # -- checks ------------------------------------------------------------------------------

    async def _answer(
        self, policy: str | None, dialogue: str | list[dict[str, Any]], framework: str, request_id: str | None
    ) -> dict[str, Any]:
        """One check through the guard, inside the limits and the budget; a bad input is a 422."""
        started = time.perf_counter()
        policy = policy if policy is not None else self.policy
        if policy is None:
            raise Refused(422, _NO_POLICY)
        try:
            rules = _rules_of(policy)
        except DataError as exc:
            raise Refused(422, str(exc)) from None
        if len(rules) > self.limits.max_rules:
            raise Refused(
                422,
                f"policy: {len(rules)} rules, more than the limit of {self.limits.max_rules} (--max-rules)",
            )
        if isinstance(dialogue, list) and len(dialogue) > self.limits.max_messages:
            raise Refused(422, f"messages: {len(dialogue)} messages, more than the limit of "
                          f"{self.limits.max_messages} (--max-messages)")  # fmt: skip
        verdict = await self._verdict(policy, dialogue, framework)
        seconds = time.perf_counter() - started
        self.metrics.check(verdict.status, verdict.error_class, verdict.usage, seconds)
        # A ``CheckAnswer`` (its schema is the API's), built as JSON data: validating the verdict
        # again would cost more than the rest of the service's work on it.
        answer = verdict.model_dump(mode="json")
        answer["violated"] = None if verdict.violated_rules is None else [
            {"rule": rule, "text": rules.get(rule, "")} for rule in verdict.violated_rules
        ]  # fmt: skip
        if verdict.error is not None:
            answer["error"] = redact(verdict.error)
        answer.update(latency_ms=round(seconds * 1000, 3), id=request_id)
        return answer

    async def _verdict(self, policy: str, dialogue: str | list[dict[str, Any]], framework: str) -> Verdict:
        """The guard's verdict, the check admitted by the budget first (a bad input is a 422 and costs nothing)."""
        try:
            if self.budget is None:
                return await self.guard.acheck(policy, dialogue, framework=framework)
            case = self.guard.case(policy, dialogue, framework=framework)
            with self.budget.admitted(case) as admission:
                verdict = await self.guard.acheck(policy, dialogue, framework=framework)
                admission.used = self.budget.spend(verdict, admission.ticket.calls)
                return verdict
        except DataError as exc:
            raise Refused(422, str(exc)) from None
        except BudgetExceeded as exc:
            raise Refused(503, f"budget: {exc} (the service's caps count since it started)",
                          error_class="budget") from None  # fmt: skip

    @contextmanager
    def _slots(self, count: int) -> Iterator[None]:
        """Hold ``count`` of the ``--max-in-flight`` checks while the block runs, or refuse (429, 503)."""
        self._refuse_draining()
        metrics = self.metrics
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

    def _refuse_draining(self) -> None:
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
                await lm.acall(messages=PROBE_MESSAGES, cache=False)
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
        runner = web.AppRunner(self.app(), handle_signals=False, access_log=None, shutdown_timeout=SHUTDOWN_S)
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


def _error(
    status: int, message: str, error_class: str | None = None, headers: Mapping[str, str] = {}
) -> web.Response:
    body = ErrorBody(error=redact(message), error_class=error_class)
    return _json(status, body.model_dump(exclude_none=True), headers)


def _masked(answer: LineAnswer) -> LineAnswer:
    """A batch answer whose error (a check that raised: its exception's text) shows no key."""
    if "status" not in answer and "error" in answer:
        answer["error"] = redact(answer["error"])
    return answer


def _json(status: int, document: Mapping[str, Any], headers: Mapping[str, str] = {}) -> web.Response:
    return web.Response(
        status=status, body=orjson.dumps(document), content_type="application/json", headers=headers
    )


def _kept_headers(exc: web.HTTPException) -> dict[str, str]:
    return {name: value for name, value in exc.headers.items() if name in ("Allow", "Retry-After")}


def _http_line(exc: web.HTTPException, limits: ServiceLimits) -> str:
    """One line for aiohttp's own refusals (its texts are not ours to show)."""
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return f"body: larger than the limit of {limits.max_body_bytes} bytes (--max-body-kb)"
    if isinstance(exc, web.HTTPNotFound):
        return f"no such endpoint; the service has {', '.join(ENDPOINTS)}"
    if isinstance(exc, web.HTTPMethodNotAllowed):
        return f"method {exc.method} not allowed here; use {', '.join(sorted(exc.allowed_methods))}"
    return exc.reason


async def _json_body(request: web.Request) -> Any:
    raw = await request.read()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Refused(400, f"body: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None


def _validated(model: type[_Model], document: Any) -> _Model:
    if not isinstance(document, dict):
        raise Refused(422, f"body: expected a JSON object, got {type(document).__name__}")
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        field, message = validation_problem(exc)
        raise Refused(422, f"{field or 'body'}: {message}") from None


def refuse_open_bind(host: str, token: str | None) -> None:
    """A bind beyond loopback without a token would serve anyone who reaches the port: refused."""
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"--host {host}: serving beyond this machine needs --auth-token-env VAR (a bearer token every "
            "endpoint but /healthz requires)"
        )
