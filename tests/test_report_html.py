"""The HTML report: self-contained, escaped, honest about small samples and toy models."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sp_dspy._benchmarks import load_benchmark
from sp_dspy._errors import ConfigError
from sp_dspy._metrics import read_result_files
from sp_dspy._report import ComparisonSummary, build_summary, write_html
from sp_dspy._report._html import render_html
from sp_dspy._report._plots import Plot, rmr_by_level, rmr_tau_curve

FIXTURES = Path(__file__).parent / "fixtures" / "report"
CASES = load_benchmark(None).cases
NETWORK_REF = re.compile(r"""(?:src|href|srcset|action|poster)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


def _summary(
    *names: str, labels: list[str | None] | None = None, benchmark: str = "safepyramid"
) -> ComparisonSummary:
    labels = labels or [None] * len(names)
    variants = [(label, [FIXTURES / name]) for label, name in zip(labels, names, strict=True)]
    return build_summary(
        CASES, variants, n_boot=100, dataset="sample.json", content_hash="abc123", benchmark=benchmark
    )


@pytest.fixture(scope="module")
def page() -> str:
    summary = _summary("official_per_policy.jsonl", "official_per_rule.jsonl", "smollm_per_policy.jsonl")
    return render_html(summary)


def test_plots_are_embedded_and_nothing_is_fetched(page: str) -> None:
    sources = re.findall(r'<img src="([^"]*)"', page)
    assert len(sources) == 6 and all(s.startswith("data:image/png;base64,") for s in sources)
    assert not NETWORK_REF.search(page)
    for forbidden in ("<link", "<iframe", "@import", "url(", "fetch(", "xmlhttprequest", "import("):
        assert forbidden not in page.lower()
    # The one script is the Cases view's, inline, beside its data block.
    scripts = re.findall(r"<script[^>]*>", page, re.IGNORECASE)
    assert scripts == ['<script type="application/gzip" id="sp-cases-data">', "<script>"]


def test_page_names_dataset_levels_and_published_rows(page: str) -> None:
    assert "sample.json" in page and "abc123" in page
    for heading in ("<h3>All levels (pooled)</h3>", "<h3>L0</h3>", "<h3>L1</h3>", "<h3>L2</h3>"):
        assert heading in page
    assert "Differences to the baseline (gpt-4o-mini official-per-policy)" in page
    assert page.count("class='tag pub'>published</span>") > 4 * 10
    assert "arXiv 2606.29887" in page and "GPT-OSS-Safeguard-120B" in page
    assert "Per-rule judgments" in page and "exception" in page


def test_honesty_notes_for_small_n_and_a_135m_model(page: str) -> None:
    assert "Small sample" in page
    assert "plumbing check, not a guard" in page


def test_user_strings_are_escaped() -> None:
    evil = '<script>alert("x")</script> & co'
    summary = _summary("byo_predictions.jsonl", "dspy_per_policy.jsonl", labels=[evil, "<b>bold</b>"])
    html = render_html(summary, plots=[])
    assert '<script>alert("x")' not in html and "<b>bold</b>" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; co" in html
    assert "&lt;b&gt;bold&lt;/b&gt;" in html
    tiny = Plot('k"><x', "t<i>", "c<u>", b"\x89PNG")
    html = render_html(summary, plots=[tiny])
    assert 'id="k&quot;&gt;&lt;x"' in html and "<b>t&lt;i&gt;.</b> c&lt;u&gt;" in html


def test_no_published_rows_for_another_benchmark() -> None:
    summary = _summary("byo_predictions.jsonl", benchmark="pku-saferlhf")
    html = render_html(summary, plots=[])
    assert "Beside the published leaderboard" not in html and "tag pub" not in html and "arXiv" not in html
    assert "pku-saferlhf" in html


def test_write_html_reports_unwritable_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = _summary("byo_predictions.jsonl")
    monkeypatch.setattr("sp_dspy._report._plots.render_plots", lambda summary: [rmr_by_level(summary)])
    target = write_html(summary, tmp_path / "report.html")
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    with pytest.raises(ConfigError, match="--out"):
        write_html(summary, tmp_path / "missing" / "report.html")


def test_levels_without_cases_are_left_out() -> None:
    only_l0 = [c for c in CASES if c.level == "L0"]
    summary = build_summary(only_l0, [(None, [FIXTURES / "official_per_policy.jsonl"])], n_boot=50)
    assert summary.breakdown == ("L0",) and summary.cells == ("L0", "ALL")
    plot = rmr_tau_curve(summary)
    html = render_html(summary, plots=[plot])
    assert "<h3>L0</h3>" in html and "<h3>L1</h3>" not in html and "<th>FM-C1 L1</th>" not in html
    other_levels = {c.id for c in CASES if c.level != "L0"}
    in_file = set(read_result_files([FIXTURES / "official_per_policy.jsonl"]).records)
    assert summary.variants[0].score["unknown_ids"]["count"] == len(in_file & other_levels) > 0
    assert any("not in this dataset" in note for note in summary.notes)
