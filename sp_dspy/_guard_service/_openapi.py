"""The guard service's OpenAPI document, generated from the request and answer models' JSON
schemas (``/v1/check``'s and the gateways'), so it cannot drift from what the service accepts."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from .._version import __version__
from ._gateway_models import GuardrailAnswer, GuardrailRequest, ModerationAnswer, ModerationRequest
from ._models import BatchAnswer, BatchRequest, CheckAnswer, CheckRequest, ErrorBody

_REF = "#/components/schemas/{model}"
_JSON = "application/json"


def _json_body(name: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {_JSON: {"schema": {"$ref": _REF.format(model=name)}}}}


_ERRORS = {
    "400": _json_body("ErrorBody", "Bad JSON"),
    "401": _json_body("ErrorBody", "Missing or wrong bearer token (--auth-token-env)"),
    "413": _json_body("ErrorBody", "Body larger than --max-body-kb, or more checks than --max-in-flight"),
    "415": _json_body("ErrorBody", "The body is not application/json"),
    "422": _json_body("ErrorBody", "A field, the policy or the conversation is invalid, or past a limit"),
    "429": _json_body(
        "ErrorBody", "Too many checks in flight (--max-in-flight); retry after Retry-After seconds"
    ),
    "503": _json_body("ErrorBody", "Shutting down, or a budget cap (--max-usd, ...) reached"),
}


def _schemas() -> dict[str, Any]:
    """The JSON schemas of the requests (as validated) and answers (as serialized)."""
    requests: list[type[BaseModel]] = [CheckRequest, BatchRequest, GuardrailRequest, ModerationRequest]
    answers: list[type[BaseModel]] = [CheckAnswer, BatchAnswer, GuardrailAnswer, ModerationAnswer, ErrorBody]
    _, top = models_json_schema(
        [(model, "validation") for model in requests] + [(model, "serialization") for model in answers],
        ref_template=_REF,
    )
    return dict(top.get("$defs", {}))


def _gateway_paths() -> dict[str, Any]:
    """The gateways' routes: LiteLLM's guardrail API and OpenAI's moderation API."""
    return {
        "/beta/litellm_basic_guardrail_api": {
            "post": {
                "summary": "LiteLLM's Generic Guardrail API: BLOCKED with the violated rules, else NONE",
                "requestBody": {"required": True, **_json_body("GuardrailRequest", "LiteLLM's request")},
                "responses": {
                    "200": _json_body("GuardrailAnswer", "The action (--on-error: no verdict)"),
                    **_ERRORS,
                },
            }
        },
        "/v1/moderations": {
            "post": {
                "summary": "OpenAI's moderation API: categories rule_1..rule_n of the policy, per input",
                "requestBody": {"required": True, **_json_body("ModerationRequest", "The inputs")},
                "responses": {"200": _json_body("ModerationAnswer", "One result per input"), **_ERRORS},
            }
        },
    }


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
            **_gateway_paths(),
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
