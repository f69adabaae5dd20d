"""Ablation plans and variants: names, artifact directories, plan files, and when OUTDIR may be reused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sp_dspy._ablate import build_plan, read_plan_file
from sp_dspy._ablate._plan import AblationPlan, reconcile, save_plan
from sp_dspy._ablate._variants import DEFAULT_VARIANTS, resolve_variants
from sp_dspy._errors import ConfigError
from sp_dspy._lm import LMConfig
from sp_dspy._runner import DataSelection

LM = LMConfig(model="fake/random", cache=False)


def one_line(error: pytest.ExceptionInfo[ConfigError]) -> str:
    text = str(error.value)
    assert "\n" not in text
    return text


def artifact(directory: Path, manifest: object) -> Path:
    directory.mkdir(parents=True)
    (directory / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return directory


def test_named_variants_fix_program_protocol_and_layout() -> None:
    rows = resolve_variants([*DEFAULT_VARIANTS, "official-per-rule-prefix", "dspy-cot-per-rule"])
    assert [(v.program, v.protocol, v.layout) for v in rows] == [
        ("official", "per-policy", "official"),
        ("official", "per-rule", "official"),
        ("dspy", "per-policy", "official"),
        ("dspy", "per-rule", "official"),
        ("official", "per-rule", "prefix"),
        ("dspy-cot", "per-rule", "official"),
    ]


def test_artifact_directories_take_protocol_from_manifest_and_unique_labels(tmp_path: Path) -> None:
    clash = artifact(tmp_path / "dspy-per-rule", {"program": "dspy", "protocol": "per-rule"})
    other = artifact(tmp_path / "x" / "dspy-per-rule", {"program": "dspy-cot", "protocol": "per-policy"})
    rows = resolve_variants(["dspy-per-rule", str(clash), str(other)])
    assert [(v.label, v.protocol, v.artifact) for v in rows] == [
        ("dspy-per-rule", "per-rule", False),
        ("dspy-per-rule-2", "per-rule", True),
        ("dspy-per-rule-3", "per-policy", True),
    ]
    assert rows[1].program == str(clash.resolve())


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        (
            ["official-per-policy", "per-rule"],
            "unknown variant 'per-rule'; expected one of official-per-policy",
        ),
        (["dspy-per-rule", "dspy-per-rule"], "dspy-per-rule is listed twice"),
    ],
)
def test_bad_variant_names_are_one_line_errors(specs: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        resolve_variants(specs)
    assert message in one_line(error)


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (None, "not a compiled artifact (no manifest.json)"),
        ({"program": "official", "protocol": "per-rule"}, "field 'program' is 'official'"),
        ({"program": "dspy", "protocol": "sideways"}, "field 'protocol' is 'sideways'"),
    ],
)
def test_a_directory_that_is_not_an_artifact_is_a_one_line_error(
    tmp_path: Path, manifest: object, message: str
) -> None:
    folder = tmp_path / "not-an-artifact"
    if manifest is None:
        folder.mkdir()
    else:
        artifact(folder, manifest)
    with pytest.raises(ConfigError) as error:
        resolve_variants([str(folder)])
    assert message in one_line(error) and "not-an-artifact" in str(error.value)


def test_plan_settings_validate_with_the_field_named() -> None:
    plan = build_plan({"lm": LM.model_dump(), "variants": "official-per-policy, dspy-per-rule"})
    assert plan.variants == ["official-per-policy", "dspy-per-rule"]
    assert plan.data.benchmark == "safepyramid" and plan.n_boot == 1000
    with pytest.raises(ConfigError) as error:
        build_plan({"lm": LM.model_dump(), "variants": "a,,b"}, "plan.yaml")
    assert one_line(error) == "plan.yaml: field variants: empty variant name (check the commas)"
    with pytest.raises(ConfigError, match=r"^flags: field data\.limit: "):
        build_plan({"lm": LM.model_dump(), "data": {"limit": -1}})
    with pytest.raises(ConfigError, match=r"^flags: field colour: "):
        build_plan({"lm": LM.model_dump(), "colour": "blue"})


def test_plan_files_report_the_line_of_a_yaml_error(tmp_path: Path) -> None:
    bad = tmp_path / "plan.yaml"
    bad.write_text("lm: fake\nvariants: [a, b\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"plan\.yaml:\d+: invalid YAML"):
        read_plan_file(bad)
    bad.write_text("- a list\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="expected a mapping"):
        read_plan_file(bad)
    with pytest.raises(ConfigError, match="no such file"):
        read_plan_file(tmp_path / "missing.yaml")


def test_saved_plan_is_a_plan_file_without_secrets(tmp_path: Path) -> None:
    lm = LMConfig(model="openai/guard", api_base="http://user:hunter2@127.0.0.1:9/v1", temperature=0.0)
    plan = AblationPlan(lm=lm, variants=["official-per-rule"], data=DataSelection(level="L2"), run_id="r1")
    path = save_plan(plan, tmp_path / "out")
    assert "hunter2" not in path.read_text(encoding="utf-8")
    again = build_plan(read_plan_file(path), str(path))
    assert again.identity() == plan.identity() and again.variants == plan.variants


def test_a_fresh_outdir_gets_the_plan_with_a_run_id(tmp_path: Path) -> None:
    plan = reconcile(AblationPlan(lm=LM), tmp_path, resume=False, new_run_id="new")
    assert plan.run_id == "new"
    with pytest.raises(ConfigError) as error:
        reconcile(AblationPlan(lm=LM), tmp_path / "empty", resume=True, new_run_id="new")
    assert "no ablation to continue" in one_line(error)


def test_an_outdir_with_another_plan_needs_resume(tmp_path: Path) -> None:
    save_plan(AblationPlan(lm=LM, variants=["official-per-policy"], run_id="r1"), tmp_path)
    with pytest.raises(ConfigError) as error:
        reconcile(AblationPlan(lm=LM), tmp_path, resume=False, new_run_id="new")
    assert "already holds an ablation" in one_line(error) and "--resume" in str(error.value)
    with pytest.raises(ConfigError) as error:
        reconcile(AblationPlan(lm=LM, run_id="r1"), tmp_path, resume=False, new_run_id="new")
    assert "holds a different ablation" in one_line(error) and "variants" in str(error.value)
    same = AblationPlan(lm=LM, variants=["official-per-policy"], run_id="r1")
    assert reconcile(same, tmp_path, resume=False, new_run_id="new") == same


def test_resume_may_add_variants_but_not_change_model_or_cases(tmp_path: Path) -> None:
    save_plan(AblationPlan(lm=LM, variants=["official-per-policy"], run_id="r1"), tmp_path)
    more = reconcile(AblationPlan(lm=LM, concurrency=2), tmp_path, resume=True, new_run_id="new")
    assert more.run_id == "r1" and more.variants == list(DEFAULT_VARIANTS)
    hotter = LM.model_copy(update={"temperature": 0.7})
    with pytest.raises(ConfigError) as error:
        reconcile(AblationPlan(lm=hotter), tmp_path, resume=True, new_run_id="new")
    assert "lm.temperature=None" in one_line(error) and "0.7" in str(error.value)
    with pytest.raises(ConfigError, match=r"data\.limit"):
        reconcile(AblationPlan(lm=LM, data=DataSelection(limit=3)), tmp_path, resume=True, new_run_id="new")
