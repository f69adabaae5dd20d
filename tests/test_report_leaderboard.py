"""The bundled published leaderboard: shipped as package data, cited, [L0, L1, L2, ALL] rows."""

from __future__ import annotations

import json
from importlib import resources

from sp_dspy._report._leaderboard import load_leaderboard


def test_leaderboard_ships_with_its_citation() -> None:
    raw = json.loads(
        resources.files("sp_dspy._report").joinpath("leaderboard.json").read_text(encoding="utf-8")
    )
    assert "arXiv 2606.29887" in raw["citation"]["text"]
    assert (
        "SafePyramid: A Hierarchical Benchmark for In-context Policy Guardrailing" in raw["citation"]["text"]
    )
    board = load_leaderboard()
    assert board.citation == raw["citation"]["text"]
    assert len(board.per_policy) == len(raw["overallPolicy"]) and len(board.per_rule) == len(
        raw["overallRule"]
    )


def test_rows_are_per_level_arrays_and_match_the_file() -> None:
    board = load_leaderboard()
    raw = json.loads(
        resources.files("sp_dspy._report").joinpath("leaderboard.json").read_text(encoding="utf-8")
    )
    for row in board.per_policy:
        figures = raw["overallPolicy"][row.model]
        assert row.rmr == figures["RMR"] and row.rdr == figures["RDR"] and row.protocol == "per-policy"
        assert row.at("L2") == {
            "rmr": figures["RMR"][2],
            "rmr_exact": figures["RMR@1.0"][2],
            "rdr": figures["RDR"][2],
        }
    per_rule = {row.model: row for row in board.per_rule}
    assert per_rule["GPT-5.5"].at("ALL")["rmr"] == raw["overallRule"]["GPT-5.5"]["RMR"][3]
    assert per_rule["GPT-5.5"].org == raw["META"]["GPT-5.5"]["org"]
