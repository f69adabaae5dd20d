"""``--run-config``: the documented example file loads, covers every setting, and runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sp_dspy._compile import BudgetCaps
from sp_dspy._errors import ConfigError
from sp_dspy._runner import EvalConfig, build_eval_config
from sp_dspy._runner._config import DataSelection
from sp_dspy.cli import app

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("isolated_run")]
EXAMPLE = Path(__file__).resolve().parents[1] / "configs" / "run.example.yaml"


def test_the_example_names_every_setting_and_nothing_else() -> None:
    document = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    assert set(document) == set(EvalConfig.model_fields)
    assert set(document["data"]) == set(DataSelection.model_fields)
    assert set(document["caps"]) == set(BudgetCaps.model_fields)


def test_the_example_loads_as_an_eval_config() -> None:
    settings = build_eval_config({}, EXAMPLE)
    assert (settings.data.level, settings.data.limit, settings.data.dataset) == ("L1,L2", 12, None)
    assert (settings.program, settings.protocol, settings.parser) == ("official", "per-policy", "strict")
    assert (settings.concurrency, settings.run_id, settings.output_dir) == (
        16,
        "example",
        Path("output/results"),
    )
    assert settings.caps == BudgetCaps()  # uncapped unless the file says otherwise


def test_eval_runs_the_example_and_a_flag_overrides_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = [
        "eval",
        "--lm",
        "fake",
        "--run-config",
        str(EXAMPLE),
        "--limit",
        "2",
        "--output-dir",
        str(out),
        "-q",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (result.output, result.exception)
    lines = (out / "results_example_fake.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 2 and {r["id"].rsplit("-", 1)[1] for r in records} <= {"l1", "l2"}


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ('run_id: ".."\n', "field run_id: '..' is not a run id: use letters, digits, '.', '_' and '-'"),
        ('run_id: ""\n', "field run_id: '' is not a run id"),
        ("data:\n  limit: 0\n", "field data.limit: Input should be greater than or equal to 1"),
    ],
)
def test_a_run_config_names_a_bad_run_id_or_limit(tmp_path: Path, yaml_text: str, message: str) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(yaml_text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        build_eval_config({}, path)
    assert str(caught.value).startswith(f"{path}: {message}")
