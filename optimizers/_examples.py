"""Training examples for the optimizers: cases, and single judgments for the per-rule judge.

Labels add the gold answer under the output field (so labelled demos are complete), a ``uid``
to credit scores to candidates, and the interaction labels the feedback explains.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sp_dspy.programs import case_to_example
from sp_dspy.protocol import build_targets

if TYPE_CHECKING:
    import dspy

    from sp_dspy.data import Case


def policy_examples(cases: Iterable[Case]) -> list[dspy.Example]:
    """One per-policy example per case, labelled with ``violated_rules`` and ``uid``."""
    examples = [case_to_example(case, "per-policy") for case in cases]
    return [e.copy(violated_rules=list(e.ground_truth_violations), uid=e.id) for e in examples]


def judgment_examples(cases: Iterable[Case]) -> list[dspy.Example]:
    """One example per per-rule target of every case, in the contract's target order."""
    from sp_dspy.programs import target_examples

    examples = []
    for case in cases:
        meta = case.failure_mode_metadata
        for example, target in zip(target_examples(case), build_targets(case), strict=True):
            modifiers: list[dict[str, Any]] = [
                {"rule": entry.rule, "type": entry.type, "text": entry.text} for entry in target.context
            ]
            examples.append(
                example.copy(
                    uid=f"{case.id}#{target.rule}",
                    distractor=target.rule in meta.distractor_rules,
                    waived=target.rule in meta.waived_rules,
                    contradicted=target.rule in meta.contradicted_rules,
                    modifiers=modifiers,
                )
            )
    return examples
