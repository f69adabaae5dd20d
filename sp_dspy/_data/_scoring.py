"""``ScoringCase``: the part of a case the official scorer reads, and nothing else.

A full ``Case`` holds the policy, the conversation and every rubric text: about 25 kB
per case, 75 MB for the published benchmark. Scoring needs a few ids, the ground
truth, each rubric rule's type and the failure-mode rule lists: well under 1 kB. The
scorer works on this view, so ``sp-dspy score`` can build it straight from the file
without materialising full cases (``_scoring_load``) and keep it in a parse cache
(``_scoring_cache``); functions that take a ``Case`` convert it with ``scoring_view``.

A view is a msgspec ``Struct``, not a pydantic model: views are only ever built from
data already validated (a ``Case``, or the slim decoder's typed structs), or decoded
from this package's own parse cache and worker pipe, where msgspec checks every
field's type while it decodes, in C. Decoding the 3,000 views of the published
benchmark that way takes a third of the time pydantic took to validate them, and
the worker that decodes a dataset for ``sp-dspy score`` imports no pydantic.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeAlias

from msgspec import Struct, field

from ._types import Level, RuleType

if TYPE_CHECKING:
    from ._schema import Case


class ScoringCase(Struct, frozen=True, kw_only=True):
    """What the official metrics, failure modes and error attribution read of a case.

    ``rule_types`` maps every rubric rule (violations, then non-violations: a rule
    listed twice keeps its last type, as a dict built in that order does) to its
    type. The four rule lists are those of the case's ``failure_mode_metadata``.
    """

    id: str
    domain: str
    level: Level
    ground_truth_violations: list[int]
    rule_types: dict[int, RuleType] = field(default_factory=dict)
    distractor_rules: list[int] = field(default_factory=list)
    waived_rules: list[int] = field(default_factory=list)
    contradicted_rules: list[int] = field(default_factory=list)
    decisive_rules: list[int] | None = None

    @classmethod
    def from_case(cls, case: Case) -> ScoringCase:
        """The scoring view of a validated full case."""
        rubric, meta = case.rubric, case.failure_mode_metadata
        return cls(
            id=case.id,
            domain=case.domain,
            level=case.level,
            ground_truth_violations=list(case.ground_truth_violations),
            rule_types={entry.rule: entry.type for entry in (*rubric.violations, *rubric.non_violations)},
            distractor_rules=list(meta.distractor_rules),
            waived_rules=list(meta.waived_rules),
            contradicted_rules=list(meta.contradicted_rules),
            decisive_rules=None if meta.decisive_rules is None else list(meta.decisive_rules),
        )


#: Anything the scorer accepts as a case: a full ``Case`` or its scoring view.
AnyCase: TypeAlias = "Case | ScoringCase"


def scoring_view(case: AnyCase) -> ScoringCase:
    """``case`` itself when it already is a ``ScoringCase``, else its view."""
    return case if isinstance(case, ScoringCase) else ScoringCase.from_case(case)


def scoring_views(cases: Iterable[AnyCase]) -> list[ScoringCase]:
    """``scoring_view`` of each case, in order."""
    return [scoring_view(case) for case in cases]
