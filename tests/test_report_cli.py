"""``sp-dspy report``: argument grammar, outputs, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sp_dspy._errors import ConfigError, DataError
from sp_dspy.cli._report import parse_results, register
from tests._factories import command_app

FIXTURES = Path(__file__).parent / "fixtures" / "report"
POLICY = FIXTURES / "official_per_policy.jsonl"
RULE = FIXTURES / "official_per_rule.jsonl"
BYO = FIXTURES / "byo_predictions.jsonl"


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    return command_app(register)


def test_report_writes_html_and_json(app: typer.Typer, tmp_path: Path) -> None:
    out, summary = tmp_path / "report.html", tmp_path / "summary.json"
    args = ["report", str(POLICY), f"grouped={RULE}", str(BYO), "--label", "mine", "--label", "byo"]
    args += ["--out", str(out), "--json", str(summary), "--n-boot", "50", "--baseline", "grouped"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "baseline grouped" in result.output and "Report written to" in result.output
    document = json.loads(summary.read_text(encoding="utf-8"))
    assert [v["label"] for v in document["variants"]] == ["mine", "grouped", "byo"]
    assert document["baseline"] == "grouped" and document["n_boot"] == 50
    assert document["dataset"].endswith("safepyramid_sample.json") and len(document["content_hash"]) == 64
    assert out.read_text(encoding="utf-8").count("data:image/png;base64,") == 6


def test_group_several_files_into_one_variant(tmp_path: Path) -> None:
    retry = tmp_path / "a=b.jsonl"  # an existing path wins over LABEL=
    retry.write_text('{"id": "frau-103-l1", "violated_rules": [4]}\n', encoding="utf-8")
    variants = parse_results([f"run={POLICY},{retry}", str(retry)], [])
    assert variants == [("run", [POLICY, retry]), (None, [retry])]
    assert parse_results([str(BYO), f"x={RULE}"], ["y"]) == [("y", [BYO]), ("x", [RULE])]


@pytest.mark.parametrize(
    ("arguments", "labels", "message"),
    [
        (["missing.jsonl"], [], "RESULTS: no such file: missing.jsonl"),
        ([f"x={POLICY},missing.jsonl"], [], "RESULTS x=...: no such file: missing.jsonl"),
        ([f"={POLICY}"], [], "label before '=' is empty"),
        (["x="], [], "no files after '='"),
        ([str(POLICY), str(BYO)], ["only-one"], "--label: 1 label(s) for 2"),
    ],
)
def test_bad_arguments_are_config_errors(arguments: list[str], labels: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_results(arguments, labels)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_command_errors_propagate_as_sp_dspy_errors(app: typer.Typer, tmp_path: Path) -> None:
    runner = CliRunner()
    bad_baseline = runner.invoke(
        app, ["report", str(BYO), "--baseline", "nope", "--out", str(tmp_path / "r.html")]
    )
    assert isinstance(bad_baseline.exception, ConfigError)
    mixed = runner.invoke(app, ["report", f"mix={BYO},{RULE}", "--out", str(tmp_path / "r.html")])
    assert isinstance(mixed.exception, DataError) and "mixes" in str(mixed.exception)
    assert not (tmp_path / "r.html").exists()


def test_reports_what_sp_dspy_eval_writes(tmp_path: Path) -> None:
    """The runner's real records and manifest (fake LM, bundled sample) feed the summary."""
    from sp_dspy._benchmarks import load_benchmark
    from sp_dspy._report import build_summary
    from sp_dspy.cli import app as real_app

    run = [
        "eval",
        "--lm",
        "fake",
        "--program",
        "official",
        "--output-dir",
        str(tmp_path),
        "--run-id",
        "r1",
        "-q",
    ]
    done = CliRunner().invoke(real_app, run)
    assert done.exit_code == 0, done.output
    results = next(tmp_path.glob("results_r1_*.jsonl"))
    loaded = load_benchmark(None)
    summary = build_summary(loaded.cases, [(None, [results])], n_boot=0, content_hash=loaded.content_hash)
    variant = summary.variants[0]
    assert variant.variant == "official-per-policy" and variant.wall_s is not None
    assert variant.settings["parser"] == "strict" and variant.cells["ALL"].lm_calls_per_case == 1.0
    assert variant.dataset_hashes == [loaded.content_hash]
    notes = "\n".join(summary.notes)
    assert "scripted fake LM" in notes and "another dataset" not in notes


@pytest.mark.parametrize(
    ("flags", "cases"),
    [(["--level", "L1"], 8), (["--domain", "fraud"], 3), (["--level", "L1", "--limit", "5"], 5)],
)
def test_report_and_view_select_cases_with_the_flags_score_takes(
    app: typer.Typer, tmp_path: Path, flags: list[str], cases: int
) -> None:
    """``--level`` and ``--domain`` narrow the runs' cases as in ``score`` (a file without a manifest:
    every case of the bundled sample, 8 a level, 3 a domain)."""
    from sp_dspy.cli._view import register as register_view

    summary = tmp_path / "summary.json"
    args = [
        "report",
        str(POLICY),
        *flags,
        "--n-boot",
        "0",
        "--out",
        str(tmp_path / "r.html"),
        "--json",
        str(summary),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(summary.read_text(encoding="utf-8"))["n_cases"] == cases
    view = ["view", str(POLICY), *flags, "--n-boot", "0", "--out", str(tmp_path / "v.html")]
    shown = CliRunner().invoke(command_app(register_view), view)
    assert shown.exit_code == 0, shown.output
    assert f"Cases view of {cases} case(s)" in shown.stdout
