"""Per-rule targets and their chat messages (contract section 5).

Each rubric rule except ``conditional`` ones (their effect shows as their base rule's
gold label) is one binary judgment. Its ``[Context]`` bundle: for a decisive or
distractor rule, the exceptions/conditionals paired with it; for an exception, its base
rules. Layouts: ``"official"`` (the contract's bytes) and ``"prefix"`` (``_prefix``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

from sp_dspy._errors import ConfigError
from sp_dspy._protocol._prefix import PREFIX_SYSTEM, prefix_user
from sp_dspy._protocol._prompts import (
    CONTEXT_HEADER_BASE,
    CONTEXT_HEADER_EXCEPTION,
    CONVERSATION_HEADER,
    EMPTY_CONTEXT_LINE,
    FRAMEWORK_HEADER,
    PER_RULE_SYSTEM_BASE,
    PER_RULE_SYSTEM_EXCEPTION,
    target_header,
)

if TYPE_CHECKING:
    from sp_dspy._data._schema import Case, RubricEntry

TargetType = Literal["decisive", "distractor", "exception"]
Layout = Literal["official", "prefix"]
Protocol = Literal["per-policy", "per-rule"]
LAYOUTS: tuple[Layout, ...] = ("official", "prefix")


@dataclass(frozen=True)
class RuleTarget:
    """One per-rule judgment: the rule to judge, its bundle and its gold label."""

    rule: int
    type: TargetType
    text: str
    context: tuple[RubricEntry, ...]  # the bundle, in the reference harness's order
    gold: bool  # rule in ground_truth_violations


def build_targets(case: Case) -> list[RuleTarget]:
    """Every rubric rule except conditionals, with its bundle, in the reference's order.

    Rubric order (violations, then non-violations), as the reference harness sends it:
    a rule named twice in ``paired_with`` appears twice; base rules missing from the
    rubric are skipped (no text to show).
    """
    entries = [*case.rubric.violations, *case.rubric.non_violations]
    by_rule = {entry.rule: entry for entry in entries}
    modifiers: dict[int, list[RubricEntry]] = {}
    for entry in entries:
        if entry.type in ("exception", "conditional"):
            for base in entry.paired_with:
                modifiers.setdefault(base, []).append(entry)
    gold = set(case.ground_truth_violations)
    targets: list[RuleTarget] = []
    for entry in entries:
        if entry.type == "conditional":
            continue
        if entry.type == "exception":
            bundle = [by_rule[n] for n in entry.paired_with if n in by_rule]
        else:
            bundle = modifiers.get(entry.rule, [])
        targets.append(
            RuleTarget(
                rule=entry.rule,
                type=cast(TargetType, entry.type),
                text=entry.text,
                context=tuple(bundle),
                gold=entry.rule in gold,
            )
        )
    return targets


def framework_for(case: Case) -> str:
    """The framework shown to a per-rule judge: only at L2, and only when non-empty."""
    return case.framework if case.level == "L2" else ""


def target_section(target: RuleTarget) -> str:
    """``[Target ...]`` header, type line and rule line, each ending in a newline."""
    return f"{target_header(target.rule)}\ntype: {target.type}\nRule {target.rule}: {target.text}\n"


def context_section(target: RuleTarget) -> str:
    """``[Context ...]`` header and one line per bundled rule (or the filler line)."""
    header = CONTEXT_HEADER_EXCEPTION if target.type == "exception" else CONTEXT_HEADER_BASE
    lines = [f"- Rule {entry.rule} ({entry.type}): {entry.text}" for entry in target.context]
    body = "\n".join(lines) if lines else EMPTY_CONTEXT_LINE
    return f"{header}\n{body}\n"


def official_user(case: Case, target: RuleTarget) -> str:
    """The contract's user message: target, context, framework (L2), conversation."""
    parts = [target_section(target), context_section(target)]
    framework = framework_for(case)
    if framework:
        parts.append(f"{FRAMEWORK_HEADER}\n{framework}\n")
    parts.append(f"{CONVERSATION_HEADER}\n{case.conversation}")
    return "\n".join(parts)


def official_system(target: RuleTarget) -> str:
    """The contract's system message for the target's type."""
    return PER_RULE_SYSTEM_EXCEPTION if target.type == "exception" else PER_RULE_SYSTEM_BASE


def per_rule_messages(case: Case, target: RuleTarget, layout: Layout = "official") -> list[dict[str, str]]:
    """The two chat messages of one per-rule judgment in ``layout`` (``"prefix"`` is not official)."""
    if layout not in LAYOUTS:
        raise ConfigError(f"per-rule layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    if layout == "official":
        system, user = official_system(target), official_user(case, target)
    else:
        system = PREFIX_SYSTEM
        user = prefix_user(
            framework=framework_for(case),
            conversation=case.conversation,
            target=target_section(target),
            context=context_section(target),
            is_exception=target.type == "exception",
        )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
