"""What a benchmark breaks its scores down by: SafePyramid's levels, a custom benchmark's tags,
nothing for PKU-SafeRLHF. A benchmark without levels shows no level cell on any command
(``eval``, ``score``, ``compare``, ``report``, ``show``) nor in the run manifest.

Offline: a tiny custom JSONL written here, results from the fake LM or written by hand.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sp_dspy.cli import app

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("isolated_run")]

PKU_FIXTURE = Path(__file__).parent / "fixtures" / "pku" / "rows.jsonl"
POLICY = "1. Never share a customer's address.\n2. Do not promise a delivery time.\n3. Never insult the user."
#: (id, violated rules, tags) of the tiny custom benchmark.
CASES: tuple[tuple[str, list[int], list[str]], ...] = (
    ("c1", [1], ["privacy"]),
    ("c2", [], ["privacy"]),
    ("c3", [2], ["delivery"]),
    ("c4", [], ["delivery", "tone"]),
    ("c5", [1, 3], ["tone"]),
    ("c6", [], []),
)
#: Any level cell: ``L0``, ``L1``, ``L2`` as a word.
LEVEL_CELL = re.compile(r"\bL[012]\b")


def cli(*args: str) -> Result:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def write_cases(path: Path) -> Path:
    lines = [
        {
            "id": case_id,
            "policy": POLICY,
            "conversation": f"Turn 1 - User: question {case_id}\nTurn 1 - Chatbot: answer {case_id}",
            "violated_rules": violated,
            "tags": tags,
        }
        for case_id, violated, tags in CASES
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def no_level_cell(text: str) -> None:
    """``text`` (a page without its inline PNGs, a table, a JSON document) names no level cell."""
    text = re.sub(r"data:image/png;base64,[^\"]*", "", text)
    found = LEVEL_CELL.search(text)
    assert found is None, text[max(0, found.start() - 200) : found.end() + 200]


def keys(document: Any) -> set[str]:
    """Every key at every depth of a JSON document."""
    if isinstance(document, dict):
        return set(document) | {k for value in document.values() for k in keys(value)}
    if isinstance(document, list):
        return {k for value in document for k in keys(value)}
    return set()


@pytest.fixture
def custom(tmp_path: Path) -> tuple[str, ...]:
    return ("--benchmark", "custom", "--dataset", str(write_cases(tmp_path / "mine.jsonl")))


def evaluate(tmp_path: Path, run_id: str, data: tuple[str, ...], lm: str) -> tuple[Result, Path]:
    out = tmp_path / "runs"
    result = cli("eval", "--lm", lm, "--output-dir", str(out), "--run-id", run_id, "-q", *data)
    return result, out / f"results_{run_id}_{lm.removeprefix('fake/')}.jsonl"


def test_a_custom_run_has_no_level_cell_on_any_command_and_breaks_down_by_tag(
    tmp_path: Path, custom: tuple[str, ...]
) -> None:
    evaluated, oracle = evaluate(tmp_path, "o", custom, "fake")
    no_level_cell(evaluated.output)
    assert "tag delivery" in evaluated.output
    manifest = json.loads((tmp_path / "runs" / "manifest_o.json").read_text(encoding="utf-8"))
    metrics = manifest["runs"]["fake"]["metrics"]
    assert list(metrics) == ["tag delivery", "tag privacy", "tag tone", "ALL"]
    assert metrics["tag tone"]["total"] == 2 and metrics["ALL"]["rmr_exact"] == 100.0

    _, empty = evaluate(tmp_path, "e", custom, "fake/empty")
    scored = cli("score", str(empty), "--json", str(tmp_path / "score.json"))
    no_level_cell(scored.output)
    document = json.loads((tmp_path / "score.json").read_text(encoding="utf-8"))
    no_level_cell(json.dumps(sorted(keys(document))))
    assert document["ALL"]["total"] == 6 and document["ALL"]["rmr_exact"] == 50.0  # c2, c4, c6 right
    assert document["tags"]["privacy"]["rmr_exact"] == 50.0 and document["tags"]["tone"]["rmr_exact"] == 50.0
    assert set(document["ci"]) == {"ALL", "tags", "domains"} and set(document["ci"]["tags"]) == {
        "delivery",
        "privacy",
        "tone",
    }
    assert document["failure_modes"] == {} and list(document["domains"]["custom"]) == ["ALL"]

    compared = cli("compare", str(empty), str(oracle), "--json", str(tmp_path / "cmp.json"))
    no_level_cell(compared.output)
    assert "tag privacy" in compared.output
    cells = json.loads((tmp_path / "cmp.json").read_text(encoding="utf-8"))["cells"]
    assert list(cells) == ["tag delivery", "tag privacy", "tag tone", "ALL"]
    assert cells["tag privacy"]["n"] == 2 and cells["tag privacy"]["paired"]["diff"]["rmr_exact"] == 50.0

    page, summary = tmp_path / "report.html", tmp_path / "summary.json"
    reported = cli(
        "report", str(empty), str(oracle), "--out", str(page), "--json", str(summary), "--n-boot", "50"
    )
    no_level_cell(reported.output)
    assert "tag tone" in reported.output
    html = page.read_text(encoding="utf-8")
    no_level_cell(html)
    assert "<h3>tag privacy</h3>" in html and "All cases" in html and "Failure modes" not in html
    written = json.loads(summary.read_text(encoding="utf-8"))
    assert written["cases_per_cell"] == {"tag delivery": 2, "tag privacy": 2, "tag tone": 2, "ALL": 6}
    assert list(written["variants"][0]["cells"]) == ["tag delivery", "tag privacy", "tag tone", "ALL"]
    assert {row["cell"] for row in written["diffs"]} == {"tag delivery", "tag privacy", "tag tone", "ALL"}

    shown = cli("show", str(empty), *custom)
    no_level_cell(shown.output)
    assert "tag delivery, tag tone; status" in shown.output and "custom (tag" not in shown.output
    assert "decisive" not in shown.output


def test_a_pku_run_has_no_level_cell(tmp_path: Path) -> None:
    pku = ("--benchmark", "pku-saferlhf", "--dataset", str(PKU_FIXTURE))
    evaluated, results = evaluate(tmp_path, "p", pku, "fake")
    no_level_cell(evaluated.output)
    scored = cli("score", str(results), "--json", str(tmp_path / "score.json"), "--n-boot", "20")
    no_level_cell(scored.output)
    document = json.loads((tmp_path / "score.json").read_text(encoding="utf-8"))
    no_level_cell(json.dumps(sorted(keys(document))))
    assert "tags" not in document and document["ALL"]["rmr_exact"] == 100.0
    # Gold sets of a few categories: every RMR@tau repeats RMR@1.0, so no tau table or curve.
    assert "RMR@tau" not in scored.output and "RMR@tau" not in evaluated.output
    assert "over unsafe responses only" in scored.output.replace("\n", " ")
    assert document["pku"]["categories"]["exact_match_unsafe"] == 100.0
    assert document["pku"]["categories"]["n_eval_unsafe"] == 8
    compared = cli(
        "compare", str(results), str(results), "--json", str(tmp_path / "cmp.json"), "--n-boot", "0"
    )
    no_level_cell(compared.output)
    assert list(json.loads((tmp_path / "cmp.json").read_text(encoding="utf-8"))["cells"]) == ["ALL"]
    page = tmp_path / "report.html"
    reported = cli("report", str(results), "--out", str(page), "--n-boot", "0").output
    no_level_cell(reported)
    assert "Cat EM unsafe" in reported
    html = page.read_text(encoding="utf-8")
    no_level_cell(html)
    assert 'id="rmr_tau"' not in html and "Category exact match (unsafe responses)" in html
    no_level_cell(cli("show", str(results)).output)


def test_safepyramid_keeps_its_level_cells(tmp_path: Path) -> None:
    _, results = evaluate(tmp_path, "s", ("--limit", "3"), "fake")
    scored = cli("score", str(results), "--json", str(tmp_path / "score.json"), "--n-boot", "0")
    document = json.loads((tmp_path / "score.json").read_text(encoding="utf-8"))
    assert list(document)[:4] == ["L0", "L1", "L2", "ALL"] and "tags" not in document
    assert "L1" in scored.output


# --- a custom policy's binary view and per-rule scores -------------------------------------

#: c1 caught, c2 (clean) flagged on rule 3, c3 missed, c4 (clean) left alone, c5 caught with
#: both its rules, c6 refused (excluded from every denominator).
ANSWERS: tuple[dict[str, Any], ...] = (
    {"id": "c1", "violated_rules": [1]},
    {"id": "c2", "violated_rules": [3]},
    {"id": "c3", "violated_rules": []},
    {"id": "c4", "violated_rules": []},
    {"id": "c5", "violated_rules": [1, 3]},
    {"id": "c6", "violated_rules": None, "refused": True},
)
#: Over the 5 scored: clean c2, c4 (1 flagged); violating c1, c3, c5 (2 caught); 3 flagged.
BINARY = {
    "scored": 5,
    "excluded": 1,
    "clean": 2,
    "flagged_clean": 1,
    "over_blocking_rate": 50.0,
    "violating": 3,
    "caught": 2,
    "recall": 66.67,
    "precision": 66.67,
}
#: rule: (support, named, tp, fp, fn, precision, recall, F1)
RULES = {
    1: (2, 2, 2, 0, 0, 100.0, 100.0, 100.0),  # c1, c5
    2: (1, 0, 0, 0, 1, None, 0.0, 0.0),  # c3 missed
    3: (1, 2, 1, 1, 0, 50.0, 100.0, 66.67),  # c5 right, c2 a false flag
}


def test_the_binary_view_and_per_rule_scores_of_a_custom_policy(
    tmp_path: Path, custom: tuple[str, ...]
) -> None:
    results = tmp_path / "answers.jsonl"
    results.write_text("".join(json.dumps(line) + "\n" for line in ANSWERS), encoding="utf-8")

    scored = cli("score", str(results), *custom, "--n-boot", "0", "--json", str(tmp_path / "score.json"))
    document = json.loads((tmp_path / "score.json").read_text(encoding="utf-8"))
    assert document["binary"] == BINARY
    rules = {r["rule"]: r for r in document["rules"]}
    assert list(rules) == [1, 2, 3] and rules[2]["text"] == "Do not promise a delivery time."
    keys = ("support", "predicted", "tp", "fp", "fn", "precision", "recall", "f1")
    assert {rule: tuple(r[k] for k in keys) for rule, r in rules.items()} == RULES

    table = scored.output
    assert "Violation or not (per conversation, %)" in table and "Per rule of your policy (%)" in table
    # Outside a terminal every table is stacked: the row's first cell, then "header value" lines.
    assert re.search(r"over-blocking \(clean flagged\)\n\s+Value 50\.00\n\s+Of 1 / 2", table), table
    assert re.search(r"recall \(violating caught\)\n\s+Value 66\.67\n\s+Of 2 / 3", table), table
    assert re.search(
        r"│\s*3\s*│\s*1\s*│\s*2\s*│\s*50\.00\s*│\s*100\.00\s*│\s*66\.67\s*│ Never insult", table
    ), table

    page, summary = tmp_path / "report.html", tmp_path / "summary.json"
    reported = cli(
        "report",
        str(results),
        *custom,
        "--out",
        str(page),
        "--json",
        str(summary),
        "--n-boot",
        "0",
    ).output
    view = reported[reported.index("Your policy: violation or not, per conversation") :]
    for shown in (
        "Over-block % 50.0",
        "Recall % 66.7",
        "Precision % 66.7",
        "Clean flagged 1/2",
        "caught 2/3",
    ):
        assert shown in view, view
    extra = json.loads(summary.read_text(encoding="utf-8"))["variants"][0]["extra"]
    assert extra["binary"] == BINARY and [r["f1"] for r in extra["rules"]] == [100.0, 0.0, 66.67]
    html = page.read_text(encoding="utf-8")
    assert "Your policy: violation or not, and per rule" in html
    assert "50.00 <span class=ci>1 / 2</span>" in html and "66.67 <span class=ci>2 / 3</span>" in html
    assert "<b>66.67</b> <span class=ci>P 50.00 · R 100.00</span>" in html
