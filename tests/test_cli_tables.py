"""Every console table keeps every value at 80 columns: no cut word, no split number."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sp_dspy import load_benchmark
from sp_dspy._metrics import read_result_files, render_score_table, score
from sp_dspy._metrics_pku import render_pku_report
from sp_dspy._metrics_pku._score import score_pku
from sp_dspy._report import build_summary, render_terminal
from sp_dspy._table import FitTable
from tests.test_pku_metrics import CASES as PKU_CASES
from tests.test_pku_metrics import PREDICTIONS as PKU_PREDICTIONS

FIXTURES = Path(__file__).parent / "fixtures" / "report"
CASES = load_benchmark(None).cases


def _render(*renderables: object, width: int = 80, terminal: bool = True) -> str:
    """What a terminal ``width`` columns wide shows (``terminal=False``: a pipe or a file)."""
    console = Console(width=width, record=True, file=io.StringIO(), force_terminal=terminal)
    for renderable in renderables:
        console.print(renderable)
    return console.export_text()


def _tables(renderable: object) -> list[Table]:
    if isinstance(renderable, Table):
        return [renderable]
    return [part for part in getattr(renderable, "renderables", []) if isinstance(part, Table)]


def _values(table: Table) -> list[str]:
    """Every word of every cell: what a reader must find whole in the output."""
    words = []
    for column in table.columns:
        for cell in column.cells:
            plain = cell.plain if isinstance(cell, Text) else str(cell)
            words += plain.split()
    return words


def _assert_whole(renderables: list[object], *, width: int = 80) -> str:
    text = _render(*renderables, width=width)
    assert "…" not in text
    lines = text.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width
    words = {word for line in lines for word in line.split()}
    for renderable in renderables:
        for table in _tables(renderable):
            missing = [value for value in _values(table) if value not in words and value not in text]
            assert not missing, f"{table.title}: cut or split at {width} columns: {missing}"
    return text


def test_score_tables_keep_every_value_at_80_columns() -> None:
    report = score(CASES, read_result_files([FIXTURES / "official_per_policy.jsonl"]), n_boot=50)
    text = _assert_whole(list(render_score_table(report)))
    assert "critical_infrastructure" in text.split()


def test_per_rule_tables_keep_every_value_at_80_columns() -> None:
    results = read_result_files([FIXTURES / "official_per_rule.jsonl"])
    report = score(CASES, results, per_rule=True, n_boot=50)
    _assert_whole(list(render_score_table(report)))


def test_ablation_table_stacks_rows_at_80_columns() -> None:
    summary = build_summary(
        CASES,
        [
            (None, [FIXTURES / name])
            for name in ("official_per_policy.jsonl", "official_per_rule_prefix.jsonl")
        ],
        n_boot=50,
    )
    table = render_terminal(summary)
    text = _assert_whole([table])
    for entry in summary.variants:
        assert entry.label in text  # long variant labels are never folded mid-word
    wide = _render(table, width=200)
    assert "RMR ALL [95% CI]" in wide and "─" in wide  # a table where it fits


def test_pku_tables_keep_every_value_at_80_columns() -> None:
    _assert_whole([render_pku_report(score_pku(PKU_CASES, PKU_PREDICTIONS, predicted_severity={"c1": 2}))])


def test_fit_table_is_a_table_where_it_fits_and_stacked_where_it_does_not() -> None:
    table = FitTable(title="T")
    for name in ("name", "model", "settings"):
        table.add_column(name)
    table.add_row("gpt", "openrouter/openai/gpt-oss-safeguard-120b", "max_tokens=16000, timeout=600.0")
    wide = _render(table, width=120)
    assert "┃ name" in wide
    narrow = _render(table, width=60)
    lines = [line.strip() for line in narrow.splitlines()]
    assert lines[:2] == ["T", "gpt"]
    assert "model openrouter/openai/gpt-oss-safeguard-120b" in lines


@pytest.mark.parametrize("width", [60, 80])
def test_list_models_never_splits_a_word(width: int, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tests.test_cli_list_models import _app

    models = tmp_path / "models.yaml"
    models.write_text(
        "models:\n"
        "  gpt-oss-safeguard-120b:\n    model: openrouter/openai/gpt-oss-safeguard-120b\n"
        "    api_key_env: OPENROUTER_API_KEY\n    max_tokens: 16000\n    reasoning_effort: medium\n"
        "  qwen3-8b-vllm:\n    model: hosted_vllm/Qwen/Qwen3-8B\n    api_base: http://127.0.0.1:8000/v1\n"
        "    temperature: 0\n    json_schema: true\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(_app(), ["list-models", "--config", str(models)], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    words = {word for line in result.output.splitlines() for word in line.split()}
    for whole in (
        "gpt-oss-safeguard-120b",
        "openrouter/openai/gpt-oss-safeguard-120b",
        "OPENROUTER_API_KEY",
        "max_tokens=16000,",
        "reasoning_effort=medium,",
        "hosted_vllm/Qwen/Qwen3-8B",
        "http://127.0.0.1:8000/v1",
        "json_schema=True",
    ):
        assert whole in words, f"{whole!r} split or cut at {width} columns:\n{result.output}"
    assert "…" not in result.output


def test_dry_run_projection_keeps_its_numbers_at_80_columns() -> None:
    from typer.testing import CliRunner

    from sp_dspy.cli import app

    result = CliRunner().invoke(
        app, ["eval", "--lm", "gpt-5-mini", "--protocol", "per-rule", "--dry-run"], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    words = result.output.split()
    assert "377" in words and "741,557" in words and "15,080" in words and "$0.2155" in words
    assert "…" not in result.output


def test_outside_a_terminal_a_table_kind_keeps_one_layout_whatever_its_widths() -> None:
    """Piped or written to a file, a table is stacked, one ``header value`` a line, at any width and
    for short and long values alike: the same shape for every run."""

    def shape(value: str, width: int) -> list[str]:
        table = FitTable(title="T")
        for name in ("name", "model", "settings"):
            table.add_column(name)
        table.add_row("gpt", value, "timeout=600")
        lines = _render(table, width=width, terminal=False).splitlines()
        return [line.split()[0] if line.strip() else "" for line in lines]

    expected = ["T", "gpt", "model", "settings"]
    for width in (60, 200):
        assert shape("x", width) == expected
        assert shape("openrouter/openai/gpt-oss-safeguard-120b", width) == expected
