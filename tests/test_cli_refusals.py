"""Refusals the commands agree on: each is one line, names the file and what it is, exits non-zero,
and comes before any work (nothing written)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from sp_dspy._data._source import sample_path
from sp_dspy.cli import app

FIXTURES = Path(__file__).parent / "fixtures"
RUN = FIXTURES / "report" / "official_per_policy.jsonl"
PKU_ROWS = FIXTURES / "pku" / "rows.jsonl"
SAMPLE = sample_path()
CUSTOM = sample_path("custom_example.jsonl")


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(arg) for arg in args], env={"COLUMNS": "200"})


def refused(result: Result, *words: str) -> str:
    """The refusal's one line, checked to say ``words``."""
    assert result.exit_code != 0, result.output
    message = str(result.exception)
    assert "\n" not in message, message
    for word in words:
        assert word in message, message
    return message


def foreign_results(folder: Path) -> Path:
    """Results whose ids are in no SafePyramid dataset (a PKU-SafeRLHF run's)."""
    path = folder / "results_pku.jsonl"
    lines = [{"id": f"pku-{n:016x}", "violated_rules": []} for n in range(6)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["report", "view"])
def test_report_and_view_refuse_results_of_another_dataset(command: str, tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    result = invoke(command, RUN, foreign_results(tmp_path), "--out", out, "--n-boot", "0")
    refused(result, "results_pku.jsonl", "none of its 6 case id(s) is in the dataset", "--dataset")
    assert not out.exists()


@pytest.mark.parametrize(
    ("data", "what"), [(SAMPLE, "SafePyramid"), (PKU_ROWS, "PKU-SafeRLHF"), (CUSTOM, "custom")]
)
@pytest.mark.parametrize("command", ["score", "show", "view", "report", "compare"])
def test_a_dataset_given_as_results_is_named_as_one(
    command: str, data: Path, what: str, tmp_path: Path
) -> None:
    args: list[str | Path] = [command, data]
    if command == "compare":
        args = [command, RUN, data]
    elif command in ("view", "report"):
        args += ["--out", tmp_path / "page.html"]
    refused(invoke(*args), f"{data}: is a {what} dataset, not a results file", "--dataset")
    assert not (tmp_path / "page.html").exists()


def test_a_manifest_given_as_results_is_named_as_one(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"program": "dspy", "protocol": "per-policy"}), encoding="utf-8")
    refused(invoke("score", manifest), "is a run manifest, not a results file", "results_*.jsonl")


def test_results_given_as_the_dataset_are_named_as_such(tmp_path: Path) -> None:
    copy = tmp_path / "results.jsonl"
    shutil.copy(RUN, copy)
    refused(invoke("score", RUN, "--dataset", copy), f"{copy}: is a results file, not a SafePyramid dataset")


@pytest.mark.parametrize("command", ["report", "view"])
def test_out_into_a_missing_directory_is_refused_before_any_work(command: str, tmp_path: Path) -> None:
    out = tmp_path / "missing" / "page.html"
    refused(invoke(command, RUN, "--out", out), f"--out {out}: the directory {out.parent} does not exist")


def test_a_mistyped_flag_is_one_error_line_with_the_suggestion(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-c",
        "from sp_dspy.cli import main; main()",
        "score",
        str(RUN),
        "--datset",
        "x",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("error: sp-dspy score: no such option: --datset") and "--dataset" in lines[0]
