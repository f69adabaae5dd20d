"""Programs on PKU-SafeRLHF cases: the official prompt, the explicit safe flag, the severity program.

Offline: the fixture rows written for this project and the in-process fake LM.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import dspy
import pytest

from sp_dspy._data import load_pku
from sp_dspy._data._pku_policy import PKU_POLICY
from sp_dspy._data._schema import Case
from sp_dspy._errors import ConfigError, DataError
from sp_dspy._lm import LMConfig, make_lm
from sp_dspy._lm._fake import FakeEngine
from sp_dspy._metrics import read_result_files
from sp_dspy._metrics_pku import score_pku_results
from sp_dspy._protocol import build_targets, per_policy_messages
from sp_dspy._runner._fake_gold import teach_fake
from sp_dspy._runner._records import policy_record
from sp_dspy.programs import (
    OfficialPerPolicy,
    PkuSeverityGuard,
    PkuSeverityGuardCoT,
    PolicyRecord,
    load_program,
    make_program,
    program_spec,
    run_case,
    severity_fields,
)

FIXTURE = Path(__file__).parent / "fixtures" / "pku" / "rows.jsonl"
CASES = load_pku(FIXTURE).cases
UNSAFE = next(case for case in CASES if len(case.ground_truth_violations) == 2)


def fake(behaviour: str = "oracle") -> tuple[dspy.LM, FakeEngine]:
    lm = make_lm(LMConfig(model=f"fake/{behaviour}", num_retries=0))
    assert isinstance(lm.engine, FakeEngine)
    teach_fake(lm, CASES)
    return lm, lm.engine


def record(case: Case, output: PolicyRecord) -> dict[str, Any]:
    return policy_record(case, 1, output, model="fake", run={}, latency_s=0.0).line()


def test_official_prompt_carries_the_19_rule_policy_and_the_exchange() -> None:
    system, user = (m["content"] for m in per_policy_messages(UNSAFE))
    assert PKU_POLICY in system and "\n19. The chatbot must not" in system
    assert UNSAFE.conversation in user and user.count("Turn 1 - ") == 2
    output = asyncio.run(run_case(make_program("official"), UNSAFE, fake()[0]))
    assert (output.parse_status, output.violated_rules) == ("clean", UNSAFE.ground_truth_violations)
    assert output.predicted_safe is None  # the official prompt asks for no label


def test_per_rule_protocol_judges_each_category_alone() -> None:
    targets = build_targets(UNSAFE)
    assert sorted(t.rule for t in targets) == list(range(1, 20))
    assert all(t.type == "decisive" and not t.context for t in targets)
    assert sorted(t.rule for t in targets if t.gold) == UNSAFE.ground_truth_violations


def test_an_official_label_is_the_explicit_safe_flag(tmp_path: Path) -> None:
    """A model that names a category but labels the response safe is scored safe on the binary task."""
    lm, engine = fake()
    engine.enqueue(json.dumps({"analysis": "x", "violated_rules": [{"rule": 8}], "label": "safe"}))
    output = OfficialPerPolicy().call_case(UNSAFE, lm)
    assert (output.violated_rules, output.predicted_safe) == ([8], True)
    line = record(UNSAFE, output)
    assert (line["predicted_label"], line["predicted_safe"]) == ("safe", True)
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    report = score_pku_results([UNSAFE], read_result_files([path]))
    assert (report.binary.fn, report.binary.tp) == (1, 0)  # the flag, not the set, decided
    assert report.categories.micro_precision == 100.0


def test_severity_program_answers_all_three_labels() -> None:
    lm, _ = fake()
    output = asyncio.run(run_case(make_program("dspy-severity"), UNSAFE, lm))
    assert output.violated_rules == UNSAFE.ground_truth_violations
    assert (output.predicted_safe, output.predicted_severity) == (False, 2)  # fake: severity = rules flagged
    safe = next(case for case in CASES if case.safe)
    output = asyncio.run(run_case(make_program("dspy-severity-cot"), safe, lm))
    assert (output.violated_rules, output.predicted_safe, output.predicted_severity) == ([], True, 0)
    line = record(safe, output)
    assert (line["predicted_safe"], line["predicted_severity"]) == (True, 0)


def test_a_severity_off_the_scale_is_dropped_not_clamped() -> None:
    lm, _ = fake("all")  # flags all 19 rules, so the fake's severity is 19
    output = asyncio.run(run_case(make_program("dspy-severity"), UNSAFE, lm))
    assert len(output.violated_rules or []) == 19
    assert (output.predicted_safe, output.predicted_severity) == (False, None)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"unsafe": True, "severity": 3}, {"predicted_safe": False, "predicted_severity": 3}),
        ({"unsafe": False, "severity": 0}, {"predicted_safe": True, "predicted_severity": 0}),
        ({"severity": 4}, {"predicted_severity": None}),
        ({"severity": True}, {"predicted_severity": None}),
        ({"unsafe": "yes"}, {}),
        ({"violated_rules": [1]}, {}),
    ],
)
def test_severity_fields(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    assert severity_fields(dspy.Prediction(**fields)) == expected


def test_registry_names_and_artifacts(tmp_path: Path) -> None:
    for name, cls in (("dspy-severity", PkuSeverityGuard), ("dspy-severity-cot", PkuSeverityGuardCoT)):
        program: Any = make_program(name)
        assert type(program) is cls
        assert program_spec(program) == {"program": name, "protocol": "per-policy"}
    with pytest.raises(ConfigError, match="per-policy only"):
        make_program("dspy-severity", "per-rule")
    program = make_program("dspy-severity")
    program.predict.signature = program.predict.signature.with_instructions("Grade harm carefully.")
    program.save(str(tmp_path / "program.json"))
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(program_spec(program)), encoding="utf-8")
    loaded: Any = load_program(tmp_path)
    assert type(loaded) is PkuSeverityGuard
    assert loaded.predict.signature.instructions == "Grade harm carefully."
    manifest.write_text(json.dumps({"program": "dspy-severity", "protocol": "per-rule"}), encoding="utf-8")
    with pytest.raises(DataError, match="per-policy only"):
        load_program(tmp_path)
