"""``sp-dspy eval --program ARTIFACT``: no scoring on its own train/dev cases, no ignored --protocol."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sp_dspy import load_benchmark
from sp_dspy._data import make_split
from sp_dspy._errors import ConfigError
from sp_dspy.cli import app
from sp_dspy.programs import make_program, program_spec
from tests._results import iter_records

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("isolated_run")]

LOADED = load_benchmark()
SPLIT = make_split(LOADED.cases, seed=0, ratios=(0.25, 0.25, 0.5), dataset_hash=LOADED.content_hash)


def artifact(root: Path, protocol: str = "per-policy", *, split: bool = True) -> Path:
    """A compiled-artifact directory as ``compile`` writes it (program, manifest with its split)."""
    program: Any = make_program("dspy", protocol)
    out = root / f"guard-{protocol}"
    out.mkdir()
    program.save(str(out / "program.json"))
    manifest: dict[str, Any] = program_spec(program)
    if split:
        manifest["split"] = {"train": SPLIT.train, "dev": SPLIT.dev, "seed": 0}
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    SPLIT.save(out / "splits.json")
    return out


def invoke(out: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["eval", "--lm", "fake", "--output-dir", str(out), "-q", *args])


def test_an_artifact_on_its_train_or_dev_cases_is_refused_naming_the_overlap(tmp_path: Path) -> None:
    guard = artifact(tmp_path)
    result = invoke(tmp_path, "--program", str(guard), "--run-id", "leak")
    assert isinstance(result.exception, ConfigError), result.output
    message = str(result.exception)
    first_train = next(c.id for c in LOADED.cases if c.id in SPLIT.train or c.id in SPLIT.dev)
    assert f"overlap the artifact's train/dev split: {first_train} (in " in message
    assert f"{len(SPLIT.train) + len(SPLIT.dev)} of the 24 case(s)" in message
    assert "--allow-overlap" in message and "\n" not in message
    assert not (tmp_path / "results_leak_fake.jsonl").exists()  # refused before any call


def test_a_case_sharing_a_conversation_with_train_is_an_overlap(tmp_path: Path) -> None:
    guard = artifact(tmp_path)
    manifest = json.loads((guard / "manifest.json").read_text(encoding="utf-8"))
    leaked = SPLIT.train[0]
    manifest["split"]["train"] = [leaked]  # only one level of the conversation is in train
    manifest["split"]["dev"] = []
    (guard / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    sibling = next(c for c in LOADED.cases if c.conversation_id == leaked[:-3] and c.id != leaked)
    result = invoke(tmp_path, "--program", str(guard), "--run-id", "sib", "--limit", "24")
    assert isinstance(result.exception, ConfigError)
    assert f"{sibling.id} (conversation {sibling.conversation_id} in train)" in str(result.exception)


def test_the_test_part_runs_and_allow_overlap_scores_anyway(tmp_path: Path) -> None:
    guard = artifact(tmp_path)
    result = invoke(
        tmp_path, "--program", str(guard), "--split", f"{guard}/splits.json:test", "--run-id", "t"
    )
    assert result.exit_code == 0, (result.output, result.exception)
    assert {r["id"] for r in iter_records(tmp_path / "results_t_fake.jsonl")} == set(SPLIT.test)
    result = invoke(tmp_path, "--program", str(guard), "--allow-overlap", "--run-id", "all")
    assert result.exit_code == 0, (result.output, result.exception)
    assert len(list(iter_records(tmp_path / "results_all_fake.jsonl"))) == 24


def test_an_artifact_without_a_recorded_split_is_not_checked(tmp_path: Path) -> None:
    guard = artifact(tmp_path, split=False)
    result = invoke(tmp_path, "--program", str(guard), "--limit", "2", "--run-id", "n")
    assert result.exit_code == 0, (result.output, result.exception)


def test_a_protocol_that_contradicts_the_artifact_is_an_error(tmp_path: Path) -> None:
    guard = artifact(tmp_path, "per-rule")
    test_part = f"{guard}/splits.json:test"
    result = invoke(tmp_path, "--program", str(guard), "--split", test_part, "--protocol", "per-policy")
    assert isinstance(result.exception, ConfigError)
    assert str(result.exception) == (
        f"--protocol per-policy: the artifact {guard} is a per-rule program; "
        "drop --protocol (an artifact runs its own protocol)"
    )
    result = invoke(
        tmp_path, "--program", str(guard), "--split", test_part, "--protocol", "per-rule", "--run-id", "r"
    )
    assert result.exit_code == 0, (result.output, result.exception)
    manifest = json.loads((tmp_path / "manifest_r.json").read_text(encoding="utf-8"))
    assert manifest["settings"]["protocol"] == "per-rule"


def test_program_is_an_existing_artifact_directory_or_a_name(tmp_path: Path) -> None:
    result = invoke(tmp_path, "--program", str(tmp_path / "missing"), "--run-id", "m")
    assert isinstance(result.exception, ConfigError)
    assert str(result.exception) == (
        "--program: expected official, dspy, dspy-cot, dspy-severity, dspy-severity-cot, llama-guard, "
        "granite-guardian, shieldgemma, dynaguard, gpt-oss-safeguard or an "
        f"artifact directory, got '{tmp_path / 'missing'}'"
    )


def test_ablate_refuses_an_overlapping_artifact_variant_unless_allowed(tmp_path: Path) -> None:
    guard = artifact(tmp_path)
    args = ["ablate", "--lm", "fake", "--variants", str(guard), "-q"]
    refused = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "refused")])
    assert isinstance(refused.exception, ConfigError) and "--allow-overlap" in str(refused.exception)
    allowed = CliRunner().invoke(
        app, [*args, "--out", str(tmp_path / "allowed"), "--allow-overlap", "--n-boot", "0"]
    )
    assert allowed.exit_code == 0, (allowed.output, allowed.exception)
