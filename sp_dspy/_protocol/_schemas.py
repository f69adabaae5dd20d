"""JSON schemas of the official answers, sent only when a model config sets ``json_schema``.

The messages stay the contract's bytes. The rule list comes first and free text is
bounded, or a small model spends its token budget on the analysis and the JSON is cut;
the per-rule ``explanation`` is left out (the official parser reads only ``rule``).
"""

from __future__ import annotations

from typing import Any

POLICY_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "violated_rules": {
            "type": "array",
            "maxItems": 10,
            "items": {
                "type": "object",
                "properties": {"rule": {"type": "integer", "minimum": 1, "maximum": 99}},
                "required": ["rule"],
                "additionalProperties": False,
            },
        },
        "analysis": {"type": "string", "maxLength": 100},
    },
    "required": ["violated_rules", "analysis"],
    "additionalProperties": False,
}

VERDICT_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["violated", "not_violated"]},
        "reason": {"type": "string", "maxLength": 60},
    },
    "required": ["verdict", "reason"],
    "additionalProperties": False,
}


def response_format(schema: dict[str, Any], name: str) -> dict[str, Any]:
    """The OpenAI ``response_format`` that carries ``schema`` (llama.cpp and vLLM accept it)."""
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


def policy_response_format() -> dict[str, Any]:
    """The ``response_format`` of a per-policy answer."""
    return response_format(POLICY_ANSWER_SCHEMA, "policy_audit")


def verdict_response_format() -> dict[str, Any]:
    return response_format(VERDICT_ANSWER_SCHEMA, "rule_verdict")
