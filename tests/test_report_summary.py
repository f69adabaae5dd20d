"""``build_summary``: every number equals what ``score`` computes on the same files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sp_dspy._benchmarks import load_benchmark
from sp_dspy._errors import ConfigError, DataError
from sp_dspy._metrics import compare_cells, read_result_files, resolve_records, score
from sp_dspy._report import ComparisonSummary, build_summary
from sp_dspy._run_manifest import ModelRun, RunManifest, RunTotals, manifest_path, write_manifest

FIXTURES = Path(__file__).parent / "fixtures" / "report"
FILES = {
    "official_pp": FIXTURES / "official_per_policy.jsonl",
    "dspy_pp": FIXTURES / "dspy_per_policy.jsonl",
    "official_pr": FIXTURES / "official_per_rule.jsonl",
    "prefix_pr": FIXTURES / "official_per_rule_prefix.jsonl",
    "smollm": FIXTURES / "smollm_per_policy.jsonl",
    "byo": FIXTURES / "byo_predictions.jsonl",
}
N_BOOT = 200
CASES = load_benchmark(None).cases


@pytest.fixture(scope="module")
def summary() -> ComparisonSummary:
    return build_summary(CASES, [(None, [path]) for path in FILES.values()], n_boot=N_BOOT, seed=3)


@pytest.mark.parametrize("key", list(FILES))
def test_cells_equal_score_on_the_same_files(summary: ComparisonSummary, key: str) -> None:
    entry = summary.variants[list(FILES).index(key)]
    expected = score(CASES, read_result_files([FILES[key]]), n_boot=N_BOOT, seed=3).to_json_dict()
    assert entry.score == expected
    for cell in ("L0", "L1", "L2", "ALL"):
        got, ref = entry.cells[cell], expected[cell]
        assert (got.total, got.excluded, got.n_eval) == (ref["total"], ref["excluded"], ref["n_eval"])
        assert (got.rmr, got.rmr_exact, got.rdr, got.excluded_pct) == (
            ref["rmr_avg"],
            ref["rmr_exact"],
            ref["rdr"],
            ref["refusal"],
        )
        assert got.rmr_tau["0.5"] == ref["rmr_tau_5"] and got.rmr_tau["1.0"] == ref["rmr_tau_10"]
        assert got.rmr_ci == expected["ci"][cell]["rmr_avg"]
        assert got.rdr_ci == expected["ci"][cell]["rdr"]
    for level in ("L0", "L1", "L2"):
        for mode, rate in entry.failure_modes[level].items():
            assert rate == expected["failure_modes"][level][mode]["pct"]
    assert entry.domain_rmr == {d: cells["ALL"]["rmr_avg"] for d, cells in expected["domains"].items()}


def test_per_rule_type_stats_equal_score(summary: ComparisonSummary) -> None:
    entry = summary.variants[2]
    expected = score(CASES, read_result_files([FILES["official_pr"]]), ci=False).to_json_dict()["per_rule"]
    assert entry.rule_types is not None and summary.variants[0].rule_types is None
    for cell in ("L0", "ALL"):
        for rule_type, stats in expected[cell]["by_rule_type"].items():
            got = entry.rule_types[cell][rule_type]
            assert (got.precision, got.recall, got.f1, got.n_judgments) == (
                stats["precision"],
                stats["recall"],
                stats["f1"],
                stats["n_judgments"],
            )
    assert entry.cells["ALL"].per_rule_refusal_rate is not None


def test_diffs_are_paired_bootstraps_against_the_baseline(summary: ComparisonSummary) -> None:
    base = resolve_records(CASES, read_result_files([FILES["official_pp"]]))
    other = resolve_records(CASES, read_result_files([FILES["official_pr"]]))
    level = compare_cells(CASES, base, other, n_boot=N_BOOT, seed=3, excluded_wrong=False)["L1"]
    expected, test = level.paired, level.test
    row = next(d for d in summary.diffs_for("L1") if d.label == summary.variants[2].label)
    assert row.baseline == summary.baseline == summary.variants[0].label
    assert (row.n_pairs, row.diff, row.ci) == (expected.n_pairs, expected.diff, expected.ci)
    assert (row.variant_only_exact, row.baseline_only_exact) == (test.b_only, test.a_only)
    assert len(summary.diffs) == 4 * (len(FILES) - 1)


def test_labels_come_from_the_records_or_the_file_name(summary: ComparisonSummary) -> None:
    labels = [v.label for v in summary.variants]
    assert labels == [
        "gpt-4o-mini official-per-policy",
        "gpt-4o-mini dspy-per-policy",
        "gpt-4o-mini official-per-rule",
        "gpt-4o-mini official-per-rule-prefix",
        "SmolLM2-135M-Instruct official-per-policy",
        "byo_predictions",
    ]
    assert [v.protocol for v in summary.variants][2:4] == ["per-rule", "per-rule"]
    assert summary.variants[3].layout == "prefix"


def test_an_artifact_directory_names_the_variant_by_its_last_part(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    record = {"id": CASES[0].id, "violated_rules": [], "program": "artifacts/gepa-7", "model_name": "m"}
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    entry = build_summary(CASES, [(None, [path])], n_boot=0).variants[0]
    assert (entry.label, entry.variant, entry.program) == (
        "m gepa-7-per-policy",
        "gepa-7-per-policy",
        "gepa-7",
    )


def test_default_baseline_prefers_official_per_policy_then_first() -> None:
    later = build_summary(CASES, [(None, [FILES["byo"]]), (None, [FILES["official_pp"]])], n_boot=0)
    assert later.baseline == "gpt-4o-mini official-per-policy"
    named = build_summary(
        CASES, [("mine", [FILES["byo"]]), ("official-per-policy", [FILES["dspy_pp"]])], n_boot=0
    )
    assert named.baseline == "official-per-policy"
    first = build_summary(CASES, [(None, [FILES["byo"]]), (None, [FILES["prefix_pr"]])], n_boot=0)
    assert first.baseline == "byo_predictions"
    chosen = build_summary(CASES, [("a", [FILES["byo"]]), ("b", [FILES["prefix_pr"]])], "b", n_boot=0)
    assert chosen.baseline == "b" and {d.label for d in chosen.diffs} == {"a"}


def test_costs_tokens_and_calls_per_case(tmp_path: Path) -> None:
    ids = [c.id for c in CASES if c.level == "L0"][:3]
    lines = [
        {
            "id": ids[0],
            "violated_rules": [1],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10},
            "cost": 0.5,
        },
        {
            "id": ids[1],
            "violated_rules": [],
            "usage": {"prompt_tokens": 300, "completion_tokens": 30},
            "lm_calls": 3,
        },
        {"id": ids[2], "violated_rules": None, "error": "Timeout"},
    ]
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    cell = build_summary(CASES, [("run", [path])], n_boot=0).variants[0].cells["L0"]
    assert cell.cases_with_results == 3
    assert cell.prompt_tokens_per_case == 200.0 and cell.completion_tokens_per_case == 20.0
    assert cell.lm_calls_per_case == 2.0  # 1 (usage, no count) and 3 (explicit); the error reported nothing
    assert cell.dollars_per_case == 0.5 and cell.cost_coverage == 50.0


def test_per_rule_costs_sum_over_judgments(summary: ComparisonSummary) -> None:
    results = read_result_files([FILES["official_pr"]])
    l2 = {c.id for c in CASES if c.level == "L2"}
    own = [j for j in results.judgments if j.cid in l2]
    cell = summary.variants[2].cells["L2"]
    assert cell.lm_calls_per_case == round(len(own) / len(l2), 2)
    expected = sum(j.usage.cost or 0.0 for j in own if j.usage is not None) / len(l2)
    assert cell.dollars_per_case == pytest.approx(expected, abs=1e-6)


def _manifest(folder: Path, run_id: str, results: Path, wall_s: float, sha256: str) -> None:
    """A manifest as ``sp-dspy eval`` writes it (the report reads wall time, dataset hash, settings)."""
    run = ModelRun(
        model="m",
        lm={"model": "openai/m", "temperature": 0.0, "api_base": None},
        results_file=f"output/results/{results.name}",
        status="completed",
        started_at="2026-01-01T00:00:00+00:00",
        wall_s=wall_s,
        units_total=1,
        units_skipped_on_resume=0,
        totals=RunTotals(),
    )
    manifest = RunManifest(
        run_id=run_id,
        command=["sp-dspy", "eval"],
        settings={"concurrency": 8, "data": {"split": None}},
        dataset={"sha256": sha256},
        versions={},
        git_commit=None,
        runs={"m": run},
    )
    write_manifest(manifest_path(folder, run_id), manifest)


def test_wall_time_and_dataset_hash_come_from_run_manifests(tmp_path: Path) -> None:
    first, second = tmp_path / "results_r1_m.jsonl", tmp_path / "results_r2_m.jsonl"
    first.write_bytes(FILES["official_pp"].read_bytes())
    second.write_text(json.dumps({"id": "frau-103-l1", "violated_rules": [4]}) + "\n", encoding="utf-8")
    digest = load_benchmark(None).content_hash
    _manifest(tmp_path, "r1", first, 40.0, digest)
    _manifest(tmp_path, "r2", second, 2.5, "f" * 64)
    (tmp_path / "manifest_broken.json").write_text("{not json", encoding="utf-8")
    grouped = build_summary(CASES, [("both", [first, second])], n_boot=0, content_hash=digest)
    assert grouped.variants[0].wall_s == 42.5
    assert grouped.variants[0].dataset_hashes == sorted([digest, "f" * 64])
    assert any("another dataset (sha256 ffffffffffff" in note for note in grouped.notes)
    settings = grouped.variants[0].settings
    assert (settings["lm"], settings["temperature"], settings["concurrency"]) == ("openai/m", 0.0, 8)
    assert "api_base" not in settings and "split" not in settings
    alone = build_summary(CASES, [(None, [first])], n_boot=0, content_hash=digest)
    assert alone.variants[0].wall_s == 40.0 and not any("another dataset" in n for n in alone.notes)
    assert build_summary(CASES, [(None, [FILES["byo"]])], n_boot=0).variants[0].wall_s is None


def test_grouped_files_are_scored_together_later_file_wins(tmp_path: Path) -> None:
    retry = tmp_path / "retry.jsonl"
    retry.write_text(
        json.dumps({"id": "frau-103-l1", "violated_rules": [4, 5, 11, 17]}) + "\n", encoding="utf-8"
    )
    files = [FILES["official_pp"], retry]
    entry = build_summary(CASES, [("run+retry", files)], n_boot=0).variants[0]
    expected = score(CASES, read_result_files(files), ci=False).to_json_dict()
    assert entry.cells["L1"].rmr == expected["L1"]["rmr_avg"] and entry.cells["L1"].excluded == 0


def test_notes_flag_small_samples_toy_models_and_layouts(summary: ComparisonSummary) -> None:
    text = "\n".join(summary.notes)
    assert "Small sample" in text
    assert "SmolLM2-135M-Instruct official-per-policy: " in text and "plumbing check, not a guard" in text
    assert "cache-friendly layout" in text
    plain = build_summary(CASES, [(None, [FILES["official_pp"]])], n_boot=0)
    assert not any("plumbing" in note for note in plain.notes)


def test_summary_json_round_trips(summary: ComparisonSummary, tmp_path: Path) -> None:
    path = summary.write_json(tmp_path / "summary.json")
    assert summary.cases_view is not None and "cases_view" not in path.read_text(encoding="utf-8")
    # Everything but the Cases view's data (every case's texts: the page's, not summary.json's).
    assert ComparisonSummary.model_validate_json(path.read_text(encoding="utf-8")) == summary.model_copy(
        update={"cases_view": None}
    )


def test_bad_inputs_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="duplicate label"):
        build_summary(CASES, [("x", [FILES["byo"]]), ("x", [FILES["dspy_pp"]])], n_boot=0)
    with pytest.raises(ConfigError, match="--baseline: no variant labelled 'nope'"):
        build_summary(CASES, [(None, [FILES["byo"]])], "nope", n_boot=0)
    with pytest.raises(DataError, match="mixes"):
        build_summary(CASES, [("mixed", [FILES["byo"], FILES["official_pr"]])], n_boot=0)
    with pytest.raises(ConfigError, match="no result files"):
        build_summary(CASES, [], n_boot=0)
    with pytest.raises(DataError, match="cannot read"):
        build_summary(CASES, [(None, [tmp_path / "missing.jsonl"])], n_boot=0)
    with pytest.raises(ConfigError, match="--json"):
        build_summary(CASES, [(None, [FILES["byo"]])], n_boot=0).write_json(tmp_path / "no" / "dir.json")
