"""``score()`` as a whole: the JSON document, unknown ids and the console tables."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from sp_dspy._data._schema import Case
from sp_dspy._metrics import PolicyRecord, read_result_files, render_score_table, score
from tests._factories import raw_case

REFERENCE_KEYS = {
    "total",
    "excluded",
    "n_eval",
    "rmr_exact",
    "rmr_avg",
    "rdr",
    "refusal",
    "rmr_tau_10",
    "rmr_tau_9",
    "rmr_tau_8",
    "rmr_tau_7",
    "rmr_tau_6",
    "rmr_tau_5",
}


def make_case(cid: str, gt: list[int], level: str, domain: str = "privacy") -> Case:
    return Case.model_validate(raw_case(cid, level=level, domain=domain, gt=gt))


CASES = [
    make_case("a-l0", [1], "L0"),
    make_case("b-l1", [1, 2], "L1", domain="fraud"),
    make_case("c-l2", [], "L2"),
]
RECORDS = {
    "a-l0": PolicyRecord(id="a-l0", violated_rules=[1]),
    "b-l1": PolicyRecord(id="b-l1", violated_rules=[2, 3]),
    "c-l2": PolicyRecord(id="c-l2", violated_rules=None, parse_failed=True),
    "ghost-l0": PolicyRecord(id="ghost-l0", violated_rules=[]),
    "other-level-l1": PolicyRecord(id="other-level-l1", violated_rules=[]),
}


def test_json_document_shape() -> None:
    report = score(CASES, RECORDS, n_boot=50, seed=7, all_ids=["other-level-l1"])
    document = json.loads(json.dumps(report.to_json_dict()))
    assert list(document)[:4] == ["L0", "L1", "L2", "ALL"]
    for name in ("L0", "L1", "L2", "ALL"):
        assert set(document[name]) >= REFERENCE_KEYS
        assert "per_rule_refusal_rate" not in document[name]
    assert document["ALL"]["rmr_exact"] == 50.0
    assert document["L2"]["rmr_avg"] is None
    assert document["unknown_ids"] == {"count": 1, "examples": ["ghost-l0"]}
    assert document["bad_lines"] == 0
    assert document["bootstrap"] == {"n_boot": 50, "seed": 7, "level": 0.95, "unit": "conversation"}
    assert set(document["domains"]) == {"fraud", "privacy"}
    assert document["failure_modes"]["L1"]["FM-V1"]["count"] == 1
    assert document["error_attribution"]["ALL"]["fp"]["decisive"] == 1
    assert document["ci"]["ALL"]["rmr_exact"][0] <= 50.0 <= document["ci"]["ALL"]["rmr_exact"][1]
    assert "per_rule" not in document
    assert document["mode"] == "per_policy" and document["cap_aware"] is False


def test_bad_lines_reach_the_report(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "a-l0", "violated_rules": [1]}\n{broken\n', encoding="utf-8")
    report = score(CASES, read_result_files([path], skip_bad_lines=True), ci=False)
    assert report.bad_lines == 1
    assert report.cells["L0"]["rmr_exact"] == 100.0


def test_tables_render_every_section() -> None:
    report = score(CASES, RECORDS, n_boot=20)
    tables = render_score_table(report)
    titles = [str(t.title) for t in tables]
    assert titles[0] == "Per-policy metrics"
    assert "Per-domain RMR" in titles
    console = Console(width=200, record=True)
    for table in tables:
        console.print(table)
    text = console.export_text()
    assert "50.00" in text  # the pooled exact match
    assert "FM-C3" in text
    assert "n/a" in text  # FM-C1 does not exist at L0
