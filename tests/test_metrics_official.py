"""Golden, hand-computed values for the official cells (contract section 2).

Every expected number below is worked out in the comment next to it; several are
chosen where a plausible re-implementation gives a different last digit.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import pytest

from sp_dspy._data._schema import Case
from sp_dspy._metrics import PolicyRecord, case_outcomes, compute_cell, level_cells, score, tolerance
from tests._factories import raw_case


def make_case(
    cid: str, gt: list[int], *, level: str = "L0", domain: str = "privacy", n_rules: int = 0
) -> Case:
    count = max(n_rules, max(gt, default=0), 3)
    rules = {n: f"Rule number {n} applies." for n in range(1, count + 1)}
    return Case.model_validate(raw_case(cid, level=level, domain=domain, rules=rules, gt=gt))


def rec(cid: str, rules: list[int] | None, **extra: object) -> PolicyRecord:
    return PolicyRecord.model_validate({"id": cid, "violated_rules": rules, **extra})


def cell_of(cases: list[Case], records: list[PolicyRecord], *, cap_aware: bool = False) -> dict[str, object]:
    return compute_cell(case_outcomes(cases, {r.id: r for r in records}, cap_aware=cap_aware))


@pytest.mark.parametrize(
    ("gt_size", "eps", "k"),
    [
        (10, 10, 1),  # tau .9, |G| = 10: float (1 - .9) * 10 = 0.999... would floor to 0
        (9, 10, 0),
        (5, 20, 1),
        (4, 20, 0),
        (3, 30, 0),  # 0.9 -> 0
        (4, 30, 1),  # 1.2 -> 1
        (10, 30, 3),
        (2, 50, 1),
        (0, 50, 0),  # |G| = 0 -> k = 0
        (7, 0, 0),
    ],
)
def test_tolerance_is_integer_floor(gt_size: int, eps: int, k: int) -> None:
    assert tolerance(gt_size, eps) == k


def test_basic_cell_by_hand() -> None:
    ten = list(range(1, 11))
    cases = [
        make_case("a-l0", [1, 2]),
        make_case("b-l0", ten),
        make_case("c-l0", []),
        make_case("d-l0", []),
        make_case("e-l0", [1]),
        make_case("f-l0", [1]),
    ]
    records = [
        rec("a-l0", [1, 2]),  # exact; union 2
        rec("b-l0", ten[:-1]),  # FN = 1, |G| = 10: fails 1.0, matches .9 (k=1) and looser; union 10
        rec("c-l0", []),  # |G| = 0, P empty: matches everywhere; union 0
        rec("d-l0", [3]),  # |G| = 0, FP = 1: k = 0 -> matches nowhere; union 1
        rec("e-l0", [1], refused=True),  # excluded
        # f-l0 has no record: excluded
    ]
    cell = cell_of(cases, records)
    assert cell == {
        "total": 6,
        "excluded": 2,
        "n_eval": 4,
        "rmr_exact": 50.0,  # a, c of 4
        "rmr_avg": 68.75,  # (50 + 75 + 75 + 75) / 4
        "rdr": 15.38,  # 100 * (1 + 1) / (2 + 10 + 0 + 1) = 15.3846
        "refusal": 33.33,  # 100 * 2 / 6
        "rmr_tau_10": 50.0,
        "rmr_tau_9": 75.0,
        "rmr_tau_8": 75.0,
        "rmr_tau_7": 75.0,
        "rmr_tau_6": 75.0,
        "rmr_tau_5": 75.0,
        "rmr_10": 50.0,
        # strict: 2/6 -> 33.33, 3/6 -> 50.0 (x3); (33.33 + 150) / 4 = 45.8325 in decimal,
        # 45.832499999999996 in binary -> 45.83
        "rmr_avg_strict": 45.83,
    }


def test_rmr_averages_the_rounded_per_tau_values() -> None:
    ten = list(range(1, 11))
    cases = [make_case(f"c{i}-l1", ten, level="L1") for i in range(3)]
    records = [rec("c0-l1", ten), rec("c1-l1", ten[:-1]), rec("c2-l1", ten[:-4])]
    cell = cell_of(cases, records)
    # matches per tau 1.0/.9/.8/.7 = 1/2/2/2 of 3 -> 33.33, 66.67, 66.67, 66.67;
    # their mean 58.335 (binary 58.33500000000001) rounds to 58.34, while the mean of
    # the unrounded rates, 100 * 7 / 12 = 58.333, would give 58.33.
    assert [cell[k] for k in ("rmr_tau_10", "rmr_tau_9", "rmr_tau_8", "rmr_tau_7")] == [
        33.33,
        66.67,
        66.67,
        66.67,
    ]
    assert cell["rmr_avg"] == 58.34
    assert cell["rmr_tau_6"] == 100.0  # FN = 4 <= floor(.4 * 10)


def test_rdr_uses_python_round_not_half_up() -> None:
    # FP = 107 over a union of 4,000: 100 * 107 / 4000 = 2.675, stored as 2.67499999...
    gt = list(range(1, 3894))
    cell = cell_of([make_case("x-l0", gt)], [rec("x-l0", list(range(1, 4001)))])
    assert cell["rdr"] == 2.67
    assert str(Decimal("2.675").quantize(Decimal("0.01"), ROUND_HALF_UP)) == "2.68"  # what half-up would say


def test_rdr_exact_binary_tie_rounds_to_even() -> None:
    # 100 * 1 / 800 = 0.125 exactly: Python's round gives 0.12 (half-up would give 0.13).
    gt = list(range(1, 800))
    cell = cell_of([make_case("x-l0", gt)], [rec("x-l0", [*gt, 800])])
    assert cell["rdr"] == 0.12


def test_refusal_uses_100_times_count_over_n() -> None:
    # 100 * 23 / 160 = 14.375 (exact tie, rounds to even 14.38); 23 / 160 * 100 is
    # 14.374999999999998 and would print 14.37.
    cases = [make_case(f"c{i}-l0", [1]) for i in range(160)]
    records = [rec(f"c{i}-l0", [1], refused=i < 23) for i in range(160)]
    assert cell_of(cases, records)["refusal"] == 14.38


def test_rdr_is_zero_when_every_union_is_empty() -> None:
    cell = cell_of([make_case("a-l0", []), make_case("b-l0", [])], [rec("a-l0", []), rec("b-l0", [])])
    assert cell["rdr"] == 0.0
    assert cell["rmr_avg"] == 100.0


def test_cell_without_scored_cases_reports_null_metrics() -> None:
    cases = [make_case("a-l2", [1], level="L2"), make_case("b-l2", [2], level="L2")]
    cell = cell_of(cases, [rec("a-l2", None)])  # null prediction + missing record
    assert cell["n_eval"] == 0
    assert cell["excluded"] == 2
    assert cell["refusal"] == 100.0
    for key in ("rmr_exact", "rmr_avg", "rdr", "rmr_tau_10", "rmr_tau_5", "rmr_10"):
        assert cell[key] is None
    assert cell["rmr_avg_strict"] == 0.0  # every case counted as a miss


def test_empty_cell() -> None:
    cell = compute_cell([])
    assert cell["total"] == 0
    assert cell["refusal"] == 0.0
    assert cell["rmr_avg"] is None
    assert cell["rmr_avg_strict"] is None


@pytest.mark.parametrize(
    "extra",
    [
        {"refused": True},
        {"parse_failed": True},
        {"error": "HTTP 500"},
        {"error": {"type": "timeout"}},
        {"structured_scores": {"parse_failed": True}},
        {"structured_scores": {"refused": True}},
    ],
)
def test_exclusion_rules(extra: dict[str, object]) -> None:
    cell = cell_of([make_case("a-l0", [1])], [rec("a-l0", [1], **extra)])
    assert (cell["excluded"], cell["n_eval"]) == (1, 0)


def test_empty_error_string_and_null_flags_do_not_exclude() -> None:
    record = rec("a-l0", [1], error="", refused=None, parse_failed=None)
    assert cell_of([make_case("a-l0", [1])], [record])["n_eval"] == 1


@pytest.mark.parametrize(("tokens", "excluded"), [(64_999, 0), (65_000, 1), (120_000, 1)])
def test_cap_aware_threshold(tokens: int, excluded: int) -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": tokens + 10}
    record = rec("a-l0", [1], usage=usage)
    assert cell_of([make_case("a-l0", [1])], [record])["excluded"] == 0
    assert cell_of([make_case("a-l0", [1])], [record], cap_aware=True)["excluded"] == excluded


def test_cap_aware_tolerates_null_usage_fields() -> None:
    record = rec("a-l0", [1], usage={"prompt_tokens": None, "completion_tokens": None, "total_tokens": None})
    assert cell_of([make_case("a-l0", [1])], [record], cap_aware=True)["n_eval"] == 1


def test_all_pools_cases_rather_than_averaging_levels() -> None:
    cases = [make_case("a-l0", [1]), make_case("b-l1", [1], level="L1"), make_case("c-l1", [1], level="L1")]
    records = [rec("a-l0", [1]), rec("b-l1", [1]), rec("c-l1", [2])]
    cells = level_cells(case_outcomes(cases, {r.id: r for r in records}))
    assert cells["L0"]["rmr_exact"] == 100.0
    assert cells["L1"]["rmr_exact"] == 50.0
    assert cells["ALL"]["rmr_exact"] == 66.67  # 2 of 3 pooled, not (100 + 50) / 2
    assert cells["L2"]["total"] == 0


def test_domain_cells() -> None:
    cases = [
        make_case("a-l0", [1], domain="fraud"),
        make_case("b-l0", [1], domain="privacy"),
        make_case("c-l1", [1], domain="privacy", level="L1"),
    ]
    records = {"a-l0": rec("a-l0", [1]), "b-l0": rec("b-l0", [2]), "c-l1": rec("c-l1", [1])}
    report = score(cases, records, ci=False)
    assert sorted(report.domains) == ["fraud", "privacy"]
    assert report.domains["fraud"]["ALL"]["rmr_exact"] == 100.0
    assert report.domains["privacy"]["L0"]["rmr_exact"] == 0.0
    assert report.domains["privacy"]["L1"]["rmr_exact"] == 100.0
    assert report.domains["privacy"]["ALL"]["rmr_exact"] == 50.0
    assert report.domains["fraud"]["L1"]["n_eval"] == 0
