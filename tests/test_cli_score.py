"""``sp-dspy score`` through typer's test runner, on a dataset written per test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sp_dspy._errors import ConfigError, DataError
from sp_dspy.cli._score import register
from tests._factories import raw_case, write_dataset

FIXTURES = Path(__file__).parent / "fixtures" / "metrics"


def make_app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _group() -> None:
        """Test group, so ``score`` stays a sub-command."""

    register(app)
    return app


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    cases = [
        raw_case("demo-001-l0", level="L0", gt=[1]),
        raw_case("demo-002-l0", level="L0", gt=[1, 2], domain="fraud"),
        raw_case("demo-003-l1", level="L1", gt=[2]),
        raw_case("demo-004-l2", level="L2", gt=[]),
    ]
    return write_dataset(tmp_path / "bench.json", cases)


def write_results(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def run(*args: str | Path) -> typer.testing.Result:
    return CliRunner().invoke(make_app(), ["score", *map(str, args)])


def test_scores_records_and_writes_json(tmp_path: Path, dataset: Path) -> None:
    results = write_results(
        tmp_path / "r.jsonl",
        [
            {"id": "demo-001-l0", "violated_rules": [1]},
            {"id": "demo-002-l0", "violated_rules": [1]},
            {"id": "demo-003-l1", "violated_rules": [2]},
        ],
    )
    out = tmp_path / "report.json"
    result = run(results, "--dataset", dataset, "--json", out, "--n-boot", "50")
    assert result.exit_code == 0, result.output
    assert "Per-policy metrics" in result.stdout
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["L0"]["rmr_exact"] == 50.0  # demo-002 misses rule 2
    assert report["L1"]["rmr_exact"] == 100.0
    assert report["L2"]["excluded"] == 1  # no record
    assert report["ALL"]["refusal"] == 25.0
    assert report["bootstrap"]["n_boot"] == 50


def test_json_to_stdout(tmp_path: Path, dataset: Path) -> None:
    results = write_results(tmp_path / "r.jsonl", [{"id": "demo-004-l2", "violated_rules": []}])
    result = run(results, "--dataset", dataset, "--json", "-", "--n-boot", "0")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["L2"]["rmr_exact"] == 100.0
    assert document["ci"] == {}


def test_level_filter_and_unknown_ids(tmp_path: Path, dataset: Path) -> None:
    results = write_results(
        tmp_path / "r.jsonl",
        [
            {"id": "demo-001-l0", "violated_rules": [1]},
            {"id": "demo-003-l1", "violated_rules": []},
            {"id": "typo-003-l1", "violated_rules": []},
        ],
    )
    out = tmp_path / "report.json"
    result = run(results, "--dataset", dataset, "--level", "l1", "--json", out)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["ALL"]["total"] == 1 and report["L0"]["total"] == 0
    assert report["unknown_ids"] == {"count": 1, "examples": ["typo-003-l1"]}  # demo-001-l0 is known
    assert "1 result id(s) not in the dataset (e.g. typo-003-l1)" in result.output


def test_per_rule_files_are_detected(tmp_path: Path, dataset: Path) -> None:
    judgments = write_results(
        tmp_path / "j.jsonl",
        [
            {"kind": "judgment", "cid": "demo-001-l0", "rule": 1, "pred": True, "refused": False},
            {"kind": "judgment", "cid": "demo-001-l0", "rule": 2, "pred": None, "refused": True},
        ],
    )
    out = tmp_path / "report.json"
    result = run(judgments, "--dataset", dataset, "--json", out, "--n-boot", "0")
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["mode"] == "per_rule"
    assert report["L0"]["rmr_exact"] == 100.0 and report["L0"]["excluded"] == 1
    assert report["L0"]["per_rule_refusal_rate"] == 50.0
    assert report["per_rule"]["ALL"]["n_judgments"] == 2
    assert "Per-rule judgments" in result.stdout


def test_per_rule_flag_requires_judgments(tmp_path: Path, dataset: Path) -> None:
    results = write_results(tmp_path / "r.jsonl", [{"id": "demo-001-l0", "violated_rules": [1]}])
    result = run(results, "--dataset", dataset, "--per-rule")
    assert isinstance(result.exception, DataError)
    assert "no judgment records" in str(result.exception)


def test_bad_line_fails_or_is_skipped(tmp_path: Path, dataset: Path) -> None:
    results = tmp_path / "r.jsonl"
    results.write_text('{"id": "demo-001-l0", "violated_rules": [1]}\n{"id": \n', encoding="utf-8")
    failed = run(results, "--dataset", dataset)
    assert isinstance(failed.exception, DataError)
    assert str(failed.exception).startswith(f"{results}:2: invalid JSON")
    skipped = run(results, "--dataset", dataset, "--skip-bad-lines", "--n-boot", "0")
    assert skipped.exit_code == 0, skipped.output
    assert "1 malformed result line(s) skipped" in skipped.output


def test_cap_aware_flag(tmp_path: Path, dataset: Path) -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 65_000, "total_tokens": 65_100}
    results = write_results(
        tmp_path / "r.jsonl", [{"id": "demo-001-l0", "violated_rules": [1], "usage": usage}]
    )
    plain, capped = tmp_path / "plain.json", tmp_path / "capped.json"
    assert run(results, "--dataset", dataset, "--json", plain, "--n-boot", "0").exit_code == 0
    assert run(results, "--dataset", dataset, "--json", capped, "--n-boot", "0", "--cap-aware").exit_code == 0
    assert json.loads(plain.read_text(encoding="utf-8"))["L0"]["excluded"] == 1
    assert json.loads(capped.read_text(encoding="utf-8"))["L0"]["excluded"] == 2


def test_negative_n_boot_is_a_config_error(tmp_path: Path, dataset: Path) -> None:
    results = write_results(tmp_path / "r.jsonl", [])
    result = run(results, "--dataset", dataset, "--n-boot", "-1")
    assert isinstance(result.exception, ConfigError)


def test_score_does_not_import_dspy_or_litellm(tmp_path: Path, dataset: Path) -> None:
    results = write_results(tmp_path / "r.jsonl", [{"id": "demo-001-l0", "violated_rules": [1]}])
    script = (
        "import sys, typer\n"
        "from typer.testing import CliRunner\n"
        "from sp_dspy.cli._score import register\n"
        "app = typer.Typer()\n"
        "app.callback()(lambda: None)\n"
        "register(app)\n"
        f"result = CliRunner().invoke(app, ['score', {str(results)!r}, '--dataset', {str(dataset)!r}, '--n-boot', '0'])\n"
        "assert result.exit_code == 0, result.output\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('dspy', 'litellm', 'torch'))\n"
        "print(','.join(loaded))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_the_json_report_is_written_even_if_stdout_closes_early(tmp_path: Path, dataset: Path) -> None:
    # As in `sp-dspy score ... --json out.json | head -1`: the tables hit a closed pipe.
    results = write_results(tmp_path / "r.jsonl", [{"id": "demo-001-l0", "violated_rules": [1]}])
    out = tmp_path / "report.json"
    main = "import sys; from sp_dspy.cli import main; main()"
    arguments = ["score", str(results), "--dataset", str(dataset), "--json", str(out), "--n-boot", "20"]
    proc = subprocess.Popen(
        [sys.executable, "-c", main, *arguments], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.stdout is not None
    proc.stdout.close()  # nobody reads the tables
    proc.wait(timeout=60)
    assert json.loads(out.read_text(encoding="utf-8"))["ALL"]["total"] == 4


@pytest.mark.parametrize(("n_boot", "numpy_loaded"), [("0", False), ("20", True)])
def test_numpy_is_imported_only_for_intervals(
    tmp_path: Path, dataset: Path, n_boot: str, numpy_loaded: bool
) -> None:
    results = write_results(tmp_path / "r.jsonl", [{"id": "demo-001-l0", "violated_rules": [1]}])
    code = (
        "import sys\n"
        "from sp_dspy.cli import app\n"
        f"app(['score', {str(results)!r}, '--dataset', {str(dataset)!r}, '--n-boot', {n_boot!r}],"
        " standalone_mode=False)\n"
        "print('numpy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == str(numpy_loaded)
