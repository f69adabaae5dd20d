"""Bootstrap intervals, paired differences and the paired randomization test."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sp_dspy._data._schema import Case
from sp_dspy._metrics import (
    CaseOutcome,
    PolicyRecord,
    case_outcomes,
    compare_cells,
    score,
    sign_flip_p,
)
from sp_dspy._metrics._bootstrap import _weights, bootstrap_matrix, outcome_matrix, percentile, resample_sums
from tests._factories import raw_case

RULES = {n: f"Rule number {n} applies." for n in range(1, 6)}


def make_case(cid: str, gt: list[int], level: str = "L0", domain: str = "privacy") -> Case:
    return Case.model_validate(raw_case(cid, level=level, domain=domain, rules=RULES, gt=gt))


def records(pairs: dict[str, list[int] | None], **extra: object) -> dict[str, PolicyRecord]:
    return {
        cid: PolicyRecord.model_validate({"id": cid, "violated_rules": p, **extra})
        for cid, p in pairs.items()
    }


CASES = [make_case(f"c{i:02d}-l0", [1, 2]) for i in range(40)]
# Right on every 3rd case only: RMR@1.0 = 100 * 14 / 40 = 35.0; wrong ones miss rule 2.
MIXED = records({c.id: [1, 2] if i % 3 == 0 else [1] for i, c in enumerate(CASES)})
PERFECT = records({c.id: [1, 2] for c in CASES})


def bootstrap_cell(outcomes: list[CaseOutcome], **options: Any) -> dict[str, list[float]] | None:
    return bootstrap_matrix(outcome_matrix(outcomes), **options)


def test_interval_is_deterministic_and_brackets_the_estimate() -> None:
    outcomes = case_outcomes(CASES, MIXED)
    first = bootstrap_cell(outcomes, name="L0", seed=3)
    assert first == bootstrap_cell(outcomes, name="L0", seed=3)
    assert first is not None
    others = {str(bootstrap_cell(outcomes, name="L0", seed=seed)) for seed in range(10)}
    assert len(others) > 1  # the seed matters
    low, high = first["rmr_exact"]
    assert 0.0 <= low < 35.0 < high <= 100.0
    assert first["rdr"][0] <= 100 * 26 / (40 * 2) <= first["rdr"][1]


def test_degenerate_intervals() -> None:
    interval = bootstrap_cell(case_outcomes(CASES, PERFECT), name="ALL")
    assert interval == {"rmr_avg": [100.0, 100.0], "rmr_exact": [100.0, 100.0], "rdr": [0.0, 0.0]}
    nothing = records({c.id: None for c in CASES})
    assert bootstrap_cell(case_outcomes(CASES, nothing), name="ALL") is None
    assert bootstrap_cell(case_outcomes(CASES, MIXED), name="ALL", n_boot=0) is None


def test_cell_intervals_do_not_shift_when_other_cells_change() -> None:
    alone = score(CASES, MIXED, seed=1, n_boot=200).ci["L0"]
    more_cases = [*CASES, make_case("x-l1", [1], level="L1", domain="fraud")]
    more_records = {**MIXED, **records({"x-l1": [1]})}
    assert score(more_cases, more_records, seed=1, n_boot=200).ci["L0"] == alone


def test_report_carries_level_and_domain_intervals() -> None:
    report = score(CASES, MIXED, n_boot=100)
    assert set(report.ci) == {"L0", "L1", "L2", "ALL", "domains"}
    assert report.ci["L1"] is None  # no cases
    domain_all = report.ci["domains"]["privacy"]["ALL"]
    assert domain_all is not None and domain_all != report.ci["ALL"]  # same cases, its own random stream
    assert report.ci["domains"]["privacy"]["L2"] is None
    assert score(CASES, MIXED, ci=False).ci == {}


def paired_diff(
    cases: list[Case], a: dict[str, PolicyRecord], b: dict[str, PolicyRecord], **options: Any
) -> Any:
    return compare_cells(cases, a, b, **options)["ALL"].paired


def test_paired_difference() -> None:
    diff = paired_diff(CASES, PERFECT, MIXED, seed=0, n_boot=500)
    assert diff.n_pairs == 40
    assert diff.a["rmr_exact"] == 100.0 and diff.b["rmr_exact"] == 35.0
    assert diff.diff["rmr_exact"] == -65.0
    assert diff.diff["rdr"] == 32.5  # 100 * 26 / 80 - 0
    low, high = diff.ci["rmr_exact"] or [0.0, 0.0]
    assert low <= -65.0 <= high < 0.0
    same = paired_diff(CASES, MIXED, MIXED, n_boot=100)
    assert same.diff == {"rmr_avg": 0.0, "rmr_exact": 0.0, "rdr": 0.0}
    assert same.ci == {"rmr_avg": [0.0, 0.0], "rmr_exact": [0.0, 0.0], "rdr": [0.0, 0.0]}


def test_paired_difference_uses_cases_scored_by_both() -> None:
    refused_first = {**PERFECT, **records({CASES[0].id: [1, 2]}, refused=True)}
    missing_last = {k: v for k, v in MIXED.items() if k != CASES[-1].id}
    diff = paired_diff(CASES, refused_first, missing_last, n_boot=10)
    assert diff.n_pairs == 38
    empty = paired_diff(CASES, {}, MIXED)
    assert empty.n_pairs == 0 and empty.diff["rmr_avg"] is None and empty.ci["rmr_avg"] is None


@pytest.mark.parametrize(
    ("a_only", "b_only", "p_value"),
    [
        (0, 0, 1.0),
        (0, 5, 0.0625),  # 2 * C(5,0) / 2**5
        (1, 9, 0.021484375),  # 2 * (1 + 10) / 2**10
        (3, 3, 1.0),  # 2 * 42 / 64 capped at 1
        (7, 17, 2 * sum([1, 24, 276, 2024, 10626, 42504, 134596, 346104]) / 2**24),
        (10, 30, 2 * sum(math.comb(40, i) for i in range(11)) / 2**40),  # exact at any size: no chi-square
    ],
)
def test_the_sign_flip_test_over_single_case_units_is_mcnemars_exact_test(
    a_only: int, b_only: int, p_value: float
) -> None:
    assert sign_flip_p([-1] * a_only + [1] * b_only + [0] * 4) == pytest.approx(p_value, rel=1e-9)


def test_the_sign_flip_test_counts_a_conversation_once() -> None:
    """Nine discordant cases in three conversations are three coin flips, not nine: p = 2/8."""
    assert sign_flip_p([3, 3, 3]) == pytest.approx(0.25)
    assert sign_flip_p([1] * 9) == pytest.approx(2 / 2**9)
    assert sign_flip_p([2, -1]) == pytest.approx(1.0)  # totals +-1 and +-3: |1| is the smallest
    assert sign_flip_p([3, 1]) == pytest.approx(0.5)  # totals 4, 2, -2, -4: |4| in 2 of 4


def test_the_paired_test_on_result_sets() -> None:
    result = compare_cells(CASES, PERFECT, MIXED)["ALL"].test
    assert (result.n_pairs, result.n_units, result.a_only, result.b_only) == (40, 40, 26, 0)
    assert result.method == "paired randomization test over conversations"
    assert result.p_value == pytest.approx(2 / 2**26)


def test_compare_cells_counts_an_exclusion_as_wrong_or_leaves_the_pair_out() -> None:
    refused = {**MIXED, **records({CASES[0].id: [1, 2]}, refused=True)}  # A exact on CASES[0], B refused
    missing = {k: v for k, v in PERFECT.items() if k != CASES[-1].id}  # not compared at all
    wrong = compare_cells(CASES, missing, refused, n_boot=0)["ALL"]
    assert (wrong.n, wrong.test.n_pairs, wrong.test.a_only, wrong.test.b_only) == (39, 39, 27, 0)
    assert (wrong.paired.n_pairs, wrong.b["excluded"], wrong.a["total"]) == (38, 1, 39)
    scored = compare_cells(CASES, missing, refused, n_boot=0, excluded_wrong=False)["ALL"]
    assert (scored.test.n_pairs, scored.test.a_only, scored.paired) == (38, 26, wrong.paired)


def test_scoring_3000_cases_across_ten_domains() -> None:
    domains = [f"domain_{d}" for d in range(10)]
    cases = [
        make_case(f"k{i}-l{i % 3}", [1, 2, 3], level=f"L{i % 3}", domain=domains[i % 10]) for i in range(3000)
    ]
    predictions = records({c.id: [1, 2, 3] if i % 4 else [1, 4] for i, c in enumerate(cases)})
    report = score(cases, predictions)
    assert report.cells["ALL"]["rmr_exact"] == 75.0
    assert sorted(report.ci["domains"]) == sorted(domains)
    low, high = report.ci["ALL"]["rmr_exact"]
    assert low < 75.0 < high


@pytest.mark.parametrize(("n", "high"), [(1, 5), (7, 3), (80, 40), (2500, 30), (300, 2**40), (20, 2**59)])
def test_packed_resample_sums_equal_the_multiplicity_product(n: int, high: int) -> None:
    """The bit-packed, chunked sums are exactly ``weights @ matrix`` from the same seed.

    Same draws, same integers: intervals did not change when the packed route replaced
    the product. ``2**40`` packs one column per word; ``2**59`` needs more than 63 bits
    per column and takes the product route itself.
    """
    matrix = np.random.default_rng(n).integers(0, high, size=(n, 4), dtype=np.int64)
    for n_boot in (1, 999):
        expected = _weights(n, n_boot, np.random.default_rng([3, n])) @ matrix
        (packed,) = resample_sums([matrix], n_boot, np.random.default_rng([3, n]))
        assert packed.dtype == np.int64 and np.array_equal(packed, expected)
    pair = resample_sums([matrix, matrix[:, ::-1].copy()], 50, np.random.default_rng(9))
    expected = _weights(n, 50, np.random.default_rng(9))
    assert np.array_equal(pair[0], expected @ matrix) and np.array_equal(pair[1], expected @ matrix[:, ::-1])


@given(
    values=st.lists(
        st.one_of(st.floats(0, 100), st.sampled_from([0.0, 12.5, 100.0, 1 / 3])), min_size=1, max_size=60
    ),
    q=st.one_of(st.sampled_from([0.0, 2.5, 50.0, 97.5, 100.0]), st.floats(0, 100)),
)
def test_percentile_is_numpys_to_the_bit(values: list[float], q: float) -> None:
    expected = float(np.percentile(np.array(values), q))
    assert percentile(np.sort(np.array(values)), q) == expected


def test_percentile_on_bootstrap_sized_rows() -> None:
    rows = np.random.default_rng(5).integers(0, 400, size=(20, 1000)) / 4
    for row in rows:
        for q in (2.5, 97.5):
            assert percentile(np.sort(row), q) == float(np.percentile(row, q))
