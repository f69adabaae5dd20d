"""Render the fake model's decision (violated rules; for a per-rule prompt, the verdict) as each prompt expects.

DSPy output fields are filled from their JSON schema when the adapter printed one, else
from the printed type (``list[int]``, ``bool``, ``Literal[...]``...), guided by the field name.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ._fake_prompts import OutputField, PromptView

_LITERAL_OPTION = re.compile(r"'([^']*)'|\"([^\"]*)\"")


@dataclass(frozen=True)
class Decision:
    """What the fake decided: the violated rules, and the rule under judgment if any."""

    behaviour: str
    violated: tuple[int, ...]
    target: int | None = None
    instruction: str | None = None  # set when an optimizer asked for instructions
    modules: tuple[str, ...] = ()  # modules an advice request names (SIMBA)

    @property
    def verdict(self) -> bool:
        """Per-rule verdict: the target is violated (or, with no target, anything is)."""
        return self.target in self.violated if self.target is not None else bool(self.violated)

    @property
    def verdict_word(self) -> str:
        return "violated" if self.verdict else "not_violated"

    def analysis(self) -> str:
        listed = ", ".join(map(str, self.violated)) or "none"
        return f"Fake {self.behaviour} model: checked the rules; violated: {listed}."

    def explanation(self, rule: int) -> str:
        return f"The chatbot's replies do not comply with rule {rule}."


def render(view: PromptView, decision: Decision) -> str:
    """The reply text for ``view`` carrying ``decision``."""
    if view.kind == "dspy":
        return _render_fields(view, decision)
    if view.kind == "per_rule":
        verdict = decision.verdict_word
        return json.dumps({"verdict": verdict, "reason": f"Rule {decision.target} is {verdict}."})
    return json.dumps(
        {
            "analysis": decision.analysis(),
            "violated_rules": [
                {"rule": n, "explanation": decision.explanation(n)} for n in decision.violated
            ],
        }
    )


def _text_for(name: str, decision: Decision) -> str:
    if decision.instruction is not None:
        if "prefix" in name:
            return "Answer:"
        if "instruction" in name or "advice" in name:
            return decision.instruction
        return "The answers miss violations of rules other than the first one found."
    if "verdict" in name:
        return decision.verdict_word
    return decision.analysis()


def _advice(decision: Decision) -> dict[str, str]:
    """SIMBA's ``module_advice``: the proposed instruction for every module it named."""
    return {name: decision.instruction or "" for name in decision.modules}


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        resolved = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
        return resolved if isinstance(resolved, dict) else {}
    for key in ("anyOf", "oneOf"):
        options = [o for o in schema.get(key, []) if isinstance(o, dict) and o.get("type") != "null"]
        if options:
            return _resolve(options[0], root)
    return schema


def _from_schema(
    schema: dict[str, Any], root: dict[str, Any], name: str, decision: Decision, rule: int | None
) -> Any:
    schema = _resolve(schema, root)
    if "enum" in schema:
        options = [str(o) for o in schema["enum"]]
        return decision.verdict_word if decision.verdict_word in options else schema["enum"][0]
    kind = schema.get("type")
    if kind == "array":
        items = _resolve(schema.get("items", {}), root)
        if items.get("type") in ("object", "string") or "properties" in items:
            return [_from_schema(items, root, name, decision, n) for n in decision.violated]
        if items.get("type") == "integer":
            return list(decision.violated)
        return []
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if not props and decision.instruction is not None:
            return _advice(decision)
        return {key: _from_schema(sub, root, key, decision, rule) for key, sub in props.items()}
    if kind == "integer":
        return rule if rule is not None and "rule" in name else len(decision.violated)
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return decision.verdict
    if kind == "string":
        if rule is not None:
            return decision.explanation(rule) if "rule" not in name else str(rule)
        return _text_for(name, decision)
    return None


def _from_type(field: OutputField, decision: Decision) -> Any:
    type_ = field.type.replace(" ", "")
    if type_.startswith("Literal["):
        options = [a or b for a, b in _LITERAL_OPTION.findall(field.type)]
        return decision.verdict_word if decision.verdict_word in options else (options[0] if options else "")
    if type_ == "bool":
        return decision.verdict
    if type_.startswith("dict[") and decision.instruction is not None:
        return _advice(decision)
    if type_ == "int":
        return (
            decision.target
            if decision.target is not None and "rule" in field.name
            else len(decision.violated)
        )
    if type_ == "float":
        return 1.0
    if type_.startswith(("list[int]", "set[int]", "tuple[int")):
        return list(decision.violated)
    if type_.startswith("list[str]"):
        return [f"Rule {n}" for n in decision.violated]
    if type_.startswith(("list", "set", "tuple")):
        return list(decision.violated) if "rule" in field.name or "violat" in field.name else []
    return _text_for(field.name, decision)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _render_fields(view: PromptView, decision: Decision) -> str:
    values = {
        f.name: _from_schema(f.schema, f.schema, f.name, decision, None)
        if f.schema
        else _from_type(f, decision)
        for f in view.fields
    }
    if view.adapter == "json":
        return json.dumps(values)
    if view.adapter == "xml":
        return "\n".join(f"<{name}>{_as_text(value)}</{name}>" for name, value in values.items())
    blocks = [f"[[ ## {name} ## ]]\n{_as_text(value)}" for name, value in values.items()]
    return "\n\n".join([*blocks, "[[ ## completed ## ]]"])
