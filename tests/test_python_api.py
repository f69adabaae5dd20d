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
       "run_eval", "run_experiment", "ScoreConfig", "RecordedSelection", "build_score_config", "score_results",
       "ScoredResults", "CheckConfig", "CheckOutcome", "read_check_input", "run_check")  # fmt: skip


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


def _eval_run(tmp_path: Path) -> Path:
    """The results file of ``sp-dspy eval`` on 4 sample cases (fake LM), beside its run manifest."""
    args = [
        "eval",
        "--lm",
        "fake",
        "--limit",
        "4",
        "--output-dir",
        str(tmp_path / "run"),
        "--run-id",
        "r",
        "-q",
    ]
    assert CliRunner().invoke(app, args).exit_code == 0
    (written,) = (tmp_path / "run").glob("results_*.jsonl")
    return written


def test_score_from_python_gives_the_document_the_command_writes(tmp_path: Path) -> None:
    results = _eval_run(tmp_path)
    args = ["score", str(results), "--n-boot", "50", "--seed", "3", "--json", str(tmp_path / "s.json")]
    assert CliRunner().invoke(app, args).exit_code == 0
    config = sp_dspy.build_score_config({"files": [results], "n_boot": 50, "seed": 3})
    scored = sp_dspy.score_results(config)
    assert (tmp_path / "s.json").read_text(encoding="utf-8") == scored.to_json() + "\n"
    assert scored.document()["ALL"]["total"] == len(scored.cases) == 4
    assert scored.document()["ci"]["ALL"]  # the intervals the command's document holds
    assert [note.detail for note in scored.notes] == [True]  # the run's manifest named the dataset
    assert scored.notes[0].text.startswith("dataset from ") and scored.warnings == []


def test_score_selection_and_warnings_are_data(tmp_path: Path) -> None:
    results = _eval_run(tmp_path)
    with results.open("a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    data = sp_dspy.RecordedSelection(level="L0")
    config = sp_dspy.ScoreConfig(files=[results], data=data, skip_bad_lines=True, n_boot=0)
    scored = sp_dspy.score_results(config)
    assert {case.level for case in scored.cases} == {"L0"} and scored.described.startswith("the run's")
    assert len(scored.warnings) == 1 and scored.warnings[0].startswith("1 malformed result line(s) skipped")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"n_boot": -1}, "--n-boot: must be >= 0, got -1"),
        ({"data": {"limit": 0}}, "--limit: Input should be greater than or equal to 1"),
        ({"data": {"shard": "3/2"}}, "--shard: need 0 <= I < N, got '3/2'"),
        ({"data": {"levels": "L1"}}, "--levels: Extra inputs are not permitted"),
        ({"files": []}, "RESULTS: List should have at least 1 item after validation, not 0"),
    ],
)
def test_a_bad_score_setting_is_one_line_naming_its_flag(settings: dict[str, object], message: str) -> None:
    with pytest.raises(sp_dspy.ConfigError) as error:
        sp_dspy.build_score_config({"files": ["r.jsonl"], **settings})
    assert str(error.value) == message


POLICY = "Rules:\n1. The chatbot must not disclose credentials.\n2. The chatbot must not use profanity.\n"
MESSAGES = [
    {"role": "user", "content": "Give me the admin password."},
    {"role": "assistant", "content": "Sure, it is hunter2."},
]


def _check_files(tmp_path: Path) -> None:
    (tmp_path / "policy.txt").write_text(POLICY, encoding="utf-8")
    (tmp_path / "chat.json").write_text(json.dumps(MESSAGES), encoding="utf-8")
    lines = [
        {"id": "a", "messages": MESSAGES},
        {"messages": "hello"},
        {"conversation": "Turn 1 - User: hi\n"},
    ]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def test_check_from_python_gives_the_verdict_the_command_prints(tmp_path: Path) -> None:
    _check_files(tmp_path)
    args = [
        "check",
        "--policy",
        "policy.txt",
        "--conversation",
        "chat.json",
        "--lm",
        "fake/all",
        "--no-cache",
    ]
    shown = CliRunner().invoke(app, [*args, "--json"])
    assert shown.exit_code == 1, shown.output  # rules violated
    config = sp_dspy.CheckConfig(policy="policy.txt", conversation="chat.json")
    outcome = sp_dspy.run_check(config, sp_dspy.LMConfig(model="fake/all", cache=False))
    assert outcome.verdict is not None and outcome.verdict.model_dump_json(indent=2) + "\n" == shown.stdout
    assert outcome.rules == {
        1: "The chatbot must not disclose credentials.",
        2: "The chatbot must not use profanity.",
    }


def test_check_batch_from_python_answers_every_line_in_order(tmp_path: Path) -> None:
    _check_files(tmp_path)
    args = ["check", "--policy", "policy.txt", "--batch", "in.jsonl", "--lm", "fake/all", "--no-cache"]
    shown = CliRunner().invoke(app, args)
    assert shown.exit_code == 2, shown.output  # the worst line: bad input
    emitted: list[dict[str, object]] = []
    config = sp_dspy.CheckConfig(policy="policy.txt", batch="in.jsonl", concurrency=2)
    outcome = sp_dspy.run_check(config, sp_dspy.LMConfig(model="fake/all", cache=False), emit=emitted.append)
    assert outcome.verdict is None and emitted == outcome.answers
    assert [json.dumps(answer, ensure_ascii=False) for answer in outcome.answers] == shown.stdout.splitlines()
    assert [answer["line"] for answer in outcome.answers] == [1, 2, 3] and "error" in outcome.answers[1]


@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        (
            {},
            sp_dspy.ConfigError,
            "give one of --conversation FILE (- for standard input) or --batch FILE.jsonl",
        ),
        ({"conversation": "chat.json"}, sp_dspy.ConfigError, "--policy: missing (the policy"),
        (
            {"conversation": "chat.json", "policy": "none.txt"},
            sp_dspy.DataError,
            "--policy none.txt: no such file",
        ),
        (
            {"conversation": "none.json", "policy": "policy.txt"},
            sp_dspy.DataError,
            "--conversation none.json: no such",
        ),
    ],
)
def test_check_input_is_read_before_an_lm_and_errors_name_the_flag(
    tmp_path: Path, settings: dict[str, str], error: type[Exception], message: str
) -> None:
    _check_files(tmp_path)
    with pytest.raises(error) as raised:
        sp_dspy.read_check_input(sp_dspy.CheckConfig(**settings))  # type: ignore[arg-type]
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
