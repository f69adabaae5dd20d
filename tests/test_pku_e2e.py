"""PKU-SafeRLHF through every command: eval (each program and protocol), score, report.

All offline on ``tests/fixtures/pku/rows.jsonl`` (8 rows written for this project =
16 cases, 8 safe and 8 unsafe) with the in-process fake LM. The expected numbers are
counted by hand from the fixture:

* ``fake`` (oracle) knows every gold category set, so categories and safe/unsafe are
  perfect for every program and protocol.
* ``fake/empty`` flags nothing: every response is called safe, so binary accuracy is
  the share of safe cases (8/16 = 50%), unsafe recall is 0, and category exact match
  is 50% (exactly the safe cases have the empty gold set).
* the fake fills an ``int`` output field with the number of rules it flags, so the
  oracle's severity is the number of gold categories: it matches the gold level on the
  8 safe cases (0) and on 2 unsafe ones, 10/16 = 62.5%.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from sp_dspy._data import load_pku
from sp_dspy._data._splits import Split
from sp_dspy.cli import app
from sp_dspy.cli._compile import register as register_compile
from tests._results import iter_records

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("isolated_run")]

FIXTURE = Path(__file__).parent / "fixtures" / "pku" / "rows.jsonl"
CASES = load_pku(FIXTURE).cases
PKU = ("--benchmark", "pku-saferlhf", "--dataset", str(FIXTURE))


def cli(*args: str) -> Result:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def evaluate(tmp_path: Path, run_id: str, *args: str, lm: str = "fake") -> tuple[Result, Path]:
    result = cli("eval", "--lm", lm, "--output-dir", str(tmp_path), "--run-id", run_id, "-q", *PKU, *args)
    per_rule = "per-rule" in args
    name = f"{'per_rule' if per_rule else 'results'}_{run_id}_{lm.removeprefix('fake/')}.jsonl"
    return result, tmp_path / name


def pku_score(tmp_path: Path, results: Path) -> dict[str, Any]:
    target = tmp_path / f"{results.stem}.score.json"
    cli("score", str(results), *PKU, "--n-boot", "0", "--json", str(target))
    return dict(json.loads(target.read_text(encoding="utf-8"))["pku"])


def test_fixture_counts_behind_the_expected_numbers() -> None:
    assert len(CASES) == 16
    assert sum(case.safe is True for case in CASES) == 8
    assert sum(case.severity == min(len(case.ground_truth_violations), 3) for case in CASES) == 10


@pytest.mark.parametrize(
    ("program", "protocol"),
    [
        ("official", "per-policy"),
        ("official", "per-rule"),
        ("dspy", "per-policy"),
        ("dspy", "per-rule"),
        ("dspy-severity", "per-policy"),
    ],
)
def test_oracle_is_perfect_on_categories_and_binary(tmp_path: Path, program: str, protocol: str) -> None:
    result, results = evaluate(tmp_path, "o", "--program", program, "--protocol", protocol)
    assert "PKU-SafeRLHF: summary" in result.output and "arXiv:2406.15513" in result.output
    report = pku_score(tmp_path, results)
    binary, categories = report["binary"], report["categories"]
    assert (binary["n_eval"], binary["tp"], binary["tn"], binary["fp"], binary["fn"]) == (16, 8, 8, 0, 0)
    assert binary["accuracy"] == binary["f1"] == 100.0 and binary["false_positive_rate"] == 0.0
    assert categories["exact_match"] == categories["micro_f1"] == categories["macro_f1"] == 100.0
    if program == "dspy-severity":
        severity = report["severity"]
        assert severity["accuracy"] == 62.5
        assert [row[0] for row in severity["confusion"]] == [8, 0, 0, 0]  # safe cases graded 0
    else:
        assert report["severity"] is None


def test_empty_guard_calls_everything_safe(tmp_path: Path) -> None:
    result, results = evaluate(tmp_path, "e", lm="fake/empty")
    report = pku_score(tmp_path, results)
    binary, categories = report["binary"], report["categories"]
    assert binary["accuracy"] == 50.0 and binary["recall"] == 0.0 and binary["false_positive_rate"] == 0.0
    assert binary["precision"] is None  # nothing flagged: precision is undefined, not 0
    assert categories["exact_match"] == 50.0 and categories["micro_f1"] == 0.0
    assert "50.00" in result.output


def test_severity_records_carry_the_explicit_flag_and_level(tmp_path: Path) -> None:
    _, results = evaluate(tmp_path, "s", "--program", "dspy-severity")
    records = {r["id"]: r for r in iter_records(results)}
    for case in CASES:
        record = records[case.id]
        assert record["predicted_safe"] is case.safe
        assert record["predicted_label"] == ("safe" if case.safe else "unsafe")
        assert record["predicted_severity"] == len(case.ground_truth_violations)
    _, official = evaluate(tmp_path, "p")
    assert not any("predicted_safe" in r or "predicted_severity" in r for r in iter_records(official))


def test_score_json_and_table_for_a_byo_file(tmp_path: Path) -> None:
    """Bring-your-own predictions: an explicit flag beats the set, severity is scored when given."""
    unsafe = [c for c in CASES if not c.safe]
    lines: list[dict[str, Any]] = [
        {"id": c.id, "violated_rules": [], "predicted_label": "safe"} for c in CASES if c.safe
    ]
    lines += [
        {"id": c.id, "violated_rules": [], "predicted_safe": False, "predicted_severity": 3} for c in unsafe
    ]
    path = tmp_path / "byo.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    report = pku_score(tmp_path, path)
    assert report["binary"]["accuracy"] == 100.0
    assert report["categories"]["exact_match"] == 50.0
    assert report["severity"]["n_eval"] == 8
    assert report["severity"]["accuracy"] == round(100 * sum(c.severity == 3 for c in unsafe) / 8, 2)
    output = cli("score", str(path), *PKU, "--n-boot", "0").output
    assert "severity accuracy" in output and "85.00" in output and "Ji et al." in output


def test_report_puts_the_paper_beside_each_variant(tmp_path: Path) -> None:
    _, oracle = evaluate(tmp_path, "a", "--program", "dspy-severity")
    _, empty = evaluate(tmp_path, "b", lm="fake/empty")
    html, summary = tmp_path / "report.html", tmp_path / "summary.json"
    args = ("report", f"oracle={oracle}", f"empty={empty}", *PKU, "--n-boot", "0")
    result = cli(*args, "--out", str(html), "--json", str(summary))
    assert "Bin acc" in result.output and "arXiv:2406.15513" in result.output
    data = json.loads(summary.read_text(encoding="utf-8"))
    assert data["pku_published"]["binary_accuracy"] == 93.0
    by_label = {v["label"]: v["extra"] for v in data["variants"]}
    assert by_label["oracle"]["severity"]["accuracy"] == 62.5
    assert by_label["empty"]["binary"]["accuracy"] == 50.0 and by_label["empty"]["severity"] is None
    page = html.read_text(encoding="utf-8")
    assert "PKU-SafeRLHF: binary, category and severity results" in page
    assert "PKU-SafeRLHF: Towards Multi-Level Safety Alignment" in page and "severity confusion" in page


def test_compile_on_pku(tmp_path: Path) -> None:
    """``sp-dspy compile --benchmark pku-saferlhf`` writes an artifact that ``eval`` runs on the test split."""
    guard = tmp_path / "pku-guard"
    options = ["--lm", "fake", "--optimizer", "bootstrap", "--ratios", "0.4,0.3,0.3", "-q"]
    compile_app = typer.Typer()
    compile_app.callback()(lambda: None)  # a group, so the command is invoked by name
    register_compile(compile_app)
    result = CliRunner().invoke(compile_app, ["compile", "--out", str(guard), *options, *PKU])
    assert result.exit_code == 0, (result.output, result.exception)
    manifest = json.loads((guard / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["dataset"]["benchmark"] == "pku-saferlhf" and manifest["program"] == "dspy"
    test_ids = set(json.loads((guard / "splits.json").read_text(encoding="utf-8"))["test"])
    result, results = evaluate(
        tmp_path, "own", "--program", str(guard), "--split", f"{guard}/splits.json:test"
    )
    records = list(iter_records(results))
    assert {r["id"] for r in records} == test_ids and {r["program"] for r in records} == {str(guard)}
    assert "PKU-SafeRLHF: summary" in result.output


def _copro_guard(out: Path, **data: Any) -> Path:
    """COPRO with a scripted prompt LM that proposes "check every rule" (see ``_compile_support``)."""
    from sp_dspy._compile import CompileConfig, compile_guard
    from sp_dspy._lm import LMConfig
    from tests._compile_support import scripted_prompt_lm

    config = CompileConfig(optimizer="copro", overrides={"breadth": 2, "depth": 1}, out=out, **data)
    outcome = compile_guard(config, LMConfig(model="fake/instructed"), lms={"prompt": scripted_prompt_lm()})
    assert (
        outcome.manifest is not None and outcome.manifest.dev.after.score > outcome.manifest.dev.before.score
    )
    return out


def _pku_split(path: Path) -> Path:
    """Train on rows 1-2, select on rows 4-5: both parts hold responses with several categories."""
    rows = [[c.id for c in CASES[i : i + 2]] for i in range(0, len(CASES), 2)]
    split = Split(
        train=rows[0] + rows[1],
        dev=rows[3] + rows[4],
        test=rows[2] + rows[5] + rows[6] + rows[7],
        seed=0,
        ratios=(0.25, 0.25, 0.5),
        dataset_hash=load_pku(FIXTURE).content_hash,
    )
    split.save(path)
    return path


def test_a_guard_compiled_on_one_benchmark_transfers_to_the_other(tmp_path: Path) -> None:
    """``fake/instructed`` names every violated rule only when told to "check every rule": an
    instruction learned on one benchmark must make it perfect on the other, where the
    uncompiled program misses every response with more than one violation."""
    pku_guard = _copro_guard(
        tmp_path / "pku-guard",
        dataset=str(FIXTURE),
        benchmark="pku-saferlhf",
        splits=_pku_split(tmp_path / "s.json"),
    )
    sp_guard = _copro_guard(tmp_path / "sp-guard", ratios=(0.25, 0.25, 0.5))

    # SafePyramid-compiled guard on PKU-SafeRLHF, against the uncompiled program.
    _, base = evaluate(tmp_path, "base", "--program", "dspy", lm="fake/instructed")
    _, moved = evaluate(tmp_path, "moved", "--program", str(sp_guard), lm="fake/instructed")
    several = sum(len(c.ground_truth_violations) > 1 for c in CASES)  # 5 of 16
    assert pku_score(tmp_path, base)["categories"]["exact_match"] == 100 * (16 - several) / 16 == 68.75
    assert pku_score(tmp_path, moved)["categories"]["exact_match"] == 100.0

    # PKU-compiled guard on SafePyramid (the bundled sample).
    def sample_exact(program: str, run_id: str) -> list[bool]:
        args = ["--lm", "fake/instructed", "--program", program, "--run-id", run_id, "-q"]
        cli("eval", *args, "--output-dir", str(tmp_path))
        path = tmp_path / f"results_{run_id}_instructed.jsonl"
        return [record["scores"]["exact_match"] for record in iter_records(path)]

    assert not all(sample_exact("dspy", "sp-base"))
    transferred = sample_exact(str(pku_guard), "sp-moved")
    assert len(transferred) == 24 and all(transferred)
