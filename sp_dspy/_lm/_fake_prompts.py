"""The prompt formats the fake model reads and answers in.

:func:`read_prompt` tells the kind of prompt: ``dspy`` (an adapter's, answered in its format;
recognised first, as an optimised program may quote the official template), ``per_policy`` and
``per_rule`` (the official prompts), ``plain`` (answered like ``per_policy``). :func:`render`
writes the fake's :class:`Decision` in that format (DSPy output fields from their JSON schema
when the adapter printed one, else from the printed type, guided by the field name).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

PromptKind = Literal["dspy", "per_policy", "per_rule", "plain"]
AdapterStyle = Literal["chat", "json", "xml"]

DSPY_MARKER = "Your output fields are:"
POLICY_MARKER = '"violated_rules": ['
_TARGET = re.compile(r"\[Target\s+[—-]+\s+Rule\s+(\d+)")
_FIELD_LINE = re.compile(r"^\d+\. `(\w+)` \((.+?)\):", re.M)
_NUMBERED_LINE = re.compile(r"^[ \t]*(\d+)\.[ \t]", re.M)
_RULE_MENTION = re.compile(r"\bRule\s+(\d+)\b")
_CHAT_BLOCK = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\n\nRespond |\Z)", re.S)
_XML_BLOCK = re.compile(r"<(\w+)>\n?(.*?)\n?</\1>", re.S)
_SCHEMA_NOTE = "# note: the value you produce must adhere to the JSON schema: "
_TARGET_FIELD_NAMES = ("rule", "rule_number", "rule_id", "rule_text", "target")
_LITERAL_OPTION = re.compile(r"'([^']*)'|\"([^\"]*)\"")
ADVICE_FIELD = "module_advice"


@dataclass(frozen=True)
class OutputField:
    """One output field of a DSPy signature, as the adapter described it."""

    name: str
    type: str
    schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class PromptView:
    """What the fake understood of one request."""

    kind: PromptKind
    system: str
    user: str
    text: str
    rules_source: str
    target: int | None = None
    fields: tuple[OutputField, ...] = ()
    adapter: AdapterStyle | None = None
    demos: tuple[str, ...] = ()

    @property
    def asks_for_instructions(self) -> bool:
        """Whether this is an optimizer asking for instructions (a DSPy prompt whose output
        is a new or proposed instruction, or SIMBA's per-module advice), not a guard prompt."""
        return self.kind == "dspy" and any(
            "instruction" in f.name or f.name == ADVICE_FIELD for f in self.fields
        )

    def module_names(self) -> list[str]:
        """The ``module_names`` input of an advice request (SIMBA), else no names."""
        if self.adapter is None:
            return []
        raw = _input_blocks(self.user, self.adapter).get("module_names", "")
        try:
            names = json.loads(raw)
        except ValueError:
            return []
        return [str(name) for name in names] if isinstance(names, list) else []

    def candidate_rules(self) -> list[int]:
        """Rule numbers in the policy text: ``N.`` line starts and ``Rule N`` mentions."""
        found = {int(n) for n in _NUMBERED_LINE.findall(self.rules_source)}
        found |= {int(n) for n in _RULE_MENTION.findall(self.rules_source)}
        return sorted(found)


def _schema_for(name: str, system: str) -> dict[str, Any] | None:
    """The JSON schema the adapter printed after ``{name}``, decoded from either adapter."""
    start = system.find("{" + name + "}")
    if start < 0:
        return None
    line = system[start:].split("\n", 1)[0]
    if _SCHEMA_NOTE not in line:
        return None
    raw = line.split(_SCHEMA_NOTE, 1)[1].rstrip()
    try:
        decoded = json.loads(raw)
    except ValueError:
        # JSONAdapter prints the note inside a JSON string literal: `"{name} # note: ...",`.
        try:
            decoded = json.loads(json.loads('"' + raw.removesuffix(",").removesuffix('"') + '"'))
        except ValueError:
            return None
    return decoded if isinstance(decoded, dict) else None


def _output_fields(system: str) -> tuple[OutputField, ...]:
    section = system.split(DSPY_MARKER, 1)[1].split("All interactions will be structured", 1)[0]
    return tuple(
        OutputField(name, type_, _schema_for(name, system)) for name, type_ in _FIELD_LINE.findall(section)
    )


def _input_blocks(user: str, adapter: AdapterStyle) -> dict[str, str]:
    return dict((_XML_BLOCK if adapter == "xml" else _CHAT_BLOCK).findall(user))


def _dspy_target(user: str, adapter: AdapterStyle) -> int | None:
    """The rule a per-rule DSPy program asks about: ``[Target — Rule N`` anywhere in the
    inputs, else the first number in an input field whose name mentions ``target`` or
    is ``rule``/``rule_number``/``rule_id``/``rule_text``."""
    if match := _TARGET.search(user):
        return int(match.group(1))
    for name, value in _input_blocks(user, adapter).items():
        if "target" in name or name in _TARGET_FIELD_NAMES:
            match = _RULE_MENTION.search(value) or re.match(r"\s*(\d+)", value)
            if match:
                return int(match.group(1))
    return None


def _adapter_style(system: str, user: str, wants_json: bool, fields: tuple[OutputField, ...]) -> AdapterStyle:
    if wants_json or "Outputs will be a JSON object" in system:
        return "json"
    if "wrapped in XML tags" in user or (fields and f"<{fields[0].name}>" in system):
        return "xml"
    return "chat"


def message_text(content: Any) -> str:
    """The text of an OpenAI message ``content``: a string, or a list of typed parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, Mapping))
    return ""


def read_prompt(messages: Sequence[Mapping[str, Any]], *, wants_json: bool = False) -> PromptView:
    """Classify ``messages`` (OpenAI-style ``role``/``content`` dicts)."""
    texts = [message_text(m.get("content")) for m in messages]
    roles = [m.get("role") for m in messages]
    system = "\n".join(t for t, role in zip(texts, roles, strict=True) if role in ("system", "developer"))
    last_user = max((i for i, role in enumerate(roles) if role == "user"), default=-1)
    user = texts[last_user] if last_user >= 0 else ""
    # Assistant turns before the last user message are demonstrations (DSPy puts demos there).
    demos = tuple(
        t for t, role in zip(texts[:last_user], roles[:last_user], strict=True) if role == "assistant"
    )
    text = "\n".join(texts)
    if DSPY_MARKER in system:
        fields = _output_fields(system)
        adapter = _adapter_style(system, user, wants_json, fields)
        target = _dspy_target(user, adapter)
        return PromptView("dspy", system, user, text, user, target, fields, adapter, demos)
    if POLICY_MARKER in system:
        return PromptView("per_policy", system, user, text, system)
    if target_match := _TARGET.search(user):
        return PromptView("per_rule", system, user, text, user, int(target_match.group(1)))
    return PromptView("plain", system, user, text, text)


def contains_phrase(text: str, phrase: str) -> bool:
    """Case- and whitespace-insensitive containment (instructions get re-wrapped)."""
    squash = " ".join(text.lower().split())
    return " ".join(phrase.lower().split()) in squash


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
