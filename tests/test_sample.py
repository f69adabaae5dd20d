"""The bundled sample is what a new user sees first: check it is a faithful miniature."""

from __future__ import annotations

import re
from collections import Counter

from sp_dspy import load_benchmark
from sp_dspy._data import Case


def _cases() -> list[Case]:
    return load_benchmark().cases


def test_shape_matches_the_issue() -> None:
    cases = _cases()
    assert len(cases) >= 24
    groups = Counter(c.conversation_id for c in cases)
    assert len(groups) >= 8 and set(groups.values()) == {3}
    assert len({c.domain for c in cases}) >= 5
    for case in cases:
        turns = {int(n) for n in re.findall(r"^Turn (\d+) - (?:User|Chatbot):", case.conversation, re.M)}
        assert 8 <= len(turns) <= 14, case.id


def test_levels_share_a_conversation_and_differ_in_ground_truth() -> None:
    by_group: dict[str, list[Case]] = {}
    for case in _cases():
        by_group.setdefault(case.conversation_id, []).append(case)
    for group in by_group.values():
        assert sorted(c.level for c in group) == ["L0", "L1", "L2"]
        assert len({c.conversation for c in group}) == 1
        assert len({tuple(c.ground_truth_violations) for c in group}) > 1


def test_rule_types_and_interactions_are_consistent() -> None:
    seen_types: set[str] = set()
    for case in _cases():
        rubric = case.rubric.by_rule()
        seen_types |= {e.type for e in rubric.values()}
        gt = set(case.ground_truth_violations)
        fm = case.failure_mode_metadata
        assert sorted(gt) == sorted(e.rule for e in case.rubric.violations)
        assert set(fm.distractor_rules) == {n for n, e in rubric.items() if e.type == "distractor"}
        assert not set(fm.distractor_rules) & gt
        assert not set(fm.waived_rules) & gt, case.id
        assert set(fm.contradicted_rules) <= gt, case.id
        for entry in rubric.values():
            if entry.type in ("exception", "conditional"):
                assert entry.paired_with and set(entry.paired_with) <= set(rubric), (case.id, entry.rule)
        if case.level == "L0":
            assert {e.type for e in rubric.values()} <= {"decisive", "distractor"}
            assert case.framework == ""
        else:
            assert fm.waived_rules and fm.contradicted_rules, case.id
        if case.level == "L2":
            assert case.framework.startswith("## Regulatory Framework:")
            assert case.framework in case.policy
    assert seen_types == {"decisive", "distractor", "exception", "conditional"}
