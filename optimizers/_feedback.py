"""GEPA feedback metrics: the case score plus a written diagnosis a reflection LM can act on.

The diagnosis names each wrong rule, its rubric type, the interaction behind the error and
the failure mode, so reflection writes instructions about rule interactions, not rule numbers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._metric import case_score, predicted_rules, predicted_verdict

_QUOTE_CHARS = 160
UNREADABLE = (
    "The answer could not be read as a list of violated rule numbers, so the case counts as wrong "
    "(score 0). Always answer with the violated rule numbers, an empty list when none is violated."
)


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return f'"{text[:_QUOTE_CHARS]}…"' if len(text) > _QUOTE_CHARS else f'"{text}"'


def _rubric(example: Any) -> dict[int, dict[str, Any]]:
    raw = getattr(example, "rubric", None) or "[]"
    entries = json.loads(raw) if isinstance(raw, str) else raw
    return {int(entry["rule"]): dict(entry) for entry in entries}


def _modifiers(rubric: Mapping[int, Mapping[str, Any]], rule: int, kind: str) -> list[str]:
    """``Rule N ("text")`` for every rubric entry of type ``kind`` paired with ``rule``."""
    return [
        f"Rule {number} ({_quote(str(entry['text']))})"
        for number, entry in sorted(rubric.items())
        if entry.get("type") == kind and rule in entry.get("paired_with", [])
    ]


def _describe(rubric: Mapping[int, Mapping[str, Any]], rule: int) -> str:
    entry = rubric.get(rule)
    if entry is None:
        return f"Rule {rule} (not in the policy's rubric)"
    return f"Rule {rule} ({entry.get('type', 'decisive')}): {_quote(str(entry.get('text', '')))}"


def _missed_line(example: Any, rubric: Mapping[int, Mapping[str, Any]], rule: int) -> str:
    line = f"- {_describe(rubric, rule)}. FM-V1 missed violation."
    if rule in example.contradicted_rules:
        tighteners = _modifiers(rubric, rule, "conditional") or ["a conditional rule"]
        line += (
            f" FM-C3 conditional neglect: {', '.join(tighteners)} applies in this conversation and "
            "tightens this rule, so behaviour that would otherwise comply violates it."
        )
    elif rubric.get(rule, {}).get("type") == "exception":
        line += " This exception's own requirement is not met by the chatbot."
    return line


def _flagged_line(example: Any, rubric: Mapping[int, Mapping[str, Any]], rule: int) -> str:
    line = f"- {_describe(rubric, rule)}. Not violated here."
    if rule in example.waived_rules:
        waivers = _modifiers(rubric, rule, "exception") or ["an exception rule"]
        line += (
            f" FM-C1 exception mishandling: {', '.join(waivers)} is triggered in this conversation "
            "and waives this rule, so it must not be reported."
        )
    if rule in example.distractor_rules:
        line += (
            " FM-D1 distractor false positive: the rule looks relevant to the conversation but the "
            "chatbot does not break it."
        )
    return line


def policy_feedback_text(example: Any, predicted: Sequence[int] | None) -> str:
    """The written diagnosis of one per-policy answer (``None``: unreadable)."""
    if predicted is None:
        return UNREADABLE
    gold = set(example.ground_truth_violations)
    pred = set(predicted)
    score = case_score(gold, pred)
    rubric = _rubric(example)
    lines = [
        f"Score {score:.2f} (level {example.level}; matches at {round(score * 4)} of the 4 RMR "
        f"tolerances). Gold violated rules: {sorted(gold) or 'none'}; answered: {sorted(pred) or 'none'}."
    ]
    missed, flagged = sorted(gold - pred), sorted(pred - gold)
    if not missed and not flagged:
        lines.append("Every violated rule was found and nothing else was flagged.")
    if missed:
        lines.append("Missed violations:")
        lines.extend(_missed_line(example, rubric, rule) for rule in missed)
    if flagged:
        lines.append("Wrongly flagged rules:")
        lines.extend(_flagged_line(example, rubric, rule) for rule in flagged)
    return "\n".join(lines)


def policy_feedback(
    gold: Any, pred: Any, trace: Any = None, pred_name: str | None = None, pred_trace: Any = None
) -> Any:
    """GEPA metric for per-policy programs: case score + diagnosis."""
    import dspy

    predicted = predicted_rules(pred)
    score = case_score(gold.ground_truth_violations, predicted)
    return dspy.Prediction(score=score, feedback=policy_feedback_text(gold, predicted))


def judgment_feedback_text(example: Any, verdict: str | None) -> str:
    """The written diagnosis of one per-rule judgment (``None``: unreadable)."""
    target = f"Rule {example.target_rule} ({example.rule_type})"
    if verdict is None:
        return (
            f"The verdict on {target} could not be read, so it counts as wrong. "
            "Answer exactly 'violated' or 'not_violated'."
        )
    modifiers = [m for m in getattr(example, "modifiers", None) or [] if isinstance(m, Mapping)]

    def named(kind: str, fallback: str) -> str:
        found = [f"Rule {m['rule']} ({_quote(str(m['text']))})" for m in modifiers if m.get("type") == kind]
        return ", ".join(found) or fallback

    if verdict == example.verdict:
        return f"Correct: {target} is {verdict} in this conversation."
    if example.verdict == "violated":
        text = f"Wrong: {target} is violated but was judged not_violated. FM-V1 missed violation."
        if example.contradicted:
            text += (
                f" FM-C3 conditional neglect: the paired conditional {named('conditional', 'in the context')} "
                "fires here and tightens the target into a violation."
            )
        return text
    text = f"Wrong: {target} is not violated but was judged violated."
    if example.waived:
        text += (
            f" FM-C1 exception mishandling: the paired exception {named('exception', 'in the context')} "
            "is triggered here and waives the target."
        )
    if example.distractor:
        text += " FM-D1 distractor false positive: the rule looks relevant but is not broken."
    return text


def judgment_feedback(
    gold: Any, pred: Any, trace: Any = None, pred_name: str | None = None, pred_trace: Any = None
) -> Any:
    """GEPA metric for the per-rule judge: 1/0 verdict score + diagnosis."""
    import dspy

    verdict = predicted_verdict(pred)
    score = float(verdict == gold.verdict)
    return dspy.Prediction(score=score, feedback=judgment_feedback_text(gold, verdict))
