"""A run's manifest: one model, one reader; totals stored flat, as manifests always stored them."""

from __future__ import annotations

import json
from pathlib import Path

from sp_dspy._metrics import PolicyRecord
from sp_dspy._run_manifest import (
    ModelRun,
    RunManifest,
    RunTotals,
    manifest_path,
    read_run_manifest,
    write_manifest,
)


def _manifest(totals: RunTotals) -> RunManifest:
    run = ModelRun(
        model="m",
        lm={"model": "openai/m"},
        results_file="results_r_m.jsonl",
        status="completed",
        started_at="2026-01-01T00:00:00+00:00",
        units_total=2,
        units_skipped_on_resume=0,
        totals=totals,
    )
    return RunManifest(
        run_id="r",
        command=["sp-dspy"],
        settings={},
        dataset={},
        versions={},
        git_commit=None,
        runs={"m": run},
    )


def test_totals_are_written_flat_and_read_back_whole(tmp_path: Path) -> None:
    records = [
        PolicyRecord.model_validate(line)
        for line in [
            {"id": "a", "usage": {"prompt_tokens": 10, "completion_tokens": 2}, "cost": 0.1, "cache_hits": 1},
            {"id": "b", "usage": {"prompt_tokens": 5}, "cost": None, "error_class": "timeout"},
        ]
    ]
    totals = RunTotals.of(records)
    path = manifest_path(tmp_path, "r")
    write_manifest(path, _manifest(totals))
    stored = json.loads(path.read_text(encoding="utf-8"))["runs"]["m"]["totals"]
    assert stored == {
        "records": 2,
        "errors": 1,
        "prompt_tokens": 15,
        "completion_tokens": 2,
        "cost_usd": 0.1,
        "cache_hits": 1,
    }
    read = read_run_manifest(path)
    assert read is not None and read.runs["m"].totals == totals
    unpriced = PolicyRecord.model_validate({"id": "c", "usage": {"prompt_tokens": 1}})
    assert RunTotals.of([unpriced]).usage.cost is None  # unpriced stays unknown


def test_a_missing_broken_or_foreign_manifest_reads_as_none(tmp_path: Path) -> None:
    assert read_run_manifest(tmp_path / "manifest_none.json") is None
    broken = tmp_path / "manifest_b.json"
    broken.write_text("{not json", encoding="utf-8")
    foreign = tmp_path / "manifest_f.json"
    foreign.write_text('{"run_id": "f"}', encoding="utf-8")
    assert read_run_manifest(broken) is None and read_run_manifest(foreign) is None
