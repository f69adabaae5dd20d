"""The data of the report's Cases view: every case with each variant's outcome on it, as one
compact JSON document the page's script renders on demand.

Built from the records ``build_summary`` already read and scored (``CaseOutcome``, failure
modes, the error types of ``error_types``, exclusion reasons, per-case costs), so the view
and the tables never disagree. Texts (conversations, rule texts, answers) sit once in a
string table ``S`` and are referred to by index: the three levels of a SafePyramid
conversation share it, and most of their rules. Keys are short and empty fields left out;
the script (``_viewer``) names them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._data import Case
from .._metrics import (
    TAUS,
    CaseOutcome,
    JudgmentRecord,
    PolicyRecord,
    ResultSet,
    case_outcomes,
    classify_failure,
    error_types,
)
from ._usage import CaseCost

if TYPE_CHECKING:
    from .._benchmarks import BenchmarkKind

#: Outcome codes: exact match, within the tolerance of some tau < 1.0, beyond it, excluded.
EXACT, WITHIN, WRONG, EXCLUDED = "x", "t", "w", "e"


@dataclass(frozen=True, slots=True)
class ViewedRun:
    """One variant as the view reads it: its label and what ``build_summary`` read, resolved and
    costed (``case_costs``)."""

    label: str
    variant: str
    results: ResultSet
    records: Mapping[str, PolicyRecord]
    costs: Mapping[str, CaseCost]


class _Strings:
    """The string table: each distinct text once, referred to by its index."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._index: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        found = self._index.get(text)
        if found is None:
            found = self._index[text] = len(self.texts)
            self.texts.append(text)
        return found


def _code(outcome: CaseOutcome) -> tuple[str, float | None]:
    """The outcome's code and, within tolerance, the largest tau it matches at."""
    if outcome.excluded:
        return EXCLUDED, None
    if outcome.exact:
        return EXACT, None
    for (tau, _), hit in zip(TAUS, outcome.hits, strict=False):
        if hit:
            return WITHIN, tau
    return WRONG, None


def _why(record: PolicyRecord | None, judged: Sequence[JudgmentRecord], cap_aware: bool) -> str:
    if record is None:
        return "no result"
    if judged and record.refused:
        return f"no verdict on any of its {len(judged)} judged rules"
    return record.exclusion(cap_aware=cap_aware) or "excluded"


def _cost(cost: CaseCost | None) -> dict[str, Any]:
    if cost is None:
        return {}
    found: dict[str, Any] = {}
    if cost.usage is not None:
        found["tk"] = [cost.usage.prompt_tokens, cost.usage.completion_tokens]
        if cost.usage.cost is not None:
            found["usd"] = cost.usage.cost
    if cost.calls is not None:
        found["n"] = cost.calls
    if cost.latency_s is not None:
        found["s"] = round(cost.latency_s, 3)
    if cost.cache_hits:
        found["h"] = cost.cache_hits
    return found


def _texts(record: PolicyRecord | None, strings: _Strings) -> dict[str, Any]:
    """What the model said, for a per-policy record (per-rule runs speak through their judgments)."""
    if record is None:
        return {}
    found: dict[str, Any] = {}
    for key, value in (
        ("a", record.analysis),
        ("r", record.reasoning),
        ("raw", record.answer),
        ("err", record.error),
    ):
        if value:
            found[key] = strings(value)
    if record.parse_status:
        found["st"] = record.parse_status
    if record.dropped_rules:
        found["drop"] = record.dropped_rules
    return found


def _judgment(judgment: JudgmentRecord, strings: _Strings) -> list[Any]:
    """``[rule, verdict (1 violated, 0 not, None none), said]``: the reason, else the error or raw answer."""
    verdict = (1 if judgment.pred else 0) if judgment.has_verdict else None
    said = judgment.reason or judgment.error or judgment.answer
    return [judgment.rule, verdict, None if not said else strings(said)]


def _result(
    case: Case,
    outcome: CaseOutcome,
    run: ViewedRun,
    judged: Sequence[JudgmentRecord],
    cost: CaseCost | None,
    strings: _Strings,
    *,
    modes: bool,
    cap_aware: bool,
) -> dict[str, Any] | None:
    record = run.records.get(case.id)
    if record is None and not judged:
        return None
    code, tau = _code(outcome)
    entry: dict[str, Any] = {"o": code}
    if code == EXCLUDED:
        entry["why"] = _why(record, judged, cap_aware)
    else:
        entry["p"] = sorted(outcome.pred)
        if tau is not None:
            entry["tau"] = tau
        fps, fns = error_types(case, outcome)
        if fps or fns:
            entry["et"] = {str(rule): kind for rule, kind in (fps | fns).items()}
        if modes and (found := classify_failure(case, outcome)):
            entry["m"] = found
    entry.update(_cost(cost))
    entry.update(_texts(run.results.records.get(case.id), strings))
    if judged:
        entry["j"] = [_judgment(judgment, strings) for judgment in judged]
    return entry


def _case(
    case: Case, strings: _Strings, facts: dict[str, list[str]], *, levels: bool, types: bool = True
) -> dict[str, Any]:
    """One case's row and detail (``levels``: the benchmark has levels; others carry none, not L0;
    ``types``: its rule types mean something, else none is shown, not SafePyramid's "decisive")."""
    meta = case.failure_mode_metadata
    flags = {
        **dict.fromkeys(meta.distractor_rules, "distractor"),
        **dict.fromkeys(meta.contradicted_rules, "contradicted"),
        **dict.fromkeys(meta.waived_rules, "waived"),
    }
    rules: list[list[Any]] = []
    for rule in case.rubric.entries():
        flag = flags.get(rule.rule)  # said only where the type does not already say it
        rules.append(
            [
                rule.rule,
                strings(rule.text),
                rule.type if types else "",
                *([flag] if flag not in (None, rule.type) else []),
            ]
        )
    entry: dict[str, Any] = {
        "id": case.id,
        **({"lv": case.level} if levels else {}),
        "d": case.domain,
        "g": sorted(case.ground_truth_violations),
        "cv": strings(case.conversation),
        "r": rules,
    }
    if case.tags:
        entry["tg"] = list(case.tags)
    if facts:
        entry["f"] = facts
    if case.framework:
        entry["fw"] = strings(case.framework)
    if not rules:  # the policy's rules are known only as its text
        entry["pol"] = strings(case.policy)
    return entry


def cases_document(
    cases: Sequence[Case],
    runs: Sequence[ViewedRun],
    *,
    kind: BenchmarkKind,
    baseline: str,
    cap_aware: bool = False,
) -> dict[str, Any]:
    """The Cases view's JSON document: cases (``cases``), each run's result per case (``res``,
    ``None`` where the run has no result), the string table (``S``) and what ``kind`` shows."""
    strings = _Strings()
    documents = []
    fact_names: dict[str, None] = {}
    for case in cases:
        facts = {name: values for name, values in kind.case_facts(case).items() if values}
        fact_names.update(dict.fromkeys(facts))
        documents.append(_case(case, strings, facts, levels=kind.breakdown == "level", types=kind.rule_types))
    results = []
    for run in runs:
        judged: dict[str, list[JudgmentRecord]] = {}
        for judgment in run.results.judgments:
            judged.setdefault(judgment.cid, []).append(judgment)
        outcomes = case_outcomes(cases, run.records, cap_aware=cap_aware)
        results.append(
            [
                _result(
                    case,
                    outcome,
                    run,
                    sorted(judged.get(case.id, []), key=lambda j: j.rule),
                    run.costs.get(case.id),
                    strings,
                    modes=kind.has_leaderboard,
                    cap_aware=cap_aware,
                )
                for case, outcome in zip(cases, outcomes, strict=True)
            ]
        )
    labels = [run.label for run in runs]
    return {
        "breakdown": kind.breakdown,
        "modes": kind.has_leaderboard,
        # One domain (a custom policy's, a filtered run's) is no column and no filter.
        "domains": len({case.domain for case in cases}) > 1,
        "facts": list(fact_names),
        "runs": [{"label": run.label, "variant": run.variant} for run in runs],
        "baseline": labels.index(baseline) if baseline in labels else 0,
        "cases": documents,
        "res": results,
        "S": strings.texts,
    }
