"""Properties that must hold for any predictions (hypothesis)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import given, settings
from hypothesis import strategies as st

from sp_dspy._data._schema import Case
from sp_dspy._metrics import (
    JudgmentRecord,
    PolicyRecord,
    case_outcomes,
    compute_cell,
    read_result_files,
    score,
)
from sp_dspy._metrics._per_rule import judgment_pass
from tests._factories import raw_case

N_RULES = 12
RULES = {n: f"Rule number {n} applies." for n in range(1, N_RULES + 1)}
rule_sets = st.frozensets(st.integers(1, N_RULES), max_size=N_RULES)
# (ground truth, prediction, refused, level)
rows = st.lists(
    st.tuples(rule_sets, st.none() | rule_sets, st.booleans(), st.sampled_from(["L0", "L1", "L2"])),
    min_size=1,
    max_size=12,
)
TAU_KEYS = ["rmr_tau_10", "rmr_tau_9", "rmr_tau_8", "rmr_tau_7", "rmr_tau_6", "rmr_tau_5"]


Row = tuple[frozenset[int], frozenset[int] | None, bool, str]


def build(data: list[Row]) -> tuple[list[Case], dict[str, PolicyRecord]]:
    cases: list[Case] = []
    records: dict[str, PolicyRecord] = {}
    for i, (gt, pred, refused, level) in enumerate(data):
        cid = f"p{i}-{level.lower()}"
        cases.append(Case.model_validate(raw_case(cid, level=level, rules=RULES, gt=sorted(gt))))
        records[cid] = PolicyRecord(
            id=cid, violated_rules=None if pred is None else sorted(pred), refused=refused
        )
    return cases, records


@settings(max_examples=80, deadline=None)
@given(rows)
def test_cell_invariants(data: list[Row]) -> None:
    cases, records = build(data)
    for cell in score(cases, records, ci=False).cells.values():
        assert cell["total"] == cell["excluded"] + cell["n_eval"]
        if cell["n_eval"] == 0:
            assert all(cell[k] is None for k in [*TAU_KEYS, "rmr_avg", "rdr"])
            continue
        values = [cell[k] for k in TAU_KEYS]
        assert values == sorted(values)  # RMR@tau never falls as tau loosens
        assert 0.0 <= cell["rdr"] <= 100.0
        assert min(values[:4]) <= cell["rmr_avg"] <= max(values[:4])
        assert cell["rmr_exact"] == cell["rmr_tau_10"] == cell["rmr_10"]
        assert cell["rmr_avg_strict"] <= cell["rmr_avg"]


@settings(max_examples=60, deadline=None)
@given(rows, st.data())
def test_excluding_a_record_only_shrinks_denominators(data: list[Row], pick: st.DataObject) -> None:
    cases, records = build(data)
    victim = pick.draw(st.sampled_from(sorted(records)))
    fewer = {**records, victim: records[victim].model_copy(update={"refused": True})}
    before = compute_cell(case_outcomes(cases, records))
    after = compute_cell(case_outcomes(cases, fewer))
    assert after["total"] == before["total"]
    assert after["n_eval"] <= before["n_eval"]
    assert after["n_eval"] >= before["n_eval"] - 1
    assert after["rmr_avg_strict"] <= before["rmr_avg_strict"]
    matches_before = sum(o.hits[0] for o in case_outcomes(cases, records))
    matches_after = sum(o.hits[0] for o in case_outcomes(cases, fewer))
    assert matches_after <= matches_before


@settings(max_examples=40, deadline=None)
@given(rows, st.randoms(use_true_random=False))
def test_split_files_score_like_one_mapping(data: list[Row], rnd: random.Random) -> None:
    cases, records = build(data)
    lines = [json.dumps(r.model_dump(exclude_none=True)) for r in records.values()]
    rnd.shuffle(lines)
    cut = rnd.randint(0, len(lines))
    with TemporaryDirectory() as folder:
        first, second = Path(folder) / "a.jsonl", Path(folder) / "b.jsonl"
        first.write_text("\n".join(lines[:cut]), encoding="utf-8")
        second.write_text("\n".join(lines[cut:]), encoding="utf-8")
        from_files = score(cases, read_result_files([first, second]), ci=False)
    assert from_files.cells == score(cases, records, ci=False).cells


@settings(max_examples=60, deadline=None)
@given(rule_sets, rule_sets)
def test_unanimous_judgments_reproduce_the_predicted_set(gt: frozenset[int], pred: frozenset[int]) -> None:
    case = Case.model_validate(raw_case("j-l0", rules=RULES, gt=sorted(gt)))
    judgments = [JudgmentRecord(cid="j-l0", rule=n, pred=n in pred) for n in RULES]
    assert judgment_pass([case], judgments)[0]["j-l0"].violated_rules == sorted(pred)
