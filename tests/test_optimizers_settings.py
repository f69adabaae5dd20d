"""Optimizer settings: the shipped YAML is valid, errors name file and line, overrides apply."""

from __future__ import annotations

from pathlib import Path

import pytest

from sp_dspy._errors import ConfigError
from sp_dspy.optimizers import (
    DEFAULT_OPTIMIZERS_FILE,
    OPTIMIZER_NAMES,
    RECIPES,
    CoproSettings,
    GepaSettings,
    MiproSettings,
    SimbaSettings,
    get_recipe,
    load_settings,
    parse_overrides,
)

SHIPPED = Path(__file__).resolve().parents[1] / "sp_dspy" / "configs" / "optimizers.yaml"


@pytest.mark.parametrize("name", OPTIMIZER_NAMES)
def test_shipped_yaml_is_valid_for_every_optimizer(name: str) -> None:
    recipe = RECIPES[name]
    settings = load_settings(name, recipe.settings_model, path=SHIPPED)
    assert settings == recipe.settings_model()  # the file documents the models' defaults
    assert recipe.seed_note and recipe.sampling_note


def test_unknown_optimizer_lists_the_choices() -> None:
    with pytest.raises(ConfigError, match="mipro, gepa, bootstrap, simba, copro"):
        get_recipe("adam")


def test_unknown_key_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "opt.yaml"
    path.write_text("mipro:\n  num_trials: 3\ncopro:\n  bredth: 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"opt\.yaml:3: optimizer 'copro': field 'bredth'"):
        load_settings("copro", CoproSettings, path=path)
    assert load_settings("mipro", MiproSettings, path=path).num_trials == 3


def test_bad_yaml_and_bad_section(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("copro: [\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_settings("copro", CoproSettings, path=broken)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("copro: 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="section 'copro' must be a mapping"):
        load_settings("copro", CoproSettings, path=scalar)


def test_overrides_are_typed_and_validated() -> None:
    overrides = parse_overrides(["breadth=3", "init_temperature=0.7"])
    assert overrides == {"breadth": 3, "init_temperature": 0.7}
    settings = load_settings("copro", CoproSettings, path=SHIPPED, overrides=overrides)
    assert (settings.breadth, settings.depth, settings.init_temperature) == (3, 2, 0.7)
    with pytest.raises(ConfigError, match=r"--set: optimizer 'copro': field 'breadth'"):
        load_settings("copro", CoproSettings, path=SHIPPED, overrides={"breadth": 1})
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_overrides(["breadth"])


def test_gepa_needs_exactly_one_budget() -> None:
    with pytest.raises(ConfigError, match="exactly one of auto, max_metric_calls, max_full_evals"):
        load_settings("gepa", GepaSettings, path=SHIPPED, overrides={"auto": "light"})
    light = load_settings(
        "gepa", GepaSettings, path=SHIPPED, overrides=parse_overrides(["auto=light", "max_metric_calls=null"])
    )
    assert light.auto == "light" and light.max_metric_calls is None


def test_fit_shrinks_batches_to_the_data() -> None:
    simba = RECIPES["simba"].fit(SimbaSettings(bsize=32), 5, 3)
    assert simba.bsize == 5
    mipro = RECIPES["mipro"].fit(MiproSettings(minibatch=True, minibatch_size=35), 9, 4)
    assert mipro.minibatch_size == 4


def test_projections_follow_the_algorithms() -> None:
    copro = RECIPES["copro"].projection(CoproSettings(breadth=4, depth=2), 6, 6)
    assert (copro.program_calls, copro.helper_calls) == (2 * 4 * 6, 3 + 4)
    bootstrap = RECIPES["bootstrap"].projection(
        RECIPES["bootstrap"].settings_model(num_candidate_programs=2), 6, 3
    )
    assert bootstrap.program_calls == (2 + 3) * 3 + (2 + 1) * 6 and bootstrap.helper_calls == 0
    gepa = RECIPES["gepa"].projection(GepaSettings(max_metric_calls=50), 6, 3)
    assert gepa.program_calls >= 50 and gepa.helper_calls >= 1
    auto = RECIPES["mipro"].projection(MiproSettings(auto="light"), 20, 20)
    assert auto.program_calls > RECIPES["mipro"].projection(MiproSettings(), 20, 20).program_calls


def test_the_default_file_is_the_packages_wherever_the_command_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no configs/ here
    recipe = RECIPES["mipro"]
    assert DEFAULT_OPTIMIZERS_FILE == SHIPPED
    assert load_settings("mipro", recipe.settings_model) == load_settings(
        "mipro", recipe.settings_model, path=SHIPPED
    )


def test_a_settings_file_without_the_chosen_optimizer_is_refused(tmp_path: Path) -> None:
    """A file given on purpose replaces the shipped one: a missing section would silently mean defaults."""
    path = tmp_path / "opt.yaml"
    path.write_text("gepa:\n  auto: light\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"opt\.yaml: no section for optimizer 'copro' \(the file has: gepa\)$"
    ):
        load_settings("copro", CoproSettings, path=path)
    assert load_settings("copro", CoproSettings).breadth >= 2  # the shipped file has every section
