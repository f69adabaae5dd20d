"""Optimizer recipes, metrics and feedback for compiling sp-dspy guard programs.

``RECIPES`` holds the five optimizers; importing this package does not import DSPy.
"""

from sp_dspy.errors import ConfigError

from ._examples import judgment_examples, policy_examples
from ._feedback import (
    judgment_feedback,
    judgment_feedback_text,
    policy_feedback,
    policy_feedback_text,
)
from ._metric import case_metric, case_score, judgment_metric, predicted_rules, predicted_verdict
from ._recipe import CompileJob, HelperLM, Projection, Recipe
from ._recipes import (
    BOOTSTRAP_RECIPE,
    COPRO_RECIPE,
    GEPA_RECIPE,
    MIPRO_RECIPE,
    SIMBA_RECIPE,
    BootstrapSettings,
    CoproSettings,
    GepaSettings,
    MiproSettings,
    SimbaSettings,
)
from ._settings import (
    DEFAULT_OPTIMIZERS_FILE,
    OptimizerSettings,
    load_settings,
    parse_overrides,
    read_settings_file,
)

RECIPES: dict[str, Recipe] = {
    recipe.name: recipe
    for recipe in (MIPRO_RECIPE, GEPA_RECIPE, BOOTSTRAP_RECIPE, SIMBA_RECIPE, COPRO_RECIPE)
}
OPTIMIZER_NAMES: tuple[str, ...] = tuple(RECIPES)


def get_recipe(name: str) -> Recipe:
    """The recipe called ``name``; a ``ConfigError`` listing the choices otherwise."""
    try:
        return RECIPES[name]
    except KeyError:
        raise ConfigError(f"--optimizer {name!r}: expected one of {', '.join(OPTIMIZER_NAMES)}") from None


__all__ = [
    "BOOTSTRAP_RECIPE",
    "COPRO_RECIPE",
    "DEFAULT_OPTIMIZERS_FILE",
    "GEPA_RECIPE",
    "MIPRO_RECIPE",
    "OPTIMIZER_NAMES",
    "RECIPES",
    "SIMBA_RECIPE",
    "BootstrapSettings",
    "CompileJob",
    "CoproSettings",
    "GepaSettings",
    "HelperLM",
    "MiproSettings",
    "OptimizerSettings",
    "Projection",
    "Recipe",
    "SimbaSettings",
    "case_metric",
    "case_score",
    "get_recipe",
    "judgment_examples",
    "judgment_feedback",
    "judgment_feedback_text",
    "judgment_metric",
    "load_settings",
    "parse_overrides",
    "policy_examples",
    "policy_feedback",
    "policy_feedback_text",
    "predicted_rules",
    "predicted_verdict",
    "read_settings_file",
]
