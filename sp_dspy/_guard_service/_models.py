"""The guard service's request and answer bodies, and the OpenAPI document built from them.

Requests are validated with these models (one line per problem); the answers are what the
handlers send. The OpenAPI document is generated from the same models' JSON schemas, so it
cannot drift from what the service accepts and answers.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import models_json_schema

from .._guard import Verdict
from .._version import __version__


class CheckRequest(BaseModel):
    """One check: a policy and the conversation to check against it (chat messages or ``Turn N`` text)."""

    model_config = ConfigDict(extra="forbid")

    policy: str | None = Field(
        default=None,
        description="Numbered rules, one per line ('1. ...'); optional when the service was started with --policy.",
    )
    messages: list[dict[str, Any]] | None = Field(
        default=None, description="Chat messages: {role: user|assistant|system, content}."
    )
    conversation: str | None = Field(default=None, description="'Turn N - User/Chatbot: ...' text.")
    framework: str = Field(default="", description="Regulatory framework text shown to per-rule judges.")
    id: str | None = Field(default=None, description="Echoed with the verdict.")

    @model_validator(mode="after")
    def _one_conversation(self) -> Self:
        if (self.messages is None) == (self.conversation is None):
            raise ValueError("give exactly one of messages (chat messages) or conversation (Turn N text)")
        return self

    @property
    def dialogue(self) -> str | list[dict[str, Any]]:
        """What ``Guard.acheck`` takes as the conversation."""
        return self.messages if self.messages is not None else str(self.conversation)


class BatchRequest(BaseModel):
    """Several checks answered together, in order."""

    model_config = ConfigDict(extra="forbid")

    checks: list[CheckRequest] = Field(min_length=1)


class ViolatedRule(BaseModel):
    """A violated rule with its text, as the policy states it."""

    rule: int
    text: str


class CheckAnswer(Verdict):
    """The guard's ``Verdict`` with the violated rules' texts and the check's latency."""

    violated: list[ViolatedRule] | None = Field(
        description="The violated rules with their texts (None: no usable answer, see status)."
    )
    latency_ms: float = Field(description="Milliseconds the check took in the service, LM calls included.")
    id: str | None = Field(default=None, description="The request's id, when it gave one.")


class BatchVerdict(CheckAnswer):
    """One check of a batch: its verdict."""

    line: int = Field(description="The check's position in the batch, from 1.")


class BatchError(BaseModel):
    """One check of a batch that has no verdict: why (a bad input, a budget cap)."""

    line: int = Field(description="The check's position in the batch, from 1.")
    id: str | None = None
    error: str


class BatchAnswer(BaseModel):
    """One answer per check of the batch, in order."""

    answers: list[BatchVerdict | BatchError]


class ErrorBody(BaseModel):
    """Every answer that is not a verdict: one line, and a stable class where there is one."""

    error: str
    error_class: str | None = None


_REF = "#/components/schemas/{model}"
_JSON = "application/json"


def _json_body(name: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {_JSON: {"schema": {"$ref": _REF.format(model=name)}}}}


_ERRORS = {
    "400": _json_body("ErrorBody", "Bad JSON"),
    "401": _json_body("ErrorBody", "Missing or wrong bearer token (--auth-token-env)"),
    "413": _json_body("ErrorBody", "Body larger than --max-body-kb"),
    "422": _json_body("ErrorBody", "A field, the policy or the conversation is invalid, or past a limit"),
    "429": _json_body(
        "ErrorBody", "Too many checks in flight (--max-in-flight); retry after Retry-After seconds"
    ),
    "503": _json_body("ErrorBody", "Shutting down, or a budget cap (--max-usd, ...) reached"),
}


def _schemas() -> dict[str, Any]:
    """The JSON schemas of the requests (as validated) and answers (as serialized)."""
    models: list[type[BaseModel]] = [CheckRequest, BatchRequest, CheckAnswer, BatchAnswer, ErrorBody]
    _, top = models_json_schema(
        [
            (model, "validation" if model in (CheckRequest, BatchRequest) else "serialization")
            for model in models
        ],
        ref_template=_REF,
    )
    return dict(top.get("$defs", {}))


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 description of the service, its schemas generated from the models above."""
    check_answers = {
        "200": _json_body("CheckAnswer", "The verdict (status ok, recovered, failed or refused)"),
        "502": _json_body(
            "CheckAnswer", "The LM failed: status error, error_class says how (auth, unreachable, ...)"
        ),
        "504": _json_body(
            "CheckAnswer", "The check passed its deadline (--request-timeout): error_class deadline"
        ),
    }
    text = {"text/plain": {"schema": {"type": "string"}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "sp-dspy guard service", "version": __version__},
        "paths": {
            "/v1/check": {
                "post": {
                    "summary": "Check one conversation against a policy",
                    "requestBody": {"required": True, **_json_body("CheckRequest", "One check")},
                    "responses": {**check_answers, **_ERRORS},
                }
            },
            "/v1/check/batch": {
                "post": {
                    "summary": "Check several conversations, answered in order",
                    "requestBody": {"required": True, **_json_body("BatchRequest", "The checks")},
                    "responses": {"200": _json_body("BatchAnswer", "One answer per check"), **_ERRORS},
                }
            },
            "/healthz": {
                "get": {"summary": "The process is up", "responses": {"200": {"description": "up"}}}
            },
            "/readyz": {
                "get": {
                    "summary": "The LM answered a probe (at most one probe per --probe-interval)",
                    "responses": {
                        "200": {"description": "ready"},
                        "503": _json_body("ErrorBody", "not ready"),
                    },
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus text: requests, verdicts, latency, LM errors, tokens, dollars",
                    "responses": {"200": {"description": "metrics", "content": text}},
                }
            },
        },
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
