"""Selection on dev counts excluded cases as wrong: a format-breaking candidate cannot win."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sp_dspy._budget import BudgetExceeded
from sp_dspy._compile._evaluate import evaluate_on_dev
from sp_dspy._compile._run import _select
from sp_dspy._compile._types import Contender, DevScore
from sp_dspy._data import Case
from sp_dspy._lm import LMConfig, make_lm
from sp_dspy._lm._direct import client_of
from sp_dspy._runner._fake_gold import teach_fake
from sp_dspy.programs import OfficialPerPolicy, PolicyRecord, make_program
from tests._compile_support import improving_stub, sample_cases


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


class Scripted(OfficialPerPolicy):
    """Gold plus rule 999 (outside every policy); the budget refuses the case ``refused``."""

    def __init__(self, refused: str = "") -> None:
        super().__init__()
        self.refused = refused

    async def acall_case(self, case: Case, lm: Any) -> PolicyRecord:
        if case.id == self.refused:
            raise BudgetExceeded("max_calls")
        rules = [*case.ground_truth_violations, 999]
        return PolicyRecord(id=case.id, protocol="per-policy", violated_rules=rules, parse_status="clean")


def test_dev_scoring_records_as_eval_does_and_a_refused_case_scores_zero() -> None:
    cases = sample_cases()[:4]
    result = evaluate_on_dev(Scripted(), cases, None)
    # 999 is dropped, as eval records a DSPy program's answer.
    assert (result.score, result.complete) == (100.0, True)
    refused = evaluate_on_dev(Scripted(refused=cases[1].id), cases, None)
    assert (refused.score, refused.excluded, refused.complete) == (75.0, 1, False)


def test_dev_evaluation_over_http_closes_its_connection_pool() -> None:
    cases = sample_cases()[:2]
    with improving_stub(cases) as server:
        lm = make_lm(LMConfig(model="openai/stub", api_base=server.url, cache=False))
        result = evaluate_on_dev(make_program("dspy"), cases, lm)
        transport = client_of(lm)
        assert result.n == 2 and server.chat_requests
        assert transport is not None and len(transport._sessions) == 0  # none outlives its event loop


def test_a_candidate_that_wins_only_by_exclusions_loses() -> None:
    # Refusal-aware RMR would prefer the first (perfect on the 4 cases it answered).
    excluder = Contender("optimizer", {}, dev(40.0, excluded=6, rmr_avg=100.0))
    steady = Contender("recorded", {}, dev(60.0, excluded=0, rmr_avg=60.0))
    start = Contender("start", {}, dev(50.0, excluded=0, rmr_avg=50.0))
    selection = _select([excluder, steady], start)
    assert selection.chosen is steady
    assert selection.reason == (
        "kept a candidate the optimizer tried: it scored 60.00 on dev, better than the starting program's 50.00"
    )


def test_a_tie_keeps_the_starting_program_and_says_why() -> None:
    start = Contender("start", {}, dev(50.0, 0, 50.0))
    compiled = Contender("optimizer", {}, dev(50.0, 0, 50.0))
    selection = _select([compiled], start)
    assert selection.chosen is start
    assert "tied with it on dev (50.00 against 50.00)" in selection.reason
    assert "must be better to replace it" in selection.reason


def test_a_better_candidate_replaces_the_start_and_a_worse_one_does_not() -> None:
    start = Contender("start", {}, dev(50.0, 0, 50.0))
    better = Contender("optimizer", {}, dev(50.5, 0, 50.5))
    assert _select([better], start).chosen is better
    worse = Contender("optimizer", {}, dev(30.0, 0, 30.0))
    selection = _select([worse], start)
    assert selection.chosen is start and "scored below it" in selection.reason
    assert _select([worse, better], start).chosen is better  # the best candidate is compared


def test_incomplete_evaluations_are_not_compared() -> None:
    start = Contender("start", {}, dev(10.0, 0, 10.0))
    partial = Contender("optimizer", {}, dev(90.0, 0, 90.0, complete=False))
    selection = _select([partial], start)
    assert selection.chosen is start and "no candidate finished its dev evaluation" in selection.reason
    unfinished_start = Contender("start", {}, dev(0.0, 10, None, complete=False))
    complete = Contender("optimizer", {}, dev(90.0, 0, 90.0))
    selection = _select([complete], unfinished_start)
    assert selection.chosen is unfinished_start and "did not finish" in selection.reason


def test_a_copro_compile_that_ties_keeps_the_written_instructions(tmp_path: Path) -> None:
    """per-rule COPRO on fake/instructed starts at 100 on dev: the proposals cannot beat it."""
    from sp_dspy._compile import CompileConfig, compile_guard

    config = CompileConfig(
        optimizer="copro", protocol="per-rule", out=tmp_path / "art",
        overrides={"breadth": 2, "depth": 1, "num_threads": 2},
    )  # fmt: skip
    outcome = compile_guard(config, LMConfig(model="fake/instructed"))
    manifest = outcome.manifest
    assert manifest is not None and manifest.dev.before.score == manifest.dev.after.score == 100.0
    assert manifest.dev.selected == "start" and "tied with it" in manifest.dev.reason
    prompt = (tmp_path / "art" / "prompt.md").read_text()
    assert "No change." in prompt and "Kept the starting program" in prompt
