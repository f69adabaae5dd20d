"""The ``eval`` command ``compile`` prints (and ``prompt.md``'s "Run it") runs as printed, on every
benchmark, from another directory; a split of other data names the flags that select its data."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sp_dspy._data._source import sample_path
from sp_dspy.cli import _compile, _eval
from tests._factories import command_app

PKU_ROWS = Path(__file__).parent / "fixtures" / "pku" / "rows.jsonl"
TINY = ["--optimizer", "copro", "--set", "breadth=2", "--set", "depth=1", "--set", "num_threads=2"]


def app() -> typer.Typer:
    def both(root: typer.Typer) -> None:
        _compile.register(root)
        _eval.register(root)

    return command_app(both)


def dataset_for(benchmark: str, folder: Path) -> list[str]:
    """The ``--dataset`` flags of each benchmark's data, copied to ``folder`` (relative to it)."""
    if benchmark == "safepyramid":
        return []  # the bundled sample, the default data
    source = PKU_ROWS if benchmark == "pku-saferlhf" else sample_path("custom_example.jsonl")
    shutil.copy(source, folder / source.name)
    return ["--dataset", source.name]


@pytest.mark.parametrize("benchmark", ["safepyramid", "pku-saferlhf", "custom"])
def test_the_printed_eval_command_runs_as_printed(
    benchmark: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    data = dataset_for(benchmark, work)
    compiled = CliRunner().invoke(
        app(),
        ["compile", "--lm", "fake/instructed", "--benchmark", benchmark, *data, "--out", "art",
         "--ratios", "0.25,0.25,0.5", *TINY, "-q"],
        env={"COLUMNS": "400"},
    )  # fmt: skip
    assert compiled.exit_code == 0, (compiled.output, compiled.exception)
    line = next(line for line in compiled.output.splitlines() if line.startswith("score on test: "))
    command = line.removeprefix("score on test: ")
    prompt = (work / "art" / "prompt.md").read_text(encoding="utf-8")
    assert f"Run it: `{command}`" in prompt
    assert f"--benchmark {benchmark}" in command
    words = shlex.split(command)
    assert words[:2] == ["sp-dspy", "eval"]

    elsewhere = tmp_path / "elsewhere"  # the command names absolute paths: it runs from anywhere
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    evaluated = CliRunner().invoke(
        app(), [*words[1:], "--output-dir", str(elsewhere / "runs"), "-q"], env={"COLUMNS": "400"}
    )
    assert evaluated.exit_code == 0, (command, evaluated.output, evaluated.exception)
    split = json.loads((work / "art" / "splits.json").read_text(encoding="utf-8"))
    (manifest,) = (elsewhere / "runs").rglob("manifest_*.json")
    run = json.loads(manifest.read_text(encoding="utf-8"))
    assert split["benchmark"] == run["dataset"]["benchmark"] == benchmark, run


def test_a_split_of_other_data_names_the_flags_that_select_its_data(tmp_path: Path) -> None:
    shutil.copy(PKU_ROWS, tmp_path / "rows.jsonl")
    runner = CliRunner()
    split = tmp_path / "pku-split.json"
    from sp_dspy.cli import _split

    made = runner.invoke(
        command_app(_split.register),
        ["split", "--benchmark", "pku-saferlhf", "--dataset", str(tmp_path / "rows.jsonl"),
         "--ratios", "0.25,0.25,0.5", "--out", str(split)],
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    refused = runner.invoke(app(), ["eval", "--lm", "fake", "-q", "--split", f"{split}:test"])
    message = str(refused.exception)
    assert refused.exit_code != 0 and "\n" not in message
    assert f"the split was made on --benchmark pku-saferlhf --dataset {tmp_path / 'rows.jsonl'}" in message
    assert "make one with sp-dspy split" not in message
