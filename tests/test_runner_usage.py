"""Cached answers count the same on every path: tokens and dollars as first produced.

The stub answers as ``gpt-4o-mini`` (priced), with the response cache on. A second run
of the same cases is served from the cache; the official baselines (sp-dspy's direct
client) and the DSPy programs (DSPy's engine and cache) must both report each
answer's tokens and dollars exactly as the first run did, and say how many answers
were replayed, in the records, the manifest and the ablation report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sp_dspy import load_benchmark
from sp_dspy._ablate import run_ablation
from sp_dspy._ablate._plan import AblationPlan
from sp_dspy._executor import run_eval
from sp_dspy._lm import LMConfig, configure_cache
from sp_dspy._runner import DataSelection, EvalConfig
from tests._lm_fixtures import oracle_stub
from tests._results import iter_records
from tests._stub_server import StubServer

pytestmark = [pytest.mark.usefixtures("restore_dspy_cache"), pytest.mark.network, pytest.mark.timeout(180)]

SAMPLE = load_benchmark().cases
VARIANTS = [
    ("official", "per-policy"),
    ("dspy", "per-policy"),
    ("official", "per-rule"),
    ("dspy", "per-rule"),
]


@pytest.fixture
def server(tmp_path: Path) -> Any:
    configure_cache(enabled=True, directory=tmp_path / "cache")
    with oracle_stub() as stub:
        yield stub


def lm(server: StubServer) -> LMConfig:
    return LMConfig(model="openai/gpt-4o-mini", api_base=server.url, num_retries=0)


def figures(path: Path) -> list[tuple[Any, ...]]:
    """(unit, usage, cost) of each record, in unit order (per-rule judgments land as they finish)."""
    units = [
        (str(r.get("id") or r["cid"]), r.get("rule", 0), r["usage"], r["cost"]) for r in iter_records(path)
    ]
    return sorted(units, key=lambda unit: unit[:2])


@pytest.mark.parametrize(("program", "protocol"), VARIANTS)
def test_a_cached_answer_reports_the_tokens_and_dollars_of_the_fresh_one(
    tmp_path: Path, server: StubServer, program: str, protocol: str
) -> None:
    def evaluate(run_id: str) -> Any:
        config = EvalConfig.model_validate(
            {
                "output_dir": tmp_path / "out",
                "run_id": run_id,
                "program": program,
                "protocol": protocol,
                "data": DataSelection(limit=1),
            }
        )
        return run_eval(config, lm(server), show_progress=False)

    fresh = evaluate("fresh")
    sent = len(server.chat_requests)
    replayed = evaluate("replayed")
    assert len(server.chat_requests) == sent > 0  # the second run reached no model
    first, second = figures(fresh.results_file), figures(replayed.results_file)
    assert second == first
    assert all(usage["prompt_tokens"] > 0 and cost > 0 for *_, usage, cost in second)
    assert {r["cache_hits"] for r in iter_records(fresh.results_file)} == {0}
    assert all(r["cache_hits"] >= 1 for r in iter_records(replayed.results_file))
    manifest = json.loads(replayed.paths.manifest.read_text(encoding="utf-8"))
    totals = manifest["runs"]["gpt-4o-mini"]["totals"]
    assert totals["cache_hits"] == sum(r["cache_hits"] for r in iter_records(replayed.results_file))
    assert totals["prompt_tokens"] == sum(usage["prompt_tokens"] for *_, usage, _ in first)
    assert manifest["runs"]["gpt-4o-mini"]["transport"] == "direct"  # the LM's engine, whichever program


def test_ablation_cost_columns_match_between_a_fresh_and_a_cached_run_and_notes_say_so(
    tmp_path: Path, server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sp_dspy._report._plots.render_plots", lambda summary: [])

    def ablate(out: str) -> Any:
        plan = AblationPlan(
            lm=lm(server),
            variants=["official-per-policy", "dspy-per-policy", "dspy-per-rule"],
            data=DataSelection(limit=2),
            n_boot=20,
        )
        outcome = run_ablation(plan, tmp_path / out, show_progress=False)
        assert outcome.summary is not None
        return outcome.summary

    fresh, cached = ablate("fresh"), ablate("cached")
    columns = ("prompt_tokens_per_case", "completion_tokens_per_case", "dollars_per_case", "lm_calls")
    for before, after in zip(fresh.variants, cached.variants, strict=True):
        cell, again = before.cells["ALL"], after.cells["ALL"]
        assert [getattr(again, c) for c in columns] == [getattr(cell, c) for c in columns]
        assert cell.dollars_per_case and cell.dollars_per_case > 0
        # The fresh run may replay a few answers too (two levels of a conversation share judgments).
        assert again.cache_hits == again.lm_calls > (cell.cache_hits or 0)
        said = (
            f": {again.lm_calls} of {again.lm_calls} LM answers came from the response cache;"
            " their tokens and dollars are counted as when first produced."
        )
        # A note shared by several variants is said once, naming each of them.
        [labels] = [note.removesuffix(said) for note in cached.notes if note.endswith(said)]
        assert after.label in labels.split(", ")


@pytest.mark.usefixtures("isolated_run")
def test_eval_says_how_many_answers_came_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.test_runner_failures import run_cli

    monkeypatch.setenv("SP_DSPY_CACHE_DIR", str(tmp_path / "cli-cache"))
    with oracle_stub() as stub:
        args = [
            "eval",
            "--lm",
            "openai/gpt-4o-mini",
            "--api-base",
            stub.url,
            "--program",
            "dspy",
            "--limit",
            "2",
        ]
        args += ["--output-dir", str(tmp_path / "out"), "-q"]
        code, err = run_cli(monkeypatch, capsys, *args, "--run-id", "a")
        assert code == 0 and "response cache" not in err
        code, err = run_cli(monkeypatch, capsys, *args, "--run-id", "b")
    assert code == 0
    assert "cache: 2 LM answer(s) came from the response cache; their tokens and dollars count" in err


def test_answers_replayed_from_the_cache_do_not_count_against_max_usd(
    tmp_path: Path, server: StubServer
) -> None:
    from sp_dspy._budget import BudgetCaps

    # Each unit reserves its worst case first (its prompt's bytes, 20 completion tokens): a cap of 90%
    # of the fresh run's price covers any one unit's reservation, and not the fresh run.
    short = lm(server).model_copy(update={"max_tokens": 20})

    def evaluate(run_id: str, caps: BudgetCaps) -> Any:
        settings = {"output_dir": tmp_path, "run_id": run_id, "concurrency": 1, "caps": caps}
        config = EvalConfig.model_validate({**settings, "data": DataSelection(limit=12)})
        return run_eval(config, short, show_progress=False)

    fresh = evaluate("fresh", BudgetCaps())
    price = sum(r["cost"] for r in iter_records(fresh.results_file))
    replayed = evaluate("replayed", BudgetCaps(max_usd=price * 0.9))  # a fresh run would stop before the end
    assert replayed.capped_by is None and len(list(iter_records(replayed.results_file))) == 12
    assert replayed.spent is not None and (replayed.spent.paid, replayed.spent.cache_hits) == (0.0, 12)
