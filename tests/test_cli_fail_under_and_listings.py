"""``--fail-under`` on score and eval (exit 4 when a threshold is not met), ``runs``, ``list-programs``
and ``list-benchmarks``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from sp_dspy._benchmarks import load_benchmark
from sp_dspy._data._source import sample_path
from sp_dspy._metrics import read_result_files, score
from sp_dspy._metrics._gate import EXIT_BELOW_THRESHOLD, parse_threshold, unmet
from sp_dspy.cli import app

RUN = Path(__file__).parent / "fixtures" / "report" / "official_per_policy.jsonl"


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(arg) for arg in args], env={"COLUMNS": "200"})


def test_the_thresholds_of_the_recorded_run() -> None:
    report = score(load_benchmark(None).cases, read_result_files([RUN]), ci=False)
    cells = report.cells
    rmr, rdr = cells["ALL"]["rmr_avg"], cells["ALL"]["rdr"]
    assert unmet(report, [parse_threshold(f"rmr={rmr}"), parse_threshold(f"rdr={rdr}")]) == []
    below = unmet(report, [parse_threshold(f"rmr={rmr + 0.01}"), parse_threshold(f"rdr={rdr - 0.01}")])
    assert below == [f"rmr >= {rmr + 0.01:g}: it is {rmr:.2f}", f"rdr <= {rdr - 0.01:g}: it is {rdr:.2f}"]
    level = cells["L2"]["rmr_exact"]
    assert unmet(report, [parse_threshold(f"rmr_exact:L2={level + 1}")]) == [
        f"rmr_exact:L2 >= {level + 1:g}: it is {level:.2f}"
    ]


@pytest.mark.parametrize(
    ("flag", "words"),
    [
        ("rmr", "expected METRIC=VALUE"),
        ("f1=3", "METRIC one of rmr, rmr_exact, rdr"),
        ("rmr=high", "a number from 0 to 100"),
        ("rmr=120", "a number from 0 to 100"),
        ("rmr:L7=50", "no cell 'L7' (cells: L0, L1, L2, ALL)"),
    ],
)
def test_a_bad_threshold_is_one_line_before_any_work(flag: str, words: str) -> None:
    result = invoke("score", RUN, "--fail-under", flag)
    message = str(result.exception)
    assert result.exit_code not in (0, EXIT_BELOW_THRESHOLD) and "\n" not in message and words in message
    assert "Scored" not in result.stdout


def test_score_exits_4_when_a_threshold_is_not_met_and_0_when_all_are() -> None:
    met = invoke("score", RUN, "--n-boot", "0", "--fail-under", "rmr=10", "--fail-under", "rdr=90")
    assert met.exit_code == 0, met.output
    assert "fail-under: met (rmr >= 10, rdr <= 90)" in met.stderr
    missed = invoke("score", RUN, "--n-boot", "0", "--fail-under", "rmr=99", "--fail-under", "rdr=90")
    assert missed.exit_code == EXIT_BELOW_THRESHOLD == 4, missed.output
    assert (
        "fail-under: rmr >= 99: it is" in missed.stderr
        and "rdr" not in missed.stderr.split("fail-under:")[-1]
    )
    assert "Scored 24 cases" in missed.stdout  # the score is printed before the verdict


def test_score_json_says_what_its_intervals_resampled(tmp_path: Path) -> None:
    out = tmp_path / "score.json"
    assert invoke("score", RUN, "--n-boot", "20", "--json", out).exit_code == 0
    assert json.loads(out.read_text(encoding="utf-8"))["bootstrap"]["unit"] == "conversation"


def test_eval_exits_4_when_the_run_finished_below_the_threshold(tmp_path: Path) -> None:
    args = ["--limit", "3", "-q", "--output-dir", tmp_path, "--fail-under", "rmr=90"]
    below = invoke("eval", "--lm", "fake/empty", *args)  # answers no rule: misses every violation
    assert below.exit_code == EXIT_BELOW_THRESHOLD, below.output
    assert "fail-under: rmr >= 90: it is" in below.stderr
    met = invoke("eval", "--lm", "fake", *args)  # the gold answer
    assert met.exit_code == 0, met.output
    assert "fail-under: met (rmr >= 90)" in met.stderr


def test_runs_lists_each_run_newest_first_and_as_json(tmp_path: Path) -> None:
    for run_id in ("run-a", "run-b"):
        done = invoke(
            "eval", "--lm", "fake", "--limit", "3", "-q", "--output-dir", tmp_path, "--run-id", run_id
        )
        assert done.exit_code == 0, done.output
    listed = json.loads(invoke("runs", tmp_path, "--json").stdout)
    assert [row["run_id"] for row in listed] == ["run-b", "run-a"]
    first = listed[0]
    assert (first["benchmark"], first["protocol"], first["program"], first["status"], first["cases"]) == (
        "safepyramid", "per-policy", "official", "complete", 3,
    )  # fmt: skip
    recorded = json.loads((tmp_path / "manifest_run-b.json").read_text(encoding="utf-8"))
    assert first["rmr"] == next(iter(recorded["runs"].values()))["metrics"]["ALL"]["rmr_avg"]
    table = invoke("runs", tmp_path)
    assert table.exit_code == 0 and table.stdout.index("run-b") < table.stdout.index("run-a")
    for item in ("benchmark safepyramid", "protocol per-policy", "program official", "status complete",
                 "cases 3", "RMR@1.0 100.00", "cost unpriced"):  # fmt: skip
        assert item in table.stdout, table.stdout
    missing = invoke("runs", tmp_path / "nope")
    assert missing.exit_code != 0 and "no such directory" in str(missing.exception)


def test_list_programs_and_list_benchmarks_name_every_choice() -> None:
    programs = invoke("list-programs")
    assert programs.exit_code == 0
    from sp_dspy.programs import PROGRAM_NAMES

    assert len(PROGRAM_NAMES) == 10
    for name in PROGRAM_NAMES:
        assert name in programs.stdout.split()
    benchmarks = invoke("list-benchmarks")
    assert benchmarks.exit_code == 0
    for name, unit in (("safepyramid", "conversation"), ("pku-saferlhf", "prompt"), ("custom", "group")):
        assert name in benchmarks.stdout and unit in benchmarks.stdout
    assert sample_path().exists()
