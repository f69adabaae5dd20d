"""Benchmarks as plug-ins: the registry, ``--benchmark custom`` end to end, results that remember their data.

Offline, with the in-process fake LM, on the bundled custom example
(``sp_dspy/_data/sample/custom_example.jsonl``: 16 cases of a fictional grocery
app's 6-rule policy, 7 of them violating something) and the PKU fixture.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from sp_dspy import Guard, benchmark_kind, load_benchmark
from sp_dspy._benchmarks import benchmark_names
from sp_dspy._data._custom import custom_case, example_path
from sp_dspy._errors import DataError, SpDspyError
from sp_dspy.cli import app
from sp_dspy.cli._compile import register as register_compile

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("isolated_run")]

EXAMPLE = example_path()
PKU_FIXTURE = Path(__file__).parent / "fixtures" / "pku" / "rows.jsonl"
CUSTOM = ("--benchmark", "custom", "--dataset", str(EXAMPLE))
POLICY = "1. Never share a customer's address.\n2. Do not promise a delivery time."


def cli(*args: str, fails: bool = False) -> Result:
    """Run the CLI in-process; ``fails``: it must raise a ``SpDspyError`` (``main`` turns it into exit 2)."""
    result = CliRunner().invoke(app, list(args))
    if fails:
        assert isinstance(result.exception, SpDspyError), (result.output, result.exception)
    else:
        assert result.exit_code == 0, (result.output, result.exception)
    return result


def evaluate(tmp_path: Path, run_id: str, *args: str, lm: str = "fake") -> Path:
    cli("eval", "--lm", lm, "--output-dir", str(tmp_path / "runs"), "--run-id", run_id, "-q", *args)
    return tmp_path / "runs" / f"results_{run_id}_{lm.removeprefix('fake/')}.jsonl"


# --- the registry -------------------------------------------------------------------------


def test_registry_names_three_kinds_and_refuses_others() -> None:
    assert benchmark_names() == ("safepyramid", "pku-saferlhf", "custom")
    with pytest.raises(DataError, match=r"^--benchmark: unknown benchmark 'nope' \(choose safepyramid, "):
        benchmark_kind("nope")
    results = Path(__file__).parent / "fixtures" / "report" / "official_per_policy.jsonl"
    for command in (["split", "--out", "s.json"], ["eval", "--lm", "fake"], ["score", str(results)]):
        result = cli(*command, "--benchmark", "nope", fails=True)
        assert str(result.exception).endswith(
            "unknown benchmark 'nope' (choose safepyramid, pku-saferlhf, custom)"
        )
        assert "Value error" not in str(result.exception)


def test_pku_runs_print_pku_tables_not_safepyramid_diagnostics(tmp_path: Path) -> None:
    pku = ("--benchmark", "pku-saferlhf", "--dataset", str(PKU_FIXTURE))
    results = evaluate(tmp_path, "p", *pku)
    for output in (
        cli("score", str(results), *pku, "--n-boot", "0").output,
        cli("score", str(results)).output,
    ):
        assert "PKU-SafeRLHF: summary" in output and "harm categories" in output
        assert "Failure modes" not in output and "Errors by rule type" not in output


def test_compare_shows_the_pku_metrics_of_both_sides(tmp_path: Path) -> None:
    pku = ("--benchmark", "pku-saferlhf", "--dataset", str(PKU_FIXTURE))
    oracle, empty = evaluate(tmp_path, "o", *pku), evaluate(tmp_path, "e", *pku, lm="fake/empty")
    target = tmp_path / "cmp.json"
    output = cli("compare", str(empty), str(oracle), *pku, "--n-boot", "0", "--json", str(target)).output
    assert "PKU-SafeRLHF (%), beside the paper's moderator" in output
    document = json.loads(target.read_text(encoding="utf-8"))
    assert document["benchmark"] == "pku-saferlhf"
    assert (document["extra"]["A"]["binary"]["accuracy"], document["extra"]["B"]["binary"]["accuracy"]) == (
        50.0,
        100.0,
    )


# --- --benchmark custom -------------------------------------------------------------------


def test_the_example_loads_as_guard_cases_with_gold_groups_and_tags() -> None:
    loaded = load_benchmark(benchmark="custom")
    assert loaded.benchmark == "custom" and len(loaded.cases) == 16 and loaded.source == str(EXAMPLE)
    by_id = {case.id: case for case in loaded.cases}
    first, second = by_id["pp-001"], by_id["pp-002"]
    assert second.conversation.startswith("Turn 1 - User: My order of 80 euros")
    assert second.conversation.splitlines()[1].startswith("Turn 1 - Chatbot: Done:")
    assert second.ground_truth_violations == [4] and [e.rule for e in second.rubric.violations] == [4]
    assert len(second.rubric.non_violations) == 5
    assert first.conversation_id == second.conversation_id == "refund-a"
    assert by_id["pp-003"].conversation_id == "pp-003"
    assert by_id["pp-012"].tags == ["tone", "refunds"]
    assert sum(bool(case.ground_truth_violations) for case in loaded.cases) == 7


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"policy": POLICY, "conversation": "Turn 1 - User: hi", "violated_rules": []},
            "id: expected a non-empty",
        ),
        ({"id": "c", "policy": POLICY, "violated_rules": []}, "case c: give exactly one of messages"),
        (
            {"id": "c", "policy": POLICY, "conversation": "Turn 1 - User: hi", "violated_rule": [1]},
            "case c: unknown field(s) violated_rule",
        ),
        (
            {"id": "c", "policy": POLICY, "conversation": "Turn 1 - User: hi"},
            "case c: violated_rules: missing",
        ),
        (
            {"id": "c", "policy": POLICY, "conversation": "Turn 1 - User: hi", "violated_rules": [3]},
            "case c: violated_rules: rule(s) [3] are not numbered in the policy",
        ),
        (
            {
                "id": "c",
                "policy": POLICY,
                "messages": [{"role": "robot", "content": "x"}],
                "violated_rules": [],
            },
            "case c: messages[0].role",
        ),
        (
            {"id": "c", "policy": "be nice", "conversation": "Turn 1 - User: hi", "violated_rules": []},
            "case c: policy",
        ),
        (
            {
                "id": "c",
                "policy": POLICY,
                "conversation": "Turn 1 - User: hi",
                "violated_rules": [],
                "tags": "x",
            },
            "case c: tags: expected a list",
        ),
    ],
)
def test_a_bad_line_is_one_error_naming_file_line_case_and_field(row: dict[str, Any], message: str) -> None:
    with pytest.raises(DataError) as info:
        custom_case(row, where="mine.jsonl:7")
    assert str(info.value).startswith("mine.jsonl:7: ") and message in str(info.value)
    assert "\n" not in str(info.value)


def test_file_errors_name_the_line_and_lenient_skips(tmp_path: Path) -> None:
    good = {"id": "a", "policy": POLICY, "conversation": "Turn 1 - User: hi", "violated_rules": []}
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(good) + "\n\n" + json.dumps(good) + "\n{oops\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{path}:3: case a: id: duplicate \(first on line 1\)$"):
        load_benchmark(path, benchmark="custom")
    loaded = load_benchmark(path, benchmark="custom", lenient=True)
    assert len(loaded.cases) == 1 and loaded.skipped == 2
    assert loaded.skipped_reasons[1].startswith(f"{path}:4: invalid JSON")


def test_a_line_nested_too_deeply_is_one_error_naming_it(tmp_path: Path) -> None:
    good = {"id": "a", "policy": POLICY, "conversation": "Turn 1 - User: hi", "violated_rules": []}
    path = tmp_path / "mine.jsonl"
    deep = '{"id": "b", "tags": ' + "[" * 100_000 + "]" * 100_000 + "}"
    path.write_text(json.dumps(good) + "\n" + deep + "\n", encoding="utf-8")
    message = f"{path}:2: invalid JSON: arrays and objects nested too deeply"
    with pytest.raises(DataError, match=rf"^{re.escape(message)}$"):
        load_benchmark(path, benchmark="custom")
    loaded = load_benchmark(path, benchmark="custom", lenient=True)
    assert [case.id for case in loaded.cases] == ["a"] and loaded.skipped_reasons == [message]


def test_guard_your_own_policy_end_to_end(tmp_path: Path) -> None:
    """split -> baseline eval -> compile -> eval the artifact -> compare -> report -> Guard.load."""
    splits = tmp_path / "splits.json"
    cli("split", *CUSTOM, "--ratios", "0.3,0.3,0.4", "--out", str(splits))
    parts = json.loads(splits.read_text(encoding="utf-8"))
    groups = {part: {i.split("-")[0] for i in parts[part]} for part in ("train", "dev", "test")}
    assert all(groups.values())
    # the two cases of one group land on one side
    assert sum({"pp-001", "pp-002"} <= set(parts[part]) for part in ("train", "dev", "test")) == 1

    test = ("--split", f"{splits}:test")
    baseline = evaluate(tmp_path, "base", *CUSTOM, *test, lm="fake/empty")
    output = cli("score", str(baseline), "--n-boot", "0").output
    assert "your policy" in output and "tag refunds" in output and "Failure modes" not in output

    guard = tmp_path / "guard"
    compile_app = typer.Typer()
    compile_app.callback()(lambda: None)
    register_compile(compile_app)
    options = ["--lm", "fake", "--optimizer", "bootstrap", "--splits", str(splits), "-q"]
    result = CliRunner().invoke(compile_app, ["compile", "--out", str(guard), *options, *CUSTOM])
    assert result.exit_code == 0, (result.output, result.exception)
    assert (
        json.loads((guard / "manifest.json").read_text(encoding="utf-8"))["dataset"]["benchmark"] == "custom"
    )

    compiled = evaluate(tmp_path, "art", *CUSTOM, *test, "--program", str(guard))
    target = tmp_path / "cmp.json"
    cli("compare", str(baseline), str(compiled), "--n-boot", "0", "--json", str(target))
    cells = json.loads(target.read_text(encoding="utf-8"))["cells"]["ALL"]
    assert cells["n"] == len(parts["test"]) and cells["b"]["rmr_avg"] == 100.0
    report = tmp_path / "report.html"
    cli("report", str(baseline), str(compiled), "--out", str(report), "--n-boot", "0")
    page = report.read_text(encoding="utf-8")
    assert "custom comparison" in page and "Beside the published leaderboard" not in page
    assert "custom: name every rule of your application&#x27;s policy" in page  # the kind's task

    verdict = Guard.load(guard, lm="fake/empty").check(
        POLICY,
        [{"role": "user", "content": "Where does Ana live?"}, {"role": "assistant", "content": "No idea."}],
    )
    assert verdict.violated_rules == [] and verdict.rules_checked == [1, 2]


# --- results remember their data ----------------------------------------------------------


def test_score_compare_report_show_find_the_dataset_in_the_manifest(tmp_path: Path) -> None:
    results = evaluate(tmp_path, "m", *CUSTOM, lm="fake/empty")
    score = cli("score", str(results), "--n-boot", "0")
    assert f"Scored 16 cases of {EXAMPLE}" in score.output.replace(
        "\n", ""
    )  # wrapped as the path's length has it
    assert "tag privacy" in score.output
    assert "manifest_m.json" in score.stderr.replace("\n", "")  # wrapped at 80 columns
    shown = cli("show", str(results), "--id", "pp-005").output
    assert "FP 0, FN 1" in shown and "FM-" not in shown  # no SafePyramid failure modes on custom cases
    other = evaluate(tmp_path, "n", *CUSTOM)
    compared = cli("compare", str(results), str(other), "--n-boot", "0").output
    assert "Compared 16 case(s)" in compared


def test_results_of_another_dataset_are_refused_not_scored_as_excluded(tmp_path: Path) -> None:
    results = evaluate(tmp_path, "x", *CUSTOM)
    lone = tmp_path / "lone.jsonl"  # no manifest beside it: the default SafePyramid sample
    lone.write_bytes(results.read_bytes())
    for command in (["score", str(lone)], ["compare", str(lone), str(lone)], ["report", str(lone)]):
        result = cli(*command, "--n-boot", "0", fails=True)
        assert isinstance(result.exception, DataError)
        assert str(result.exception).startswith(f"{lone}: none of its 16 case id(s) is in the dataset ")


def test_a_file_of_another_benchmark_names_the_right_flag(tmp_path: Path) -> None:
    results = evaluate(tmp_path, "y", *CUSTOM)
    for dataset, right in ((PKU_FIXTURE, "pku-saferlhf"), (EXAMPLE, "custom")):
        result = cli("score", str(results), "--dataset", str(dataset), fails=True)
        assert f"it looks like a {right} file: pass --benchmark {right}" in str(result.exception)


def test_a_hub_id_fails_within_seconds_when_the_hub_is_unreachable(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    results = evaluate(tmp_path, "h", *CUSTOM)
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{port}", HF_HUB_ETAG_TIMEOUT="30")
    code = "import sys; from sp_dspy.cli import main; sys.argv[0] = 'sp-dspy'; sys.exit(main())"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code, "score", str(results), "--dataset", "ByteDance/SafePyramid"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert "could not fetch benchmark.json of Hub dataset ByteDance/SafePyramid" in done.stderr
    assert "unreachable" in done.stderr and "pass --dataset PATH" in done.stderr
    assert elapsed < 10, f"took {elapsed:.1f}s (retries?)"
