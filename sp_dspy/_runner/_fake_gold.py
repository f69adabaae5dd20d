"""Teach ``--lm fake`` the gold answers of a run's cases (under text in each of their prompts): an oracle."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._data import Case
from .._lm import fake_engine
from .._protocol import build_targets


def teach_fake(lm: Any, cases: Iterable[Case]) -> None:
    """Register gold answers on ``lm`` when it runs the fake engine (else nothing)."""
    engine = fake_engine(lm)
    if engine is None:
        return
    for case in cases:
        engine.register_case((case.policy, case.conversation), case.ground_truth_violations)
        for target in build_targets(case):
            key = [case.conversation, f"Rule {target.rule}: {target.text}"]
            key += [f"- Rule {e.rule} ({e.type}): {e.text}" for e in target.context]
            engine.register_case(key, [target.rule] if target.gold else [])
