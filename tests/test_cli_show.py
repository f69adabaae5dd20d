"""``sp-dspy show``: a run case by case, rule texts and answers intact at 80 columns."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sp_dspy import load_benchmark
from sp_dspy._errors import DataError
from sp_dspy.cli import app
from tests._results import iter_records

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("isolated_run")]

SAMPLE = {case.id: case for case in load_benchmark().cases}


def run_eval(out: Path, lm: str, *args: str) -> Path:
    result = CliRunner().invoke(
        app, ["eval", "--lm", lm, "--output-dir", str(out), "-q", "--no-cache", *args]
    )
    assert result.exit_code == 0, (result.output, result.exception)
    (path,) = [p for p in out.glob("*.jsonl")]
    return path


def show(*args: str) -> Result:
    return CliRunner().invoke(app, ["show", *args], env={"COLUMNS": "80"})


def words(text: str) -> list[str]:
    return re.findall(r"[\w'-]+", text)


def test_every_case_shows_gold_predicted_fp_fn_and_every_rule_text_at_80_columns(tmp_path: Path) -> None:
    results = run_eval(tmp_path, "fake/random", "--limit", "4", "--run-id", "r")
    result = show(str(results))
    assert result.exit_code == 0, (result.output, result.exception)
    out = result.output
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= 80
    seen = " ".join(words(out))
    for record in iter_records(results):
        case = SAMPLE[record["id"]]
        scores = record["scores"]
        assert case.id in out
        assert (
            f"gold {sorted(case.ground_truth_violations)}; predicted {sorted(record['violated_rules'])}"
            in out
        )
        if not scores["exact_match"]:
            assert f"FP {len(scores['fp'])}, FN {len(scores['fn'])}" in out
        texts = {entry.rule: entry.text for entry in case.rubric.entries()}
        for rule in {*scores["fp"], *scores["fn"], *scores["tp"]}:
            assert " ".join(words(texts[rule])) in seen  # every word, in order: nothing cut
        assert " ".join(words(record["analysis"])) in seen
    assert "4 case(s) shown of 4 with results" in out


def test_id_and_failed_select_cases(tmp_path: Path) -> None:
    results = run_eval(tmp_path, "fake/random", "--limit", "6", "--run-id", "r")
    records = list(iter_records(results))
    exact = [r["id"] for r in records if r["scores"]["exact_match"]]
    failed = [r["id"] for r in records if not r["scores"]["exact_match"]]
    one = show(str(results), "--id", records[1]["id"])
    assert one.exit_code == 0 and "1 case(s) shown of 1" in one.output
    assert records[1]["id"] in one.output and records[0]["id"] not in one.output
    only_failed = show(str(results), "--failed")
    assert f"{len(failed)} failed case(s) shown of 6" in only_failed.output
    assert all(cid not in only_failed.output for cid in exact)
    missing = show(str(results), "--id", "nope-1-l0")
    assert isinstance(missing.exception, DataError)
    assert str(missing.exception) == f"--id nope-1-l0: no result for this case in {results}"


def test_an_unreadable_answer_is_shown_raw_per_policy_and_per_rule(tmp_path: Path) -> None:
    from sp_dspy._lm._fake import GARBAGE_TEXT

    policy = run_eval(tmp_path / "p", "fake/garbage", "--limit", "1", "--run-id", "g")
    (record,) = iter_records(policy)
    assert (record["parse_status"], record["answer"]) == ("failed", GARBAGE_TEXT)
    out = show(str(policy)).output
    assert "status failed; excluded" in out
    assert " ".join(words(f"answer: {GARBAGE_TEXT}")) in " ".join(words(out))
    per_rule = run_eval(
        tmp_path / "r", "fake/garbage", "--limit", "1", "--protocol", "per-rule", "--run-id", "g"
    )
    judgments = list(iter_records(per_rule))
    assert {j["answer"] for j in judgments} == {GARBAGE_TEXT}
    out = show(str(per_rule)).output
    assert f"{len(judgments)} judgments ({len(judgments)} failed; {len(judgments)} without a verdict)" in out
    assert "no verdict" in out and f"rule {judgments[0]['rule']}:" in out


def test_a_clean_answer_stores_no_raw_copy(tmp_path: Path) -> None:
    (record,) = iter_records(run_eval(tmp_path, "fake/oracle", "--limit", "1", "--run-id", "o"))
    assert record["parse_status"] == "clean" and "answer" not in record


def test_the_dataset_comes_from_the_manifest_or_the_flag(tmp_path: Path) -> None:
    data = json.loads(Path(load_benchmark().source).read_text(encoding="utf-8"))
    cases: list[dict[str, Any]] = data["data"] if isinstance(data, dict) else data
    first = cases[0]
    first["rubric"]["violations"][0]["text"] = "A rule text only the custom dataset has."
    custom = tmp_path / "custom.json"
    custom.write_text(json.dumps(data), encoding="utf-8")
    rule = first["rubric"]["violations"][0]["rule"]
    results = run_eval(
        tmp_path / "run", "fake/oracle", "--dataset", str(custom), "--limit", "1", "--run-id", "m"
    )
    from_manifest = show(str(results))
    assert "A rule text only the custom dataset has." in from_manifest.output, from_manifest.output
    assert rule in SAMPLE[first["id"]].ground_truth_violations
    moved = tmp_path / "alone" / results.name
    moved.parent.mkdir()
    shutil.copy(results, moved)  # no manifest beside it: the bundled sample
    assert "A rule text only the custom dataset has." not in show(str(moved)).output
    assert "A rule text only the custom dataset has." in show(str(moved), "--dataset", str(custom)).output


def test_results_of_another_dataset_are_an_error(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text('{"id": "zzz-1-l0", "violated_rules": [1]}\n', encoding="utf-8")
    failed = show(str(results))
    assert isinstance(failed.exception, DataError)
    assert "1 case id(s) not in the dataset" in str(failed.exception) and "zzz-1-l0" in str(failed.exception)


def test_a_recorded_dataset_that_no_longer_loads_is_named_with_its_manifest(tmp_path: Path) -> None:
    data = Path(load_benchmark().source).read_text(encoding="utf-8")
    copy = tmp_path / "copy.json"
    copy.write_text(data, encoding="utf-8")
    results = run_eval(
        tmp_path / "run", "fake/oracle", "--dataset", str(copy), "--limit", "1", "--run-id", "d"
    )
    copy.unlink()
    failed = show(str(results))
    assert isinstance(failed.exception, DataError)
    message = str(failed.exception)
    assert message.startswith(f"{results.parent / 'manifest_d.json'}: the run's dataset does not load (")
    assert message.endswith("; pass --dataset") and "\n" not in message


def test_control_characters_in_an_answer_are_printed_escaped(tmp_path: Path) -> None:
    results = run_eval(tmp_path, "fake/oracle", "--limit", "1", "--run-id", "esc")
    (record,) = iter_records(results)
    record["analysis"] = "clear\x1b[2J nul\x00 title\x1b]0;owned\x07 csi\x9b end"
    results.write_text(json.dumps(record) + "\n", encoding="utf-8")
    out = show(str(results)).output
    assert not any(char in out for char in "\x1b\x00\x07\x9b")
    assert "clear\\x1b[2J nul\\x00 title\\x1b]0;owned\\x07 csi\\x9b end" in out
