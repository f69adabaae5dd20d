"""Read a chat request as the fake model must: which format its caller parses, which rules exist,
which rule is judged.

Kinds: ``dspy`` (a DSPy adapter prompt: ``Your output fields are:``; answered in the
adapter's format: ChatAdapter blocks, JSON, XML tags), ``per_policy`` (the official
per-policy prompt), ``per_rule`` (the official per-rule prompt, ``[Target — Rule N``),
``plain`` (anything else, answered like ``per_policy``). DSPy prompts are recognised
first: an optimised program may quote the official template. A DSPy prompt may be an
optimizer asking for instructions (:attr:`PromptView.asks_for_instructions`); assistant
turns before the last user message are demonstrations.
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
