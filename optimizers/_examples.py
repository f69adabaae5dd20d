"""Training examples for the optimizers: cases, and single judgments for the per-rule judge.

Built on ``programs.case_to_example`` / ``programs.target_examples`` and extended with
what optimizers need on top:

- ``violated_rules`` (per-policy) / ``verdict`` (judgments) under the program's own
  output field name, so labelled demonstrations (``LabeledFewShot``, MIPRO's label
  sets) show a complete input -> output pair;
- ``uid``, one id per example (the case id, or ``case#rule`` for a judgment), which
  the compile uses to attribute scores to candidates;
- for judgments, the interaction labels the feedback metric explains: whether the
  target is a distractor, waived by an active exception or tightened by a firing
  conditional, and the paired modifier rules shown in its context.

Labels never reach a saved artifact: demos are cut down to the signature's fields
before they are written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import dspy

    from sp_dspy import Case


def policy_examples(cases: Iterable[Case]) -> list[dspy.Example]:
    """One per-policy example per case, labelled with ``violated_rules`` and ``uid``."""
    from programs import case_to_example

    examples = []
    for case in cases:
        example = case_to_example(case, "per-policy")
        examples.append(example.copy(violated_rules=list(example.ground_truth_violations), uid=case.id))
    return examples


def judgment_examples(cases: Iterable[Case]) -> list[dspy.Example]:
    """One example per per-rule target of every case, in the contract's target order."""
    from programs import target_examples
    from sp_dspy.protocol import build_targets

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
