"""The Cases view's data: what each case shows per run, read from the records the report scores,
and ``sp-dspy view`` writing the page (the page itself is driven in ``test_report_viewer_browser``)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sp_dspy._benchmarks import benchmark_kind, load_benchmark
from sp_dspy._data._pku_policy import PKU_CATEGORIES
from sp_dspy._errors import SpDspyError
from sp_dspy._metrics import (
    PolicyRecord,
    ResultSet,
    case_outcomes,
    read_result_files,
    resolve_records,
    score,
)
from sp_dspy._report import build_summary, write_html
from sp_dspy._report._cases import ViewedRun, cases_document
from sp_dspy._report._viewer import data_block, read_data_block
from sp_dspy.cli import app

FIXTURES = Path(__file__).parent / "fixtures" / "report"
PKU_FIXTURE = Path(__file__).parent / "fixtures" / "pku" / "rows.jsonl"
CASES = load_benchmark(None).cases
RUNS = ("official_per_policy.jsonl", "official_per_rule.jsonl", "smollm_per_policy.jsonl")


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    summary = build_summary(CASES, [(None, [FIXTURES / name]) for name in RUNS], n_boot=0)
    assert summary.cases_view is not None
    return summary.cases_view


def test_each_case_carries_each_runs_outcome_as_the_metrics_score_it(document: dict[str, Any]) -> None:
    assert [case["id"] for case in document["cases"]] == [case.id for case in CASES]
    assert [run["label"] for run in document["runs"]][1:] == [
        "gpt-4o-mini official-per-rule",
        "SmolLM2-135M-Instruct official-per-policy",
    ]
    for name, results in zip(RUNS, document["res"], strict=True):
        records = resolve_records(CASES, read_result_files([FIXTURES / name]))
        for outcome, result in zip(case_outcomes(CASES, records), results, strict=True):
            if result is None:
                assert outcome.id not in records
                continue
            code = (
                "e" if outcome.excluded else "x" if outcome.exact else "t" if any(outcome.hits[1:4]) else "w"
            )
            assert result["o"] == code, (name, outcome.id)
            if not outcome.excluded:
                assert result["p"] == sorted(outcome.pred)
            else:
                assert result["why"]


def test_exclusions_say_why() -> None:
    def why(**fields: Any) -> str | None:
        return PolicyRecord(id="x", **fields).exclusion()

    assert why(violated_rules=[1]) is None
    assert why(violated_rules=None, refused=True) == "refused"
    assert why(violated_rules=None, error="Boom", error_class="auth") == "error: auth"
    assert why(violated_rules=None, parse_failed=True) == "unparseable"
    assert why(violated_rules=None) == "no prediction"
    capped = PolicyRecord(id="x", violated_rules=[1], usage={"completion_tokens": 70_000})
    assert capped.exclusion() is None and capped.exclusion(cap_aware=True) == "output cap"


def test_error_types_add_up_to_the_reports_error_attribution(document: dict[str, Any]) -> None:
    for name, results in zip(RUNS, document["res"], strict=True):
        report = score(CASES, read_result_files([FIXTURES / name]), ci=False)
        counted: Counter[str] = Counter()
        for case, result in zip(document["cases"], results, strict=True):
            if result is None or result["o"] == "e":
                continue
            gold, pred = set(case["g"]), set(result["p"])
            assert {int(rule) for rule in result.get("et", {})} == gold ^ pred
            for rule, kind in result.get("et", {}).items():
                counted[("fp" if int(rule) in pred else "fn", kind)] += 1
        attribution = report.error_attribution["ALL"]
        expected = {(side, kind): n for side in ("fp", "fn") for kind, n in attribution[side].items() if n}
        assert dict(counted) == expected, name


def test_per_rule_runs_keep_each_judgment_and_failure_modes_show(document: dict[str, Any]) -> None:
    per_rule = document["res"][1]
    judged = next(result for result in per_rule if result and result.get("j"))
    assert all(verdict in (0, 1, None) for _, verdict, _ in judged["j"])
    assert document["modes"] is True and any(result and result.get("m") for result in per_rule)
    assert document["breakdown"] == "level" and document["facts"] == []
    # A regulatory framework is the case's text (opened with the case), not a column.
    l2 = next(case for case in document["cases"] if case["lv"] == "L2")
    assert "Regulatory Framework" in document["S"][l2["fw"]]


def test_texts_sit_once_in_the_string_table(document: dict[str, Any]) -> None:
    texts = document["S"]
    assert len(texts) == len(set(texts))
    # The three levels of a conversation share its text.
    assert len({case["cv"] for case in document["cases"]}) == len({case.conversation for case in CASES})


def test_the_data_block_cannot_end_the_script_or_open_a_comment() -> None:
    hostile = {"a": "</script><script>alert(1)</script>", "b": "<!-- x -->", "c": "&amp; \u2028"}
    block = data_block(hostile)
    assert re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", block)  # base64: no <, > or &
    assert read_data_block(block) == hostile
    # An answer cut inside an emoji (a lone surrogate) still writes as UTF-8 and reads back.
    cut = {"a": "x\ud83d y 🙂"}
    assert read_data_block(data_block(cut)) == cut


def test_the_page_stores_each_conversation_and_rule_text_once(tmp_path: Path) -> None:
    """A conversation's three levels share its text, and its L1 policy repeats its L0 rules: the
    page's data block holds each once, and gzip keeps it smaller than its JSON."""
    summary = build_summary(CASES, [(None, [FIXTURES / name]) for name in RUNS], n_boot=0)
    page = write_html(summary, tmp_path / "view.html", plots=[]).read_text(encoding="utf-8")
    found = re.search(r'<script type="application/gzip" id="sp-cases-data">([^<]*)</script>', page)
    assert found
    document = read_data_block(found.group(1))
    assert document == json.loads(json.dumps(summary.cases_view))
    texts = document["S"]
    cases = {case["id"]: case for case in document["cases"]}
    first = CASES[0].id.rsplit("-", 1)[0]
    levels = [cases[f"{first}-{level}"] for level in ("l0", "l1", "l2")]
    conversation = next(case.conversation for case in CASES if case.id == f"{first}-l0")
    assert texts.count(conversation) == 1 and {case["cv"] for case in levels} == {texts.index(conversation)}
    # The L1 policy's first rules are its L0 policy's: the same entries of the table.
    l0_rules, l1_rules = levels[0]["r"], levels[1]["r"]
    assert [rule[1] for rule in l1_rules[: len(l0_rules)]] == [rule[1] for rule in l0_rules]
    every_rule = [rule.text for case in CASES for rule in case.rubric.entries()]
    assert len(texts) < len(every_rule) and all(texts.count(text) == 1 for text in every_rule)
    assert len(found.group(1)) < len(json.dumps(document, ensure_ascii=False))


def test_pku_cases_show_their_label_severity_and_categories() -> None:
    cases = load_benchmark(str(PKU_FIXTURE), benchmark="pku-saferlhf").cases
    results = ResultSet(records={case.id: PolicyRecord(id=case.id, violated_rules=[]) for case in cases})
    run = ViewedRun("guard", "official-per-policy", results, dict(results.records), {})
    document = cases_document(cases, [run], kind=benchmark_kind("pku-saferlhf"), baseline="guard")
    assert document["facts"] == ["label", "severity", "categories"]
    assert document["breakdown"] == "none" and document["modes"] is False
    unsafe = next(case for case in cases if not case.safe)
    shown = document["cases"][cases.index(unsafe)]["f"]
    assert shown["label"] == ["unsafe"] and shown["severity"] == [str(unsafe.severity)]
    assert shown["categories"] == [
        PKU_CATEGORIES[rule - 1] for rule in sorted(unsafe.ground_truth_violations)
    ]
    safe = next(case for case in cases if case.safe)
    assert document["cases"][cases.index(safe)]["f"] == {"label": ["safe"], "severity": [str(safe.severity)]}


def test_view_writes_the_page_without_plots_and_opens_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda uri: opened.append(uri) or True)
    out = tmp_path / "view.html"
    files = [str(FIXTURES / name) for name in RUNS[:2]]
    result = CliRunner().invoke(
        app, ["view", *files, "--out", str(out), "--n-boot", "50", "--open"], env={"COLUMNS": "300"}
    )
    assert result.exit_code == 0, result.output
    assert f"Cases view of {len(CASES)} case(s) written to {out}" in result.output
    page = out.read_text(encoding="utf-8")
    assert 'id="sp-cases-data"' in page and "<img" not in page and "paired test p =" in page
    assert opened == [out.resolve().as_uri()] and "no web browser" not in result.output
    monkeypatch.setattr("webbrowser.open", lambda uri: False)  # a machine without a browser
    result = CliRunner().invoke(app, ["view", files[0], "--out", str(out), "--open"], env={"COLUMNS": "300"})
    assert (
        result.exit_code == 0 and f"note: no web browser found to open it; open {out} in one" in result.output
    )
    # The selection flags narrow the cases as they do for report.
    result = CliRunner().invoke(
        app, ["view", *files, "--out", str(out), "--limit", "5"], env={"COLUMNS": "300"}
    )
    assert result.exit_code == 0 and "Cases view of 5 case(s)" in result.output


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "/dev/zero: result file is a device or socket, not a regular file"),
        ("", "empty result file (no records to score)"),
        ("\n\n", "empty result file (no records to score)"),
        ('{"answer": "[]"}\n', "skipped"),  # its one line bad, --skip-bad-lines: nothing left
    ],
    ids=["device", "empty", "blank-lines", "no-valid-record"],
)
def test_view_and_report_refuse_what_they_cannot_show(tmp_path: Path, content: str | None, why: str) -> None:
    """As score does: no page of 100% excluded cases for a file without records, no "no such file" for a device."""
    path = "/dev/zero" if content is None else str(tmp_path / "results.jsonl")
    if content is not None:
        Path(path).write_text(content, encoding="utf-8")
    for command in ("view", "report"):
        args = [command, path, "--out", str(tmp_path / "page.html"), "--n-boot", "0", "--skip-bad-lines"]
        result = CliRunner().invoke(app, args)
        assert isinstance(result.exception, SpDspyError) and result.exception.exit_code == 2, result.output
        message = str(result.exception)
        assert (why in message) if why != "skipped" else ("no result records to show" in message), message
        assert not (tmp_path / "page.html").exists()
