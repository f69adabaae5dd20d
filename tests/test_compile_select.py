"""Selection on dev counts excluded cases as wrong: a format-breaking candidate cannot win."""

from __future__ import annotations

from programs import make_program
from sp_dspy._compile import DevScore, evaluate_on_dev
from sp_dspy._compile._run import Contender, _select
from sp_dspy._lm import LMConfig, make_lm
from sp_dspy._runner._fake_gold import teach_fake
from tests._compile_support import sample_cases


def dev(score: float, excluded: int, rmr_avg: float | None, complete: bool = True) -> DevScore:
    return DevScore(
        score=score, ci95=None, n=10, excluded=excluded, complete=complete,
        rmr_avg_strict=score, rmr_avg=rmr_avg, rmr_exact=None, rdr=None,
    )  # fmt: skip


def test_unparseable_answers_score_zero_and_count_as_excluded() -> None:
    cases = sample_cases()[:3]
    lm = make_lm(LMConfig(model="fake/garbage"))
    result = evaluate_on_dev(make_program("dspy"), cases, lm)
    assert (result.score, result.excluded, result.complete) == (0.0, 3, True)
    assert result.rmr_avg is None  # the refusal-aware official cell has nothing to score


def test_oracle_answers_score_full_marks_with_an_interval() -> None:
    cases = sample_cases()[:6]
    lm = make_lm(LMConfig(model="fake/oracle"))
    teach_fake(lm, cases)
    result = evaluate_on_dev(make_program("dspy"), cases, lm)
    assert result.score == result.rmr_avg_strict == 100.0 and result.ci95 == [100.0, 100.0]


def test_a_candidate_that_wins_only_by_exclusions_loses() -> None:
    # Refusal-aware RMR would prefer the first (perfect on the 4 cases it answered).
    excluder = Contender("optimizer", {}, dev(40.0, excluded=6, rmr_avg=100.0))
    steady = Contender("recorded", {}, dev(60.0, excluded=0, rmr_avg=60.0))
    start = Contender("start", {}, dev(50.0, excluded=0, rmr_avg=50.0))
    assert _select([excluder, steady], start) is steady


def test_ties_go_to_the_optimizer_and_a_better_start_is_kept() -> None:
    start = Contender("start", {}, dev(50.0, 0, 50.0))
    compiled = Contender("optimizer", {}, dev(50.0, 0, 50.0))
    assert _select([compiled], start) is compiled
    worse = Contender("optimizer", {}, dev(30.0, 0, 30.0))
    assert _select([worse], start) is start


def test_incomplete_evaluations_are_not_compared() -> None:
    start = Contender("start", {}, dev(10.0, 0, 10.0))
    partial = Contender("optimizer", {}, dev(90.0, 0, 90.0, complete=False))
    assert _select([partial], start) is start
    nothing_complete = Contender("start", {}, dev(0.0, 10, None, complete=False))
    assert _select([partial], nothing_complete) is partial
