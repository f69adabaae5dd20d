"""The guard service's HTTP plumbing: one-line JSON refusals, JSON bodies, and a server whose
malformed requests (bad framing, over-long headers, bytes that are not HTTP) are JSON 4xx too.

aiohttp answers a request it cannot parse itself, before any route or middleware, with a
plain-text 400 and a traceback in its log: any client could fill the log. The service runs
aiohttp's low-level ``web.Server`` with a ``web.RequestHandler`` whose ``handle_error`` (the
hook aiohttp calls for those) answers one JSON line and logs one line.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import orjson
from aiohttp import web
from aiohttp.http_exceptions import LineTooLong
from pydantic import BaseModel, ValidationError

from .._errors import ConfigError, validation_problem
from .._redact import redact
from ._models import ErrorBody

_Model = TypeVar("_Model", bound=BaseModel)
Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]

#: The one media type of request bodies (a form or text/plain POST from a web page gets 415).
JSON_TYPE = "application/json"


class Refused(Exception):
    """A request the service answers with an error status and one line (``str``: the line)."""

    def __init__(
        self, status: int, message: str, *, error_class: str | None = None, headers: Mapping[str, str] = {}
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_class = error_class
        self.headers = dict(headers)


def json_answer(status: int, document: Mapping[str, Any], headers: Mapping[str, str] = {}) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(document), content_type=JSON_TYPE, headers=headers)


def error_answer(
    status: int, message: str, error_class: str | None = None, headers: Mapping[str, str] = {}
) -> web.Response:
    body = ErrorBody(error=redact(message), error_class=error_class)
    return json_answer(status, body.model_dump(exclude_none=True), headers)


async def json_body(request: web.BaseRequest) -> Any:
    """The request's JSON document; another media type is a 415, bad JSON a 400."""
    if request.content_type != JSON_TYPE:
        given = request.content_type if request.headers.get("Content-Type") else "none"
        raise Refused(415, f"Content-Type: {given}; the service accepts {JSON_TYPE} bodies only")
    raw = await request.read()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Refused(400, f"body: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None


def validated(model: type[_Model], document: Any) -> _Model:
    if not isinstance(document, dict):
        raise Refused(422, f"body: expected a JSON object, got {type(document).__name__}")
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        field, message = validation_problem(exc)
        raise Refused(422, f"{field or 'body'}: {message}") from None


def unreadable_body(exc: BaseException) -> str:
    """The line for a body that could not be read: its client left, or its chunks or length broke."""
    reason = (str(exc).splitlines() or [""])[0][:200].strip().rstrip(":") or type(exc).__name__
    return f"body: could not be read ({type(exc).__name__}: {reason})"


class _Connection(web.RequestHandler):
    """One client connection; a request aiohttp cannot parse gets one JSON line, logged in one line."""

    def __init__(self, server: JsonServer, **kwargs: Any) -> None:
        super().__init__(server, **kwargs)
        self._log = server.log

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if isinstance(exc, LineTooLong):
            status, line = 431, "headers: a request line or header is longer than the service accepts"
        elif status < 500:
            kind = type(exc).__name__ if exc is not None else "error"
            reason = ((message or kind).splitlines() or [kind])[0][:200].rstrip(": ")
            line = f"request: not valid HTTP/1.1 ({kind}: {reason})"
        else:
            line = f"internal error ({type(exc).__name__}); the service's log has the details"
        self._log(redact(f"refused a malformed request from {request.remote}: {status} {line}"))
        response = error_answer(status, line, "malformed" if status < 500 else None)
        response.force_close()
        return response


class JsonServer(web.Server):
    """aiohttp's low-level server, its connections answering malformed requests as :class:`_Connection`."""

    def __init__(
        self, handler: Handler, *, log: Callable[[str], None], client_max_size: int, **kwargs: Any
    ) -> None:
        super().__init__(handler, request_factory=self._request, **kwargs)
        self.log = log
        self._max_size = client_max_size
        self._settings = kwargs
        self._event_loop = asyncio.get_running_loop()

    def _request(self, message: Any, payload: Any, protocol: Any, writer: Any, task: Any) -> web.BaseRequest:
        return web.BaseRequest(
            message, payload, protocol, writer, task, self._event_loop, client_max_size=self._max_size
        )

    def __call__(self) -> web.RequestHandler:
        return _Connection(self, loop=self._event_loop, **self._settings)


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the service on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refuse_open_bind(host: str, token: str | None) -> None:
    """A bind beyond loopback without a token would serve anyone who reaches the port: refused."""
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"--host {host}: serving beyond this machine needs --auth-token-env VAR (a bearer token every "
            "endpoint but /healthz requires)"
        )
