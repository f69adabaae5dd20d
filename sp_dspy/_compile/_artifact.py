"""The compiled artifact: ``program.json``, ``manifest.json``, ``prompt.md``, ``splits.json``.

``program.json`` is DSPy's JSON state (``Module.dump_state`` plus DSPy's own
``metadata`` block, so ``program.load(path)`` reads it too), never a pickle, cut
down to what a guard needs: no LM settings (a shared artifact must not point a
user's keys at someone else's endpoint; ``programs.load_program`` drops them anyway)
and demos restricted to the signature's fields (training labels such as rubric
flags stay out). ``prompt.md`` is the same content for a person: each predictor's
final instructions, a unified diff against the starting ones, changed output
prefixes and the demonstrations.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

DEMO_FIELD_CHARS = 1500


def program_state(program: Any) -> dict[str, Any]:
    """``program.dump_state()`` without LM settings and with demos cut to signature fields."""
    state: dict[str, Any] = program.dump_state()
    for name, predictor in program.named_predictors():
        entry = dict(state[name])
        fields = set(predictor.signature.fields)
        entry["lm"] = None
        entry["demos"] = [
            {key: value for key, value in demo.items() if key in fields or key == "augmented"}
            for demo in entry.get("demos", [])
        ]
        state[name] = entry
    return state


def write_json(path: Path, document: Any) -> None:
    """Write JSON atomically (a killed compile never leaves half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def write_program(path: Path, state: dict[str, Any]) -> None:
    from dspy.utils.saving import get_dependency_versions

    write_json(path, {**state, "metadata": {"dependency_versions": get_dependency_versions()}})


def _fence(text: str, language: str = "text") -> str:
    fence = "````" if "```" in text else "```"
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


def _clip(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) > DEMO_FIELD_CHARS:
        return text[:DEMO_FIELD_CHARS] + f"\n[... {len(text) - DEMO_FIELD_CHARS} more characters]"
    return text


def _instructions_diff(before: str, after: str) -> str:
    lines = list(
        difflib.unified_diff(
            before.splitlines(),
            after.splitlines(),
            "starting instructions",
            "compiled instructions",
            lineterm="",
        )
    )
    if lines:
        return _fence("\n".join(lines), "diff")
    return "No change." if before == after else "Whitespace changes only."


def _prefix_changes(names: list[str], before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    old = before["signature"]["fields"]
    new = after["signature"]["fields"]
    return [
        f"- `{name}`: `{a['prefix']}` -> `{b['prefix']}`"
        for name, a, b in zip(names, old, new, strict=False)
        if a["prefix"] != b["prefix"]
    ]


def _demos(names: list[str], demos: list[dict[str, Any]]) -> list[str]:
    lines = [f"### Demonstrations ({len(demos)})", ""]
    if not demos:
        return [*lines, "None.", ""]
    for number, demo in enumerate(demos, 1):
        kind = "bootstrapped from the model's own correct answer" if demo.get("augmented") else "labelled"
        lines += [f"#### Demo {number} ({kind})", ""]
        for name in names:
            if name in demo:
                lines += [f"**{name}**", "", _fence(_clip(demo[name])), ""]
    return lines


def prompt_markdown(program: Any, start: dict[str, Any], final: dict[str, Any], header: list[str]) -> str:
    """``prompt.md``: ``header`` lines, then per predictor instructions, diff and demos."""
    lines = [*header, ""]
    for name, predictor in program.named_predictors():
        names = list(predictor.signature.fields)
        before, after = start[name], final[name]
        lines += [f"## Predictor `{name}`", "", "### Instructions", ""]
        lines += [_fence(after["signature"]["instructions"]), ""]
        lines += ["### Changes from the starting instructions", ""]
        lines += [
            _instructions_diff(before["signature"]["instructions"], after["signature"]["instructions"]),
            "",
        ]
        changed = _prefix_changes(names, before, after)
        if changed:
            lines += ["### Changed field prefixes", "", *changed, ""]
        lines += _demos(names, after.get("demos", []))
    return "\n".join(lines).rstrip() + "\n"
