"""``run_ablation`` end to end on the bundled sample with the fake LM: outputs, honesty, resume.

The fake LM is never cached (``make_lm``), so a resumed ablation that sends nothing
twice does so by itself, not because a cache hid the repeats.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sp_dspy._ablate import AblationOutcome, run_ablation
from sp_dspy._ablate._plan import AblationPlan
from sp_dspy._ablate._variants import DEFAULT_VARIANTS
from sp_dspy._benchmarks import load_benchmark
from sp_dspy._data import Case
from sp_dspy._lm import LMConfig, fake_engine, make_lm
from sp_dspy._metrics import read_result_files, score
from sp_dspy._protocol import build_targets
from sp_dspy._runner import DataSelection
from sp_dspy.programs import PerRuleGuard, program_spec

LM = LMConfig(model="fake/random", cache=False)
CASES = load_benchmark().cases


@pytest.fixture
def no_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the end-to-end test draws the plots; elsewhere they would only cost seconds."""
    monkeypatch.setattr("sp_dspy._report._plots.render_plots", lambda summary: [])


def plan(limit: int, *variants: str, **extra: Any) -> AblationPlan:
    return AblationPlan(
        lm=LM,
        variants=list(variants or DEFAULT_VARIANTS),
        data=DataSelection(limit=limit),
        n_boot=50,
        concurrency=4,
        **extra,
    )


def fake_lm() -> Any:
    return make_lm(LM)


def calls(lm: Any) -> list[str]:
    """Every request the fake answered, as comparable text."""
    engine = fake_engine(lm)
    assert engine is not None
    return [json.dumps(call.messages, sort_keys=True) for call in engine.calls]


def units(cases: list[Case], protocol: str) -> int:
    return len(cases) if protocol == "per-policy" else sum(len(build_targets(c)) for c in cases)


@pytest.fixture(scope="module")
def default_ablation(tmp_path_factory: pytest.TempPathFactory) -> AblationOutcome:
    """The four default variants on two conversations (six cases), shared by two tests."""
    return run_ablation(plan(6), tmp_path_factory.mktemp("ablate") / "out", lm=fake_lm(), show_progress=False)


def test_four_default_variants_write_plan_summary_and_report(default_ablation: AblationOutcome) -> None:
    outcome, out = default_ablation, default_ablation.out

    assert not outcome.interrupted and outcome.summary is not None
    assert [run.variant.label for run in outcome.runs] == list(DEFAULT_VARIANTS)
    assert outcome.summary_file == out / "summary.json" and outcome.report_file == out / "report.html"
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["baseline"] == "official-per-policy" and summary["n_cases"] == 6
    rows = {v["label"]: v for v in summary["variants"]}
    assert list(rows) == list(DEFAULT_VARIANTS)
    assert {v["protocol"] for v in rows.values()} == {"per-policy", "per-rule"}
    assert all(isinstance(v["wall_s"], float) and v["wall_s"] >= 0 for v in rows.values())
    assert rows["official-per-rule"]["cells"]["ALL"]["lm_calls_per_case"] > 1
    assert {d["label"] for d in summary["diffs"]} == set(DEFAULT_VARIANTS[1:])
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and all(label in html for label in DEFAULT_VARIANTS)
    images = html.count('<img src="data:image/png;base64,')
    assert images >= 4 and images == html.count("<img ")  # every plot embedded, none fetched
    # The Cases view: the six cases with each of the four variants' result.
    assert outcome.summary.cases_view is not None and 'id="sp-cases-data"' in html
    assert len(outcome.summary.cases_view["cases"]) == 6
    assert [len(results) for results in outcome.summary.cases_view["res"]] == [6] * len(DEFAULT_VARIANTS)
    saved = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert saved["variants"] == list(DEFAULT_VARIANTS) and saved["run_id"] == outcome.plan.run_id
    for run in outcome.runs:
        assert run.results_file.parent == out / "results"
        assert run.run_id == f"{outcome.plan.run_id}-{run.variant.label}"


def test_report_numbers_equal_score_on_each_variants_files(default_ablation: AblationOutcome) -> None:
    outcome = default_ablation
    assert outcome.summary is not None
    cases = outcome.cases
    assert [c.id for c in cases] == [c.id for c in CASES[:6]]
    for run in outcome.runs:
        per_rule = run.variant.protocol == "per-rule"
        report = score(
            cases, read_result_files([run.results_file]), per_rule=per_rule, n_boot=50, seed=0
        ).to_json_dict()
        cells = outcome.summary.variant(run.variant.label).cells
        for name in ("L0", "L1", "L2", "ALL"):
            official = report[name]
            got = cells[name]
            assert (got.rmr, got.rmr_exact, got.rdr) == (
                official["rmr_avg"],
                official["rmr_exact"],
                official["rdr"],
            ), (run.variant.label, name)
            assert (got.total, got.excluded, got.excluded_pct) == (
                official["total"],
                official["excluded"],
                official["refusal"],
            )
            assert got.rmr_ci == report["ci"][name]["rmr_avg"]


def test_resume_runs_only_the_variants_not_run_yet(tmp_path: Path, no_plots: None) -> None:
    first_lm = fake_lm()
    first = run_ablation(
        plan(3, "official-per-policy", "dspy-per-rule", run_id="abl"),
        tmp_path,
        lm=first_lm,
        show_progress=False,
    )
    before = {run.results_file: run.results_file.read_bytes() for run in first.runs}
    first_calls = calls(first_lm)
    cases = first.cases
    assert len(first_calls) == units(cases, "per-policy") + units(cases, "per-rule")

    second_lm = fake_lm()
    second = run_ablation(plan(3), tmp_path, resume=True, lm=second_lm, show_progress=False)

    assert second.plan.run_id == "abl"
    assert [(run.variant.label, run.status) for run in second.runs] == [
        ("official-per-policy", "skipped"),
        ("official-per-rule", "complete"),
        ("dspy-per-policy", "complete"),
        ("dspy-per-rule", "skipped"),
    ]
    second_calls = calls(second_lm)
    assert len(second_calls) == units(cases, "per-rule") + units(cases, "per-policy")
    assert not set(first_calls) & set(second_calls)
    assert {path: path.read_bytes() for path in before} == before
    assert second.summary is not None and len(second.summary.variants) == 4


def test_a_variant_interrupted_mid_run_continues_where_it_stopped(tmp_path: Path, no_plots: None) -> None:
    lm = fake_lm()
    engine = fake_engine(lm)
    assert engine is not None
    reply = engine.reply
    per_policy = units(CASES[:3], "per-policy")

    def interrupting(*args: Any, **kwargs: Any) -> str:
        if len(engine.calls) == per_policy + 10:  # ten judgments into the per-rule variant
            raise KeyboardInterrupt
        return reply(*args, **kwargs)

    engine.reply = interrupting  # type: ignore[method-assign]
    variants = ("official-per-policy", "official-per-rule", "dspy-per-policy")
    first = run_ablation(plan(3, *variants), tmp_path, lm=lm, show_progress=False)
    assert first.interrupted and first.summary is None and not (tmp_path / "summary.json").exists()
    assert [run.status for run in first.runs] == ["complete", "interrupted"]
    written = first.runs[1].results_file.read_text(encoding="utf-8").splitlines()
    assert 0 < len(written) <= 10

    again = fake_lm()
    second = run_ablation(plan(3, *variants), tmp_path, resume=True, lm=again, show_progress=False)
    assert [run.status for run in second.runs] == ["skipped", "complete", "complete"]
    judgments = [json.loads(line) for line in second.runs[1].results_file.read_text().splitlines()]
    keys = [(j["cid"], j["rule"]) for j in judgments]
    assert len(keys) == len(set(keys)) == units(first.cases, "per-rule")
    assert len(calls(again)) == units(first.cases, "per-rule") - len(written) + per_policy
    assert second.runs[1].units_skipped_on_resume == len(written)


def test_an_artifact_directory_is_a_variant_labelled_by_its_name(tmp_path: Path, no_plots: None) -> None:
    artifact = tmp_path / "my-guard"
    artifact.mkdir()
    program = PerRuleGuard()
    program.save(str(artifact / "program.json"))
    (artifact / "manifest.json").write_text(json.dumps(program_spec(program)), encoding="utf-8")

    outcome = run_ablation(
        plan(3, "official-per-policy", str(artifact)), tmp_path / "out", lm=fake_lm(), show_progress=False
    )
    assert outcome.summary is not None
    row = outcome.summary.variant("my-guard")
    assert row.protocol == "per-rule" and row.cells["ALL"].total == 3
    assert outcome.runs[1].variant.program == str(artifact.resolve())
    assert outcome.runs[1].results_file.name.startswith(f"per_rule_{outcome.plan.run_id}-my-guard_")
