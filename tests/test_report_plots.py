"""Report plots: real PNGs, byte-for-byte reproducible, right fallbacks, lazy matplotlib."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sp_dspy._benchmarks import load_benchmark
from sp_dspy._report import ComparisonSummary, build_summary
from sp_dspy._report._plots import Plot, domain_heatmap, render_plots, rmr_by_level

FIXTURES = Path(__file__).parent / "fixtures" / "report"
CASES = load_benchmark(None).cases
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def summary() -> ComparisonSummary:
    files = ["official_per_policy.jsonl", "official_per_rule.jsonl", "dspy_per_policy.jsonl"]
    return build_summary(CASES, [(None, [FIXTURES / name]) for name in files], n_boot=100)


@pytest.fixture(scope="module")
def plots(summary: ComparisonSummary) -> list[Plot]:
    return render_plots(summary)


def test_every_plot_is_a_png_with_a_caption(plots: list[Plot]) -> None:
    assert [p.key for p in plots] == [
        "rmr_by_level",
        "rmr_tau",
        "failure_modes",
        "domain_heatmap",
        "rule_type_f1",
        "cost_vs_rmr",
    ]
    for plot in plots:
        assert plot.png.startswith(PNG_MAGIC) and len(plot.png) > 5_000
        assert plot.data_uri.startswith("data:image/png;base64,")
        assert len(plot.caption) > 60


def test_rendering_is_deterministic(summary: ComparisonSummary, plots: list[Plot]) -> None:
    by_key = {p.key: p.png for p in plots}
    assert rmr_by_level(summary).png == by_key["rmr_by_level"]
    assert domain_heatmap(summary).png == by_key["domain_heatmap"]
    assert b"Software" not in plots[0].png  # no version/timestamp metadata in the PNG


def test_dollar_axis_when_every_variant_reports_cost(plots: list[Plot]) -> None:
    cost = next(p for p in plots if p.key == "cost_vs_rmr")
    assert cost.caption.startswith("Mean dollars per case")


def test_token_axis_and_no_per_rule_plot_without_costs(tmp_path: Path) -> None:
    free = FIXTURES / "smollm_per_policy.jsonl"  # a local model: tokens, no dollars
    bare = tmp_path / "bare.jsonl"
    bare.write_text(
        "".join(json.dumps({"id": c.id, "violated_rules": c.ground_truth_violations}) + "\n" for c in CASES),
        encoding="utf-8",
    )
    summary = build_summary(
        CASES, [(None, [FIXTURES / "official_per_policy.jsonl"]), (None, [free]), (None, [bare])], n_boot=0
    )
    keys = {p.key: p for p in render_plots(summary)}
    assert "rule_type_f1" not in keys
    assert keys["cost_vs_rmr"].caption.startswith("Mean tokens per case")
    assert "1 variant(s) without usage or RMR are not shown" in keys["cost_vs_rmr"].caption


def test_importing_the_report_and_its_command_does_not_load_heavy_modules() -> None:
    code = (
        "import sys, sp_dspy._report, sp_dspy.cli._report;"
        "print([m for m in ('matplotlib', 'dspy', 'litellm', 'torch') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
