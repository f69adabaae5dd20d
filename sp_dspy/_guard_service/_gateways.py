"""The gateway routes: LiteLLM's Generic Guardrail API and OpenAI's moderation API over the same
checks as ``/v1/check`` (``GuardService.judge``: token, limits, budget, metrics).

A gateway reads yes or no: a verdict with violated rules blocks (``BLOCKED``, ``flagged``), one
without lets the call go on, and a check that gave no verdict (an LM error, a refusal, an answer
that did not parse, a deadline) follows ``--on-error``: ``block`` (the default) or ``allow``,
with the reason in the answer and one line in the log. So does a moderation input the service
did not judge while it judged others of the request (a budget cap, a bad input): their answers
are paid for and come back; a request none of whose checks was judged gets the refusal's status.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from aiohttp import web

from .._data import SCOPES
from .._guard import Guard
from .._redact import redact
from ._gateway_models import GuardrailRequest, ModerationRequest
from ._http import Handler, Refused, json_answer, json_body, refusal_class, validated
from ._limits import ServiceLimits
from ._models import CheckRequest

GUARDRAIL_PATH = "/beta/litellm_basic_guardrail_api"
MODERATIONS_PATH = "/v1/moderations"
#: ``--on-error``: what a gateway answers when the guard gave no verdict.
ON_ERROR = ("block", "allow")
#: The user turn put before a conversation that starts with the assistant (the guard's conversations
#: start with a user turn), and before a response LiteLLM sends without its request.
NOT_SENT = "(not sent to the guard)"
_TURN_START = "turn 1 - user:"
#: The ``sp_dspy.status`` of a moderation input the service did not judge (``error_class`` says why).
NOT_JUDGED = "not_judged"


class Service(Protocol):
    """What a gateway route uses of the service (``_service.GuardService``): its checks, inside
    its limits and budget, and its settings."""

    guard: Guard
    policy: str | None
    scope: str
    on_error: str
    limits: ServiceLimits

    def log(self, line: str) -> None: ...

    def rules(self, policy: str | None) -> dict[int, str]: ...

    def refuse_draining(self) -> None: ...

    async def judge(self, route: str, checks: Sequence[CheckRequest]) -> list[dict[str, Any] | Refused]: ...


def gateway_routes(service: Service) -> dict[str, dict[str, Handler]]:
    """The gateway endpoints of ``service``: ``{path: {method: handler}}``."""
    return {
        GUARDRAIL_PATH: {"POST": functools.partial(_guardrail, service)},
        MODERATIONS_PATH: {"POST": functools.partial(_moderations, service)},
    }


async def _guardrail(service: Service, request: web.BaseRequest) -> web.Response:
    service.refuse_draining()
    body = validated(GuardrailRequest, await json_body(request))
    params = body.additional_provider_specific_params or {}
    policy, scope = _param(params, "policy"), _param(params, "scope")
    if scope is not None and scope not in SCOPES:
        raise Refused(
            422, f"additional_provider_specific_params.scope: {scope!r}: expected conversation or last-turn"
        )
    check = CheckRequest.model_validate(
        {"policy": policy, "messages": conversation_of(body), "id": body.litellm_call_id, "scope": scope}
    )
    # One check: refused, nothing was paid, and the refusal's status is the answer (LiteLLM's fail_on_error).
    (answer,) = await service.judge(GUARDRAIL_PATH, [check])
    if isinstance(answer, Refused):
        raise answer
    extension, blocked = _extension(service, answer, GUARDRAIL_PATH)
    reason = None
    if answer["violated_rules"]:
        reason = "violates " + "; ".join(
            f"rule {item['rule']}: {item['text']}" for item in answer["violated"]
        )
    elif extension["on_error"] is not None:
        reason = _no_verdict(extension) if blocked else None
    document = {"action": "BLOCKED" if blocked else "NONE", "blocked_reason": reason, "sp_dspy": extension}
    return json_answer(200, document)


async def _moderations(service: Service, request: web.BaseRequest) -> web.Response:
    service.refuse_draining()
    body = validated(ModerationRequest, await json_body(request))
    texts = _inputs(body.input)
    if len(texts) > service.limits.max_batch:
        raise Refused(
            422,
            f"input: {len(texts)} inputs, more than the limit of {service.limits.max_batch} (--max-batch)",
        )
    policy = body.policy if body.policy is not None else service.policy
    rules = service.rules(policy)  # a bad or missing policy: 422 before any check
    found = await service.judge(MODERATIONS_PATH, [_check(text, policy) for text in texts])
    if all(isinstance(answer, Refused) for answer in found):  # none judged, nothing paid
        raise next(answer for answer in found if isinstance(answer, Refused))
    results = [_result(service, rules, index, answer) for index, answer in enumerate(found)]
    document = {
        "id": f"modr-{uuid.uuid4().hex}",
        "model": body.model or service.guard.label,
        "results": results,
        "sp_dspy": {
            "rules": {f"rule_{rule}": text for rule, text in rules.items()},
            "program": service.guard.label,
            "scope": service.scope,
        },
    }
    return json_answer(200, document)


def _result(
    service: Service, rules: Mapping[int, str], index: int, answer: dict[str, Any] | Refused
) -> dict[str, Any]:
    """One input's moderation result; an input the service refused (its request's others judged)
    is marked not judged and follows ``--on-error``."""
    if isinstance(answer, Refused):
        answer = {"status": NOT_JUDGED, "violated_rules": None, "error": redact(f"input[{index}]: {answer}"),
                  "error_class": refusal_class(answer)}  # fmt: skip
    extension, flagged = _extension(service, answer, MODERATIONS_PATH)
    violated = set(answer["violated_rules"] or ())
    # The model's P(violated) where the program records one (JSON keys: the rule numbers as text).
    probability = {int(rule): p for rule, p in (answer.get("rule_probabilities") or {}).items()}
    return {
        "flagged": flagged,
        "categories": {f"rule_{rule}": rule in violated for rule in rules},
        "category_scores": {
            f"rule_{rule}": probability.get(rule, 1.0 if rule in violated else 0.0) for rule in rules
        },
        "sp_dspy": extension,
    }


def conversation_of(body: GuardrailRequest) -> list[dict[str, str]]:
    """The chat messages to judge: ``structured_messages`` (else each text a user turn), a response's
    texts the assistant's reply; system, developer and tool messages are not judged."""
    if body.structured_messages:
        rows = [_message(index, row) for index, row in enumerate(body.structured_messages)]
        messages = [row for row in rows if row is not None]
    else:
        messages = (
            []
            if body.input_type == "response"
            else [{"role": "user", "content": t} for t in body.texts or ()]
        )
    if body.input_type == "response" and body.texts:
        messages.append({"role": "assistant", "content": "\n".join(body.texts)})
    merged: list[dict[str, str]] = []
    for message in messages:
        if not message["content"].strip():
            continue
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1] = {**merged[-1], "content": f"{merged[-1]['content']}\n{message['content']}"}
        else:
            merged.append(message)
    if not merged:
        raise Refused(422, "structured_messages, texts: no user or assistant text to check")
    if merged[0]["role"] == "assistant":
        merged.insert(0, {"role": "user", "content": NOT_SENT})
    return merged


def _message(index: int, row: Mapping[str, Any]) -> dict[str, str] | None:
    role = row.get("role")
    if role not in ("user", "assistant"):
        return None  # system and developer prompts, tool results: not what the two sides said
    content = row.get("content")
    if isinstance(content, list):  # content parts: their text
        content = "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    if content is not None and not isinstance(content, str):
        raise Refused(422, f"structured_messages[{index}].content: expected text or text parts")
    return {"role": str(role), "content": content or ""}


def _inputs(given: str | list[str] | list[dict[str, Any]]) -> list[str]:
    items: list[Any] = [given] if isinstance(given, str) else list(given)
    texts: list[str] = []
    for index, item in enumerate(items):
        text = item.get("text") if isinstance(item, dict) and item.get("type") == "text" else item
        if not isinstance(text, str):
            raise Refused(422, f"input[{index}]: only text parts ({{type: text, text}}) are judged")
        if not text.strip():
            raise Refused(422, f"input[{index}]: empty text")
        texts.append(text)
    if not texts:
        raise Refused(422, "input: no text to check")
    return texts


def _check(text: str, policy: str | None) -> CheckRequest:
    """A moderation input's check: ``Turn N`` text is a conversation, anything else one user message."""
    if text.lstrip().lower().startswith(_TURN_START):
        return CheckRequest(policy=policy, conversation=text)
    return CheckRequest(policy=policy, messages=[{"role": "user", "content": text}])


def _param(params: Mapping[str, Any], name: str) -> str | None:
    value = params.get(name)
    if value is not None and not isinstance(value, str):
        raise Refused(
            422, f"additional_provider_specific_params.{name}: expected a string, got {type(value).__name__}"
        )
    return value


def _extension(service: Service, answer: Mapping[str, Any], route: str) -> tuple[dict[str, Any], bool]:
    """``(the sp_dspy extension, blocked)`` of one check's answer, ``--on-error`` applied to no verdict."""
    extension = {
        key: answer.get(key)
        for key in ("status", "violated_rules", "error", "error_class", "latency_ms", "id")
    }
    extension["on_error"] = None
    if answer["violated_rules"] is not None:
        return extension, bool(answer["violated_rules"])
    extension["on_error"] = service.on_error
    blocked = service.on_error == "block"
    service.log(f"{route}: no verdict, {'blocked' if blocked else 'allowed'} (--on-error {service.on_error}): "
                f"{_no_verdict(extension)}")  # fmt: skip
    return extension, blocked


def _no_verdict(extension: Mapping[str, Any]) -> str:
    kind = f", {extension['error_class']}" if extension.get("error_class") else ""
    why = f": {extension['error']}" if extension.get("error") else ""
    return f"the guard gave no verdict (status {extension['status']}{kind}){why}"
