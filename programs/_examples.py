"""Benchmark cases as ``dspy.Example`` objects, the unit DSPy optimizers work on.

The per-rule program gets the rubric as an input, stripped of every gold flag.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from sp_dspy.protocol import framework_for

from ._outputs import Protocol

if TYPE_CHECKING:
    import dspy

    from sp_dspy.data import Case

PROGRAM_INPUTS: Final[dict[Protocol, tuple[str, ...]]] = {
    "per-policy": ("policy", "conversation"),
    "per-rule": ("conversation", "framework", "rubric"),
}
"""The inputs each protocol's DSPy program takes, in ``forward``'s keyword names."""


def rubric_json(case: Case) -> str:
    """The case's rules as a sorted, gold-free JSON list of ``{rule, type, text, paired_with}``."""
    rules = [
        {"rule": entry.rule, "type": entry.type, "text": entry.text, "paired_with": sorted(entry.paired_with)}
        for entry in case.rubric.entries()
    ]
    return json.dumps(rules, ensure_ascii=False, sort_keys=True)


def case_to_example(case: Case, protocol: Protocol = "per-policy") -> dspy.Example:
    """One case as a ``dspy.Example`` with ``protocol``'s program inputs; the other fields are labels."""
    import dspy

    metadata = case.failure_mode_metadata
    fields: dict[str, Any] = {
        "id": case.id,
        "domain": case.domain,
        "level": case.level,
        "policy": case.policy,
        "conversation": case.conversation,
        "framework": framework_for(case),
        "rubric": rubric_json(case),
        "ground_truth_violations": sorted(set(case.ground_truth_violations)),
        "distractor_rules": sorted(metadata.distractor_rules),
        "waived_rules": sorted(metadata.waived_rules),
        "contradicted_rules": sorted(metadata.contradicted_rules),
    }
    return dspy.Example(**fields).with_inputs(*PROGRAM_INPUTS[protocol])
