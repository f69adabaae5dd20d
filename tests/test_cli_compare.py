"""``sp-dspy compare`` on hand-made result files whose paired-test counts are known."""

from __future__ import annotations

import html
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from sp_dspy._benchmarks import load_benchmark
from sp_dspy._data import Case
from sp_dspy._errors import ConfigError, DataError
from sp_dspy._metrics import read_result_files, score
from sp_dspy._metrics._paired import CELL_KEYS, MIN_CI_PAIRS
from sp_dspy.cli import _compare
from tests._factories import raw_case, write_dataset

REFUSED = "refused"
MISSING = "missing"
# (case id, A's prediction, B's prediction); every gold set is [1], so [1] is the exact match.
PLAN: list[tuple[str, Any, Any]] = [
    ("c1-l0", [1], [1]),
    ("c2-l0", [1], [2]),  # A only
    ("c3-l0", [2], [1]),  # B only
    ("c4-l0", [1, 2], [1]),  # B only
    ("c5-l1", [1], REFUSED),  # A only: B's exclusion counts as wrong
    ("c6-l1", [2], [1]),  # B only
    ("c7-l1", [], [1]),  # B only
    ("c8-l1", [1], [1]),
    ("c9-l2", [1], [1]),
    ("c10-l2", [1], [1]),
    ("c11-l2", MISSING, [1]),  # A has no result: not compared
    ("c12-l2", [3], [1]),  # B only
]
# Each case is a conversation of its own (no two share a stem), so the paired test is McNemar's exact test.
# Per cell: compared cases, A only, B only (hand-counted from PLAN).
EXPECTED = {"L0": (4, 1, 2), "L1": (4, 1, 2), "L2": (3, 0, 1), "ALL": (11, 2, 5)}


def make_app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Keep ``compare`` a named subcommand."""

    _compare.register(app)
    return app


def record(case_id: str, prediction: Any) -> dict[str, Any] | None:
    if prediction == MISSING:
        return None
    if prediction == REFUSED:
        return {"id": case_id, "violated_rules": None, "refused": True}
    return {"id": case_id, "violated_rules": prediction}


def write_jsonl(path: Path, lines: list[dict[str, Any] | None]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines if line is not None), encoding="utf-8")
    return path


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Path]:
    cases = [raw_case(case_id, level=case_id[-2:].upper(), gt=[1]) for case_id, _, _ in PLAN]
    dataset = write_dataset(tmp_path / "bench.json", cases)
    a_lines = [record(case_id, a) for case_id, a, _ in PLAN]
    b_lines = [record(case_id, b) for case_id, _, b in PLAN]
    return {
        "dataset": dataset,
        # A split over two files (a later file wins: the first file's c2-l0 is replaced).
        "a1": write_jsonl(tmp_path / "a1.jsonl", [*a_lines[:4], {"id": "c2-l0", "violated_rules": [9]}]),
        "a2": write_jsonl(tmp_path / "a2.jsonl", [a_lines[1], *a_lines[4:]]),
        "b": write_jsonl(tmp_path / "b.jsonl", [*b_lines, {"id": "zz-999-l0", "violated_rules": []}]),
    }


def run(*args: str | Path) -> typer.testing.Result:
    return CliRunner().invoke(make_app(), ["compare", *map(str, args)])


def comparison(setup: dict[str, Path], *extra: str) -> dict[str, Any]:
    a = f"{setup['a1']},{setup['a2']}"
    result = run(a, setup["b"], "--dataset", setup["dataset"], "--n-boot", "200", "--json", "-", *extra)
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_the_paired_test_counts_excluded_cases_as_wrong(setup: dict[str, Path]) -> None:
    document = comparison(setup)
    assert (document["compared"], document["only_a"], document["only_b"], document["in_neither"]) == (
        11,
        0,
        1,
        0,
    )
    for name, (n, a_only, b_only) in EXPECTED.items():
        test = document["cells"][name]["test"]
        assert (document["cells"][name]["n"], test["n_pairs"], test["a_only"], test["b_only"]) == (
            n, n, a_only, b_only,
        )  # fmt: skip
        assert test["method"] == "paired randomization test over conversations"
        assert test["n_units"] == n
    # Exact binomial, 7 discordant pairs, 2 the other way: 2 * (1 + 7 + 21) / 2**7.
    assert document["cells"]["ALL"]["test"]["p_value"] == pytest.approx(58 / 128)
    assert document["unit"] == "conversation" and document["bootstrap"]["unit"] == "conversation"


def scored_ids(case_ids: list[str], *excluded: str) -> list[str]:
    return [case_id for case_id in case_ids if case_id not in excluded]


def test_differences_are_b_minus_a_of_the_official_scores(setup: dict[str, Path]) -> None:
    document = comparison(setup)
    cases = load_benchmark(setup["dataset"]).cases
    results_a = read_result_files([setup["a1"], setup["a2"]])
    results_b = read_result_files([setup["b"]])
    compared = [case for case in cases if case.id != "c11-l2"]
    # The paired differences use the cases both sides scored: B refused c5-l1.
    both_scored: list[Case] = [case for case in compared if case.id != "c5-l1"]
    cells_a = score(both_scored, results_a, ci=False).cells
    cells_b = score(both_scored, results_b, ci=False).cells
    for name in ("L0", "L1", "L2", "ALL"):
        paired = document["cells"][name]["paired"]
        assert paired["n_pairs"] == cells_a[name]["n_eval"] == cells_b[name]["n_eval"]
        for metric in ("rmr_avg", "rmr_exact", "rdr"):
            assert paired["a"][metric] == cells_a[name][metric]
            assert paired["b"][metric] == cells_b[name][metric]
            assert paired["diff"][metric] == round(cells_b[name][metric] - cells_a[name][metric], 2)
            if paired["n_pairs"] < MIN_CI_PAIRS:  # a level's 3 or 4 pairs: no interval
                assert paired["ci"][metric] is None
                continue
            low, high = paired["ci"][metric]
            assert low <= paired["diff"][metric] <= high
    # Each side's own cell is the official score on the compared cases (B's exclusion shows).
    official_b = score(compared, results_b, ci=False).cells
    for key in CELL_KEYS:
        assert document["cells"]["L1"]["b"][key] == official_b["L1"][key]
    assert document["cells"]["L1"]["b"]["excluded"] == 1
    assert document["cells"]["ALL"]["paired"]["diff"]["rmr_exact"] == 40.0  # 5/10 -> 9/10


def test_seeded_intervals_repeat_and_move_with_the_seed(setup: dict[str, Path]) -> None:
    first, again = comparison(setup, "--seed", "3"), comparison(setup, "--seed", "3")
    other = comparison(setup, "--seed", "4")
    ci = [document["cells"]["ALL"]["paired"]["ci"] for document in (first, again, other)]
    assert ci[0] == ci[1]
    assert ci[0] != ci[2]
    assert first["bootstrap"] == {"n_boot": 200, "seed": 3, "level": 0.95, "unit": "conversation"}


def test_table_output_says_how_cases_were_counted(setup: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "cmp.json"
    a = f"{setup['a1']},{setup['a2']}"
    result = run(a, setup["b"], "--dataset", setup["dataset"], "--n-boot", "50", "--json", out)
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "Compared 11 case(s)" in text
    assert "0 only in A, 1 only in B, 0 in neither" in text
    assert "counts as wrong for that side" in text
    assert "Paired differences (B - A)" in text
    assert "B: 1 result id(s) not in the dataset (e.g. zz-999-l0)" in " ".join(result.stderr.split())
    assert json.loads(out.read_text())["cells"]["ALL"]["test"]["b_only"] == 5
    assert "paired randomization test over conversations" in text


def test_level_filter_and_no_bootstrap(setup: dict[str, Path]) -> None:
    document = comparison(setup, "--level", "L2", "--n-boot", "0")
    assert document["compared"] == 3
    assert document["cells"]["L0"]["n"] == 0
    assert document["cells"]["ALL"]["paired"]["ci"] == {"rmr_avg": None, "rmr_exact": None, "rdr": None}


def test_a_handful_of_cases_says_the_interval_is_not_informative(setup: dict[str, Path]) -> None:
    """3 paired cases: no zero-width interval, the same words in compare's table, its JSON and the report."""
    from sp_dspy._data import filter_cases
    from sp_dspy._report import build_summary, render_terminal
    from sp_dspy._report._html_tables import diff_table

    note = "not informative (3 conversations < 10)"
    a = f"{setup['a1']},{setup['a2']}"
    document = comparison(setup, "--level", "L2")
    paired = document["cells"]["ALL"]["paired"]
    assert (paired["n_pairs"], paired["ci_note"]) == (3, note)
    assert paired["ci"] == {"rmr_avg": None, "rmr_exact": None, "rdr": None}
    table = run(a, setup["b"], "--dataset", setup["dataset"], "--level", "L2", "--n-boot", "200")
    assert table.exit_code == 0, table.output
    assert table.stdout.count(note) == 6  # RMR, RMR@1.0 and RDR of L2 and of ALL (the same 3 cases)
    assert "[+0.00, +0.00]" not in table.stdout

    cases = filter_cases(load_benchmark(setup["dataset"]).cases, level="L2")
    summary = build_summary(
        cases, [("A", [setup["a1"], setup["a2"]]), ("B", [setup["b"]])], baseline="A", n_boot=200
    )
    (row,) = summary.diffs_for("ALL")
    assert (row.n_pairs, row.ci_note, row.significant("rmr_avg")) == (3, note, False)
    assert html.escape(note) in diff_table(summary, "ALL")
    console = Console(width=250, record=True)
    console.print(render_terminal(summary))
    assert note in console.export_text()


def test_errors(setup: dict[str, Path], tmp_path: Path) -> None:
    result = run(tmp_path / "nope.jsonl", setup["b"], "--dataset", setup["dataset"])
    assert isinstance(result.exception, DataError)
    assert str(result.exception) == f"RESULTS_A: {tmp_path / 'nope.jsonl'}: no such file"
    other = write_jsonl(tmp_path / "other.jsonl", [{"id": "zz-1-l0", "violated_rules": []}])
    result = run(other, setup["b"], "--dataset", setup["dataset"])
    assert isinstance(result.exception, DataError)
    # Results of another dataset are refused by name, not compared as 0 cases.
    assert str(result.exception).startswith(f"{other}: none of its 1 case id(s) is in the dataset ")
    result = run(setup["a2"], setup["b"], "--dataset", setup["dataset"], "--n-boot", "-1")
    assert isinstance(result.exception, ConfigError)


def test_compare_does_not_import_dspy_or_litellm(setup: dict[str, Path]) -> None:
    code = (
        "import sys; from tests.test_cli_compare import make_app; from typer.testing import CliRunner; "
        f"r = CliRunner().invoke(make_app(), ['compare', {str(setup['a2'])!r}, {str(setup['b'])!r}, "
        f"'--dataset', {str(setup['dataset'])!r}, '--n-boot', '10']); "
        "assert r.exit_code == 0, r.output; "
        "assert 'dspy' not in sys.modules and 'litellm' not in sys.modules"
    )
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True, timeout=60)
