"""Programs by name, and compiled programs saved as JSON and loaded back safely."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import dspy
import pytest

from sp_dspy._data._scan import read_json_file
from sp_dspy._data._schema import Case
from sp_dspy._errors import ConfigError, DataError
from sp_dspy._lm import LMConfig, make_lm
from sp_dspy._lm._fake import FakeEngine
from sp_dspy.programs import (
    GUARD_PROGRAMS,
    JudgmentRecord,
    OfficialPerPolicy,
    PerPolicyGuard,
    PerPolicyGuardCoT,
    PerRuleGuard,
    PolicyRecord,
    Usage,
    aggregate_judgments,
    load_program,
    make_program,
    program_spec,
    resolve_program,
    run_case,
)
from sp_dspy.programs._registry import history_accounting
from tests._factories import raw_case

TUNED = "Check every rule against the chatbot's replies and list the violated ones."


def save_artifact(program: Any, directory: Path) -> Path:
    """What the compile step writes: DSPy's JSON state plus the manifest."""
    directory.mkdir(parents=True, exist_ok=True)
    program.save(str(directory / "program.json"))
    (directory / "manifest.json").write_text(json.dumps(program_spec(program)), encoding="utf-8")
    return directory


def tuned_program() -> Any:
    program = PerPolicyGuardCoT()
    predict = program.predict.predict
    predict.signature = predict.signature.with_instructions(TUNED)
    predict.demos = [
        dspy.Example(policy="1. Be kind.", conversation="Turn 1 - Chatbot: no.", violated_rules=[1])
    ]
    return program


@pytest.mark.parametrize(
    ("name", "protocol", "expected"),
    [
        ("official", "per-policy", OfficialPerPolicy),
        ("dspy", "per-policy", PerPolicyGuard),
        ("dspy", "per-rule", PerRuleGuard),
    ],
)
def test_make_program_by_name(name: str, protocol: str, expected: type[Any]) -> None:
    program = make_program(name, protocol)
    assert type(program) is expected
    assert program_spec(program) == {"program": name, "protocol": protocol}


@pytest.mark.parametrize(
    ("name", "protocol", "message"), [("gepa", "per-policy", "program"), ("dspy", "per-case", "protocol")]
)
def test_unknown_names_are_config_errors(name: str, protocol: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_program(name, protocol)


def test_resolve_program_a_path_is_always_an_artifact_a_string_only_when_the_directory_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    program, artifact = resolve_program("official")
    assert isinstance(program, OfficialPerPolicy) and artifact is None
    with pytest.raises(ConfigError, match=r"^program 'official': no such artifact directory$"):
        resolve_program(Path("official"))  # a Path never falls back to a program name
    save_artifact(tuned_program(), tmp_path / "official")
    for spec in ("official", Path("official")):  # an existing directory wins over the name
        program, artifact = resolve_program(spec)
        assert isinstance(program, PerPolicyGuardCoT) and artifact == Path("official")


def test_resolve_program_errors_name_the_cli_flags_or_the_api_arguments(tmp_path: Path) -> None:
    names = "official, dspy, dspy-cot, dspy-severity, dspy-severity-cot, " + ", ".join(GUARD_PROGRAMS)
    cases: list[tuple[Any, str | None, str, str]] = [
        (
            "gepa", None,
            f"--program: expected {names} or an artifact directory, got 'gepa'",
            f"program 'gepa': expected {names} or an artifact directory (no such directory)",
        ),
        (
            tmp_path / "none", None,
            f"--program '{tmp_path / 'none'}': no such artifact directory",
            f"program '{tmp_path / 'none'}': no such artifact directory",
        ),
        (
            save_artifact(make_program("dspy", "per-rule"), tmp_path / "rules"), "per-policy",
            f"--protocol per-policy: the artifact {tmp_path / 'rules'} is a per-rule program; "
            "drop --protocol (an artifact runs its own protocol)",
            f"{tmp_path / 'rules'}: the artifact is a per-rule program; protocol 'per-policy' does not apply",
        ),
    ]  # fmt: skip
    for spec, protocol, cli, api in cases:
        for flags, message in ((True, cli), (False, api)):
            with pytest.raises(ConfigError) as caught:
                resolve_program(spec, protocol, flags=flags)
            assert str(caught.value) == message


def test_resolve_program_configures_the_baseline_and_per_rule_concurrency(tmp_path: Path) -> None:
    official: Any = resolve_program(
        "official", "per-rule", parser="robust", constrained=True, layout="prefix", max_concurrency=3
    )[0]
    assert (official.mode, official.layout, official.max_concurrency) == ("robust", "prefix", 3)
    assert "response_format" in official.extra
    artifact = save_artifact(make_program("dspy", "per-rule"), tmp_path / "rules")
    loaded: Any = resolve_program(str(artifact), max_concurrency=2)[0]
    assert (loaded.protocol, loaded.max_concurrency) == ("per-rule", 2)
    assert resolve_program("dspy", max_concurrency=2)[0].protocol == "per-policy"  # no option per-policy


def test_saved_program_loads_back_with_what_was_learned(tmp_path: Path) -> None:
    artifact = save_artifact(tuned_program(), tmp_path / "run")
    loaded = load_program(artifact)
    assert isinstance(loaded, PerPolicyGuardCoT)
    predict = loaded.predict.predict
    assert predict.signature.instructions == TUNED
    assert [dict(d) for d in predict.demos] == [
        {"policy": "1. Be kind.", "conversation": "Turn 1 - Chatbot: no.", "violated_rules": [1]}
    ]
    assert list(predict.signature.output_fields) == ["reasoning", "violated_rules"]


def test_loaded_program_runs_and_its_instruction_reaches_the_lm(tmp_path: Path) -> None:
    case = Case.model_validate(raw_case(gt=[1, 3]))
    lm = make_lm(LMConfig(model="fake/instructed", num_retries=0))
    engine = lm.engine
    assert isinstance(engine, FakeEngine)
    engine.register_case((case.policy, case.conversation), case.ground_truth_violations)
    untuned = asyncio.run(run_case(PerPolicyGuardCoT(), case, lm))
    tuned = asyncio.run(run_case(load_program(save_artifact(tuned_program(), tmp_path)), case, lm))
    assert (untuned.violated_rules, tuned.violated_rules) == ([1], [1, 3])


def test_loading_ignores_a_saved_lm_and_rejects_unknown_state_keys(tmp_path: Path) -> None:
    artifact = save_artifact(PerPolicyGuard(), tmp_path)
    state_path = artifact / "program.json"
    state = json.loads(state_path.read_text())
    state["predict"]["lm"] = {"model": "openai/gpt-4o", "api_base": "http://attacker.invalid"}
    state_path.write_text(json.dumps(state))
    assert load_program(artifact).predict.lm is None

    # Predict.load_state would set any extra key as an attribute, e.g. LM call settings.
    state["predict"]["config"] = {"api_base": "http://attacker.invalid"}
    state_path.write_text(json.dumps(state))
    with pytest.raises(DataError, match=r"predictor 'predict', field 'config'"):
        load_program(artifact)


@pytest.mark.parametrize(
    ("manifest", "state", "message"),
    [
        ({"program": "dspy", "protocol": "per-rule"}, None, "no state for predictor 'judge'"),
        ({"program": "official", "protocol": "per-policy"}, None, "field 'program'"),
        ({"program": "dspy", "protocol": "per-case"}, None, "field 'protocol'"),
        ({"program": "dspy", "protocol": "per-policy"}, "not json", "invalid JSON"),
    ],
)
def test_bad_artifacts_are_one_line_data_errors(
    tmp_path: Path, manifest: dict[str, str], state: str | None, message: str
) -> None:
    artifact = save_artifact(PerPolicyGuard(), tmp_path)
    (artifact / "manifest.json").write_text(json.dumps(manifest))
    if state is not None:
        (artifact / "program.json").write_text(state)
    with pytest.raises(DataError, match=message) as caught:
        load_program(artifact)
    assert "\n" not in str(caught.value)


def test_missing_artifact_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"manifest\.json: cannot read"):
        load_program(tmp_path)


def test_a_case_answer_round_trips_through_its_result_line() -> None:
    judgment = JudgmentRecord(
        cid="a-l0", rule=2, rule_type="decisive", gt=True, pred=True, parse_status="clean"
    )
    output = PolicyRecord(
        id="a-l0",
        violated_rules=[2],
        parse_status="clean",
        usage=Usage(prompt_tokens=3, completion_tokens=2, total_tokens=5),
        judgments=[judgment],
        protocol="per-rule",
        layout="official",
    )
    line = output.model_dump_json(exclude_unset=True)
    assert list(json.loads(line))[:2] == ["id", "violated_rules"]  # a line starts with its kind's fields
    assert PolicyRecord.model_validate_json(line) == output.model_copy(update={"judgments": None})
    assert JudgmentRecord.model_validate_json(judgment.model_dump_json(exclude_unset=True)) == judgment


def test_aggregation_rules() -> None:
    def judgment(rule: int, status: str, pred: bool | None) -> JudgmentRecord:
        return JudgmentRecord(cid="c", rule=rule, rule_type="decisive", pred=pred, parse_status=status)  # type: ignore[arg-type]

    assert aggregate_judgments([]) == (None, "failed")
    assert aggregate_judgments([judgment(1, "refused", None), judgment(2, "error", None)]) == (None, "error")
    assert aggregate_judgments([judgment(3, "clean", True), judgment(1, "clean", True)]) == ([1, 3], "clean")
    assert aggregate_judgments([judgment(1, "failed", None), judgment(2, "clean", True)]) == (
        [2],
        "recovered",
    )


def test_history_accounting_counts_a_cached_answer_like_a_fresh_one() -> None:
    fresh = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}

    class Recorded:
        history: ClassVar[list[dict[str, Any]]] = [
            {"usage": fresh, "cost": 0.25, "response": {"usage": fresh}},
            # A cache hit: DSPy empties its usage, keeps the original call's cost and the response.
            {"usage": {}, "cost": 0.25, "response": {"usage": fresh}},
            {"usage": {"prompt_tokens": 5, "completion_tokens": 1}, "cost": None},
        ]

    usage, hits, batched = history_accounting(Recorded())
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (25, 5, 30)
    assert (usage.cost, hits, batched) == (0.5, 1, 0)
    assert history_accounting(object()) == (Usage(), 0, 0)


def test_importing_programs_and_running_the_baseline_setup_does_not_import_dspy() -> None:
    code = (
        "import sys, programs; programs.make_program('official', 'per-rule'); programs.PolicyRecord; "
        "assert 'dspy' not in sys.modules and 'litellm' not in sys.modules"
    )
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True, timeout=60)


def _guard_load(artifact: Path) -> Any:
    from sp_dspy import Guard

    return Guard.load(artifact, lm="fake")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("load", [load_program, _guard_load])
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda p: p.write_text("[" * 5000 + "]" * 5000),
            r"1: invalid JSON: arrays and objects nested more than 500",
        ),
        (lambda p: p.write_bytes(b'{"predict": "\xff"}'), r"1:14: not UTF-8 \(byte 0xff\)"),
        (lambda p: os.mkfifo(p), r" artifact program state is a FIFO, not a regular file$"),
        (
            lambda p: p.symlink_to("/dev/zero"),
            r" artifact program state is a device or socket, not a regular file$",
        ),
        (lambda p: p.mkdir(), r" artifact program state is a directory, not a regular file$"),
    ],
)
def test_program_json_must_be_a_regular_bounded_json_file(
    tmp_path: Path, load: Any, make: Any, message: str
) -> None:
    artifact = save_artifact(PerPolicyGuard(), tmp_path / "artifact")
    state = artifact / "program.json"
    state.unlink()
    make(state)
    with pytest.raises(DataError, match=rf"^{re.escape(str(state))}:?{message}") as info:
        load(artifact)
    assert "\n" not in str(info.value)


def test_an_oversized_json_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "program.json"
    path.write_text(json.dumps({"predict": {"demos": ["x" * 100]}}))
    assert read_json_file(path, "artifact program state", max_bytes=200) == {
        "predict": {"demos": ["x" * 100]}
    }
    with pytest.raises(DataError) as info:
        read_json_file(path, "artifact program state", max_bytes=100)
    assert str(info.value) == f"{path}: artifact program state is larger than 100 bytes, the most it may be"


def test_an_artifact_of_another_kind_or_with_a_foreign_predictor_is_refused(tmp_path: Path) -> None:
    """``load_state`` would skip a predictor the program lacks: a half-loaded guard, never said."""
    artifact = save_artifact(PerPolicyGuard(), tmp_path)
    state = json.loads((artifact / "program.json").read_text())
    (artifact / "program.json").write_text(json.dumps({**state, "extra.predict": state["predict"]}))
    with pytest.raises(
        DataError, match=r"predictor 'extra\.predict' is not one of a dspy per-policy program"
    ):
        load_program(artifact)
    (artifact / "program.json").write_text(json.dumps(state))
    manifest = json.loads((artifact / "manifest.json").read_text())
    assert load_program(artifact) is not None  # DSPy's own "metadata" block is not a predictor
    (artifact / "manifest.json").write_text(json.dumps({**manifest, "kind": "sp-dspy-run"}))
    with pytest.raises(DataError, match=r"field 'kind' is 'sp-dspy-run', expected 'sp-dspy-compiled-guard'"):
        load_program(artifact)
