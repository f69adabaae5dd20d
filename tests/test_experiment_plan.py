"""The experiment's plan holds its data as every plan does (``data``, a ``DataSelection``); a plan of an
earlier version (flat ``dataset``, ``benchmark``, ``lenient``: a saved ``experiment.json``, a user's
``--plan`` file) still reads, and resumes, and ``data`` takes only what an experiment can honour."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from sp_dspy._ablate import EXPERIMENT_FILE, build_experiment, run_experiment
from sp_dspy._ablate._experiment import SPLIT_FILE, ablation_plan, compile_config, write_splits
from sp_dspy._ablate._plan import load_saved, reconcile_experiment
from sp_dspy._data import Split
from sp_dspy._errors import ConfigError
from sp_dspy._runner import DataSelection
from sp_dspy.cli._experiment import register
from tests._docs_blocks import ROOT, blocks
from tests._factories import command_app

#: ``experiment.json`` as the versions before ``data`` saved it (lenient set, so a lost key shows).
FLAT = Path(__file__).parent / "fixtures" / "experiment" / "experiment-flat.json"
PKU = Path(__file__).parent / "fixtures" / "pku" / "rows.jsonl"


def flat_document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(FLAT.read_text(encoding="utf-8"))
    return document


def nested_document() -> dict[str, Any]:
    """The fixture's plan as this version writes it."""
    document = flat_document()
    data = {key: document.pop(key) for key in ("dataset", "benchmark", "lenient")}
    return {**document, "data": data}


def invoke(*args: str) -> Result:
    return CliRunner().invoke(command_app(register), ["experiment", *args], env={"COLUMNS": "200"})


def test_a_flat_plan_reads_as_the_nested_one_and_saves_nested() -> None:
    flat, nested = build_experiment(flat_document()), build_experiment(nested_document())
    assert flat == nested
    assert flat.data == DataSelection(lenient=True)
    saved = flat.public_dict()
    assert saved["data"]["lenient"] is True and saved["data"]["benchmark"] == "safepyramid"
    assert not {"dataset", "benchmark", "lenient"} & set(saved)
    assert build_experiment(saved) == flat  # the saved form reads back as it was


def test_a_key_given_flat_and_under_data_is_refused_naming_it() -> None:
    document = {**nested_document(), "lenient": False}
    with pytest.raises(ConfigError) as caught:
        build_experiment(document, "plan.yaml")
    assert str(caught.value) == (
        "plan.yaml: field data.lenient: given twice: as lenient (the older, flat form) and as "
        "data.lenient; keep data.lenient"
    )


@pytest.mark.parametrize(
    ("data", "field", "why"),
    [
        ({"split": "s.json:test"}, "split", "an experiment makes its own split of every case of its dataset"),
        ({"level": "L1"}, "level", "(--ratios, --split-seed); give it a dataset of just those cases"),
        ({"domain": "finance"}, "domain", "give it a dataset of just those cases"),
        ({"limit": 5}, "limit", "give it a dataset of just those cases"),
        ({"start_idx": 2}, "start_idx", "give it a dataset of just those cases"),
        ({"shard": "0/2"}, "shard", "give it a dataset of just those cases"),
        ({"with_evidence": True}, "with_evidence", "compiles read the benchmark without evidence"),
    ],
)
def test_data_takes_only_what_an_experiment_honours(data: dict[str, Any], field: str, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build_experiment({"lm": {"model": "fake/instructed"}, "data": data})
    assert str(caught.value).startswith(f"flags: field data.{field}: ") and why in str(caught.value)
    # the defaults, as a saved plan spells them, are not a selection
    plan = build_experiment({"lm": {"model": "fake/instructed"}, "data": DataSelection().model_dump()})
    assert plan.data == DataSelection()


def test_the_plan_s_data_reaches_the_split_the_compiles_and_the_test_ablation(tmp_path: Path) -> None:
    plan = build_experiment(
        {"lm": {"model": "fake/instructed"}, "optimizers": "copro", "seeds": "0",
         "data": {"dataset": str(PKU), "benchmark": "pku-saferlhf", "lenient": True}}
    )  # fmt: skip
    write_splits(plan, tmp_path)
    split = Split.model_validate_json((tmp_path / SPLIT_FILE).read_text(encoding="utf-8"))
    assert split.test and split.benchmark == "pku-saferlhf" and split.dataset == str(PKU)
    config = compile_config(plan, tmp_path, "copro", 0, tmp_path / SPLIT_FILE)
    assert (config.dataset, config.benchmark, config.lenient) == (str(PKU), "pku-saferlhf", True)
    ablation = ablation_plan(plan, tmp_path)
    assert ablation.data == plan.data.model_copy(update={"split": f"{tmp_path / SPLIT_FILE}:test"})


def test_an_experiment_json_of_an_earlier_version_is_the_same_experiment(tmp_path: Path) -> None:
    out = tmp_path / "exp"
    out.mkdir()
    shutil.copy(FLAT, out / EXPERIMENT_FILE)
    saved = load_saved(out)
    assert saved is not None and saved.data == DataSelection(lenient=True)
    reconcile_experiment(build_experiment(nested_document()), out, resume=True)  # the same: no error
    changed = {**nested_document(), "data": {"lenient": False}}
    with pytest.raises(ConfigError, match=r"ran with data\.lenient=True, this run asks for False"):
        reconcile_experiment(build_experiment(changed), out, resume=True)


def test_an_experiment_saved_in_the_flat_form_resumes_without_redoing_its_steps(tmp_path: Path) -> None:
    out = tmp_path / "exp"
    first = run_experiment(build_experiment(nested_document()), out, show_progress=False)
    assert first.summary is not None
    shutil.copy(FLAT, out / EXPERIMENT_FILE)  # as an earlier version left it

    changed = invoke("--out", str(out), "--resume", "--dataset", str(PKU), "-q")  # a flag over the flat file
    assert isinstance(changed.exception, ConfigError)
    assert "experiment.json ran with data.dataset=None, this run asks for" in str(changed.exception)

    resumed = invoke("--out", str(out), "--resume", "-q")
    assert resumed.exit_code == 0, (resumed.output, resumed.exception)
    assert resumed.output.count("finished earlier, not run again") == 3  # one compile, two evaluations
    again = json.loads((out / EXPERIMENT_FILE).read_text(encoding="utf-8"))
    assert again["data"]["lenient"] is True and "lenient" not in again


def test_a_plan_file_in_the_flat_form_runs_and_flags_go_over_it(tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(
        f"lm: fake/instructed\ndataset: {PKU}\nbenchmark: safepyramid\noptimizers: [copro]\n",
        encoding="utf-8",
    )
    wrong = invoke("--out", str(tmp_path / "a"), "--plan", str(plan_file), "--dry-run")
    assert "pass --benchmark pku-saferlhf" in str(wrong.exception)  # the flat dataset was read
    priced = invoke(
        "--out", str(tmp_path / "b"), "--plan", str(plan_file), "--benchmark", "pku-saferlhf", "--seeds", "0",
        "--dry-run",
    )  # fmt: skip
    assert priced.exit_code == 0, (priced.output, priced.exception)
    assert "Estimated experiment" in priced.output and not (tmp_path / "b").exists()

    both = tmp_path / "both.yaml"
    both.write_text(f"lm: fake/instructed\ndataset: {PKU}\ndata: {{dataset: {PKU}}}\n", encoding="utf-8")
    refused = invoke("--out", str(tmp_path / "c"), "--plan", str(both), "--dry-run")
    assert str(refused.exception) == (
        f"{both}: field data.dataset: given twice: as dataset (the older, flat form) and as data.dataset;"
        " keep data.dataset"
    )
    listed = tmp_path / "listed.yaml"
    listed.write_text("lm: fake/instructed\ndata: [L1]\n", encoding="utf-8")
    refused = invoke("--out", str(tmp_path / "d"), "--plan", str(listed), "--dry-run")
    assert str(refused.exception) == f"{listed}: field data: expected a mapping of data settings, got list"


def test_the_docs_plan_example_builds_and_its_flat_form_is_the_same_plan() -> None:
    [block] = [b for b in blocks(ROOT / "docs" / "compile" / "experiment.md") if b.language == "yaml"]
    document = yaml.safe_load(block.text)
    plan = build_experiment(document, block.where)
    assert plan.data == DataSelection(dataset="ByteDance/SafePyramid")
    assert plan.optimizers == ["mipro", "gepa"]
    flat = {**{key: value for key, value in document.items() if key != "data"}, **document["data"]}
    assert build_experiment(flat, block.where) == plan
