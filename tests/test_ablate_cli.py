"""``sp-dspy ablate`` through typer: outputs, resume from OUTDIR alone, plan files, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from sp_dspy._ablate._plan import ablation_lock
from sp_dspy._errors import ConfigError
from sp_dspy.cli._ablate import register
from tests._factories import command_app

FAST = ["--no-cache", "--n-boot", "20", "-q", "--concurrency", "4"]


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    return command_app(register)


@pytest.fixture(autouse=True)
def no_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plots are the report package's job (its own tests); here they would only cost seconds."""
    monkeypatch.setattr("sp_dspy._report._plots.render_plots", lambda summary: [])


def invoke(app: typer.Typer, *args: str) -> Result:
    return CliRunner().invoke(app, ["ablate", *args], env={"COLUMNS": "200"})


def config_error(result: Result) -> str:
    assert isinstance(result.exception, ConfigError), result.output
    text = str(result.exception)
    assert "\n" not in text
    return text


def test_ablate_then_resume_with_more_variants_from_outdir_alone(app: typer.Typer, tmp_path: Path) -> None:
    out = tmp_path / "ablation"
    first = invoke(
        app, "--lm", "fake/random", "--limit", "3", "--variants", "official-per-policy,dspy-per-rule",
        "--out", str(out), *FAST,
    )  # fmt: skip
    assert first.exit_code == 0, first.output
    assert "baseline official-per-policy" in first.output and "Wall time" in first.output
    assert f"Report written to {out / 'report.html'}" in first.output
    assert {p.name for p in out.iterdir()} == {"plan.json", "results", "summary.json", "report.html"}

    again = invoke(app, "--lm", "fake/random", "--limit", "3", "--out", str(out), *FAST)
    assert "already holds an ablation" in config_error(again)

    resumed = invoke(
        app, "--out", str(out), "--resume", "--variants", "official-per-policy,dspy-per-rule,dspy-cot-per-policy",
        "-q",
    )  # fmt: skip
    assert resumed.exit_code == 0, resumed.output
    assert resumed.output.count("not run again") == 2 and "3 unit(s) sent" in resumed.output
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert [v["label"] for v in summary["variants"]][-1] == "dspy-cot-per-policy"
    assert summary["n_cases"] == 3 and summary["n_boot"] == 20

    changed = invoke(app, "--out", str(out), "--resume", "--temperature", "0.5", "-q")
    assert "lm.temperature" in config_error(changed)


def test_plan_file_with_flags_overriding_it(app: typer.Typer, tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(
        "lm: fake/oracle\nvariants: [official-per-policy, official-per-rule-prefix]\n"
        "data: {level: L1, limit: 5}\nn_boot: 0\nrun_id: planned\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    result = invoke(app, "--plan", str(plan_file), "--limit", "2", "--out", str(out), "--no-cache", "-q")
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert saved["data"]["level"] == "L1" and saved["data"]["limit"] == 2
    assert saved["lm"]["model"] == "fake/oracle" and saved["lm"]["cache"] is False
    assert saved["run_id"] == "planned" and saved["n_boot"] == 0
    assert "not the official per-rule protocol" in result.output
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["cases_per_cell"]["L1"] == 2 and summary["cases_per_cell"]["L0"] == 0
    results = sorted(p.name for p in (out / "results").glob("*.jsonl"))
    assert results == [
        "per_rule_planned-official-per-rule-prefix_oracle.jsonl",
        "results_planned-official-per-policy_oracle.jsonl",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lm", "fake", "--variants", "official-per-policy,nope"], "unknown variant 'nope'"),
        (["--variants", "official-per-policy"], "no model; pass --lm MODEL"),
        (
            ["--lm", "fake", "--variants", "dspy-per-rule", "--baseline", "x"],
            "--baseline: 'x' is not a variant",
        ),
    ],
)
def test_bad_invocations_are_one_line_errors_and_write_nothing(
    app: typer.Typer, tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "out"
    result = invoke(app, *args, "--out", str(out), "-q")
    assert message in config_error(result)
    assert not out.exists()


def test_a_second_resume_while_the_ablation_runs_is_refused_and_changes_nothing(
    app: typer.Typer, tmp_path: Path
) -> None:
    out = tmp_path / "ablation"
    first = invoke(
        app,
        "--lm",
        "fake/random",
        "--limit",
        "2",
        "--variants",
        "official-per-policy",
        "--out",
        str(out),
        *FAST,
    )
    assert first.exit_code == 0, first.output
    plan = (out / "plan.json").read_bytes()
    with ablation_lock(out):  # what a running ablation holds until it ends
        second = invoke(
            app, "--out", str(out), "--resume", "--variants", "official-per-policy,dspy-per-rule", "-q"
        )
    message = config_error(second)
    assert message.startswith(f"the ablation in {out} is being written by process ") and "--resume" in message
    assert (out / "plan.json").read_bytes() == plan
    assert not (out / "ablate.lock").exists()
