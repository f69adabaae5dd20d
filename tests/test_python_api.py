"""Every command's job runs from Python with the config object its CLI builds, through the names
``sp_dspy`` re-exports (as inspect's ``eval()`` / ``eval_set()``), and gives what the command writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import sp_dspy
from sp_dspy.cli import app

pytestmark = pytest.mark.usefixtures("isolated_run")

API = ("AblationPlan", "CompileConfig", "LMConfig", "DataSelection", "EvalConfig", "ExperimentPlan", "build_eval_config",
       "build_experiment", "build_plan", "compile_guard", "plan_run", "price_experiment", "run_ablation",
       "run_eval", "run_experiment")  # fmt: skip


def test_the_jobs_are_public_names_and_import_sp_dspy_stays_light() -> None:
    assert set(API) <= set(sp_dspy.__all__)
    code = "import sys, sp_dspy; sp_dspy.run_ablation; sp_dspy.ExperimentPlan; print('dspy' in sys.modules)"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "False"


def _records(path: Path) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [{k: v for k, v in line.items() if k not in ("timestamp", "latency_s")} for line in lines]


def test_eval_from_python_writes_the_records_the_command_writes(tmp_path: Path) -> None:
    flags = {"data": {"limit": 3}, "output_dir": tmp_path / "py", "run_id": "same"}
    config = sp_dspy.build_eval_config(flags)  # what ``eval --limit 3 --output-dir ... --run-id same`` builds
    outcome = sp_dspy.run_eval(config, sp_dspy.LMConfig(model="fake"), show_progress=False)
    cli = tmp_path / "cli"
    args = ["eval", "--lm", "fake", "--limit", "3", "--output-dir", str(cli), "--run-id", "same", "-q"]
    assert CliRunner().invoke(app, args).exit_code == 0
    (written,) = cli.glob("*.jsonl")
    assert _records(outcome.results_file) == _records(written)
    assert outcome.report is not None


def test_ablate_from_python_with_the_plan_the_command_builds(tmp_path: Path) -> None:
    variants = "official-per-policy,dspy-per-policy"
    plan = sp_dspy.build_plan(
        {"lm": {"model": "fake"}, "variants": variants, "data": {"limit": 2}, "n_boot": 0}
    )
    outcome = sp_dspy.run_ablation(plan, tmp_path / "abl", show_progress=False)
    assert [run.status for run in outcome.runs] == ["complete", "complete"]
    assert outcome.summary_file is not None and outcome.summary_file.exists()
