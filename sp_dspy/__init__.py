"""sp-dspy: in-context policy guardrailing with DSPy.

The public API is re-exported here lazily, so ``import sp_dspy`` (and the CLI's start-up)
stays fast: names that need dspy are imported on first use. What a guard program
needs lives in six small public modules below this one (``programs/`` and ``optimizers/``
import nothing else, never this package, whose names include compile and the runner):
``sp_dspy.protocol`` (official prompts, per-rule targets, parsers, answer schemas),
``sp_dspy.lm`` (raw chat calls, error kinds, redaction), ``sp_dspy.metrics`` (the official
match rule), ``sp_dspy.files`` (bounded JSON and line-numbered YAML reading),
``sp_dspy.data`` (the case) and ``sp_dspy.errors`` (the error types).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_getattr
from ._version import __version__ as __version__

_MODULES: dict[str, tuple[str, ...]] = {
    "sp_dspy._data": ("Benchmark", "Case", "Split", "load_pku", "load_split", "make_split"),
    "sp_dspy._benchmarks": ("BenchmarkKind", "benchmark_kind", "load_benchmark", "register_benchmark"),
    "sp_dspy._compile": ("CompileConfig", "compile_guard"),
    "sp_dspy._runner": ("DataSelection", "EvalConfig", "build_eval_config", "plan_run"),
    "sp_dspy._executor": ("run_eval",),
    "sp_dspy._ablate": (
        "AblationPlan",
        "ExperimentPlan",
        "build_experiment",
        "build_plan",
        "price_experiment",
        "run_ablation",
        "run_experiment",
    ),
    "sp_dspy._guard_service": (
        "GuardServiceConfig",
        "ServingGuard",
        "StoppedAtOnce",
        "build_guard_service_config",
        "serve_guard",
    ),
    "sp_dspy._serve": ("ModelServerConfig", "ServeListener", "build_model_server_config", "serve_model"),
    "sp_dspy._lm": ("LMConfig", "closing_transports"),
    "sp_dspy._guard": ("CheckConfig", "CheckOutcome", "Guard", "Verdict", "read_check_input", "run_check"),
    "sp_dspy._scoring": (
        "RecordedSelection",
        "ScoreConfig",
        "ScoredResults",
        "build_score_config",
        "score_results",
    ),
    "sp_dspy._errors": ("ConfigError", "DataError", "SpDspyError", "validation_problem"),
    "sp_dspy._usage": ("Usage",),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:  # the names as type checkers see them ("as" re-exports them)
    from ._ablate import AblationPlan as AblationPlan
    from ._ablate import ExperimentPlan as ExperimentPlan
    from ._ablate import build_experiment as build_experiment
    from ._ablate import build_plan as build_plan
    from ._ablate import price_experiment as price_experiment
    from ._ablate import run_ablation as run_ablation
    from ._ablate import run_experiment as run_experiment
    from ._benchmarks import BenchmarkKind as BenchmarkKind
    from ._benchmarks import benchmark_kind as benchmark_kind
    from ._benchmarks import load_benchmark as load_benchmark
    from ._benchmarks import register_benchmark as register_benchmark
    from ._compile import CompileConfig as CompileConfig
    from ._compile import compile_guard as compile_guard
    from ._data import Benchmark as Benchmark
    from ._data import Case as Case
    from ._data import Split as Split
    from ._data import load_pku as load_pku
    from ._data import load_split as load_split
    from ._data import make_split as make_split
    from ._errors import ConfigError as ConfigError
    from ._errors import DataError as DataError
    from ._errors import SpDspyError as SpDspyError
    from ._errors import validation_problem as validation_problem
    from ._executor import run_eval as run_eval
    from ._guard import CheckConfig as CheckConfig
    from ._guard import CheckOutcome as CheckOutcome
    from ._guard import Guard as Guard
    from ._guard import Verdict as Verdict
    from ._guard import read_check_input as read_check_input
    from ._guard import run_check as run_check
    from ._guard_service import GuardServiceConfig as GuardServiceConfig
    from ._guard_service import ServingGuard as ServingGuard
    from ._guard_service import StoppedAtOnce as StoppedAtOnce
    from ._guard_service import build_guard_service_config as build_guard_service_config
    from ._guard_service import serve_guard as serve_guard
    from ._lm import LMConfig as LMConfig
    from ._lm import closing_transports as closing_transports
    from ._runner import DataSelection as DataSelection
    from ._runner import EvalConfig as EvalConfig
    from ._runner import build_eval_config as build_eval_config
    from ._runner import plan_run as plan_run
    from ._scoring import RecordedSelection as RecordedSelection
    from ._scoring import ScoreConfig as ScoreConfig
    from ._scoring import ScoredResults as ScoredResults
    from ._scoring import build_score_config as build_score_config
    from ._scoring import score_results as score_results
    from ._serve import ModelServerConfig as ModelServerConfig
    from ._serve import ServeListener as ServeListener
    from ._serve import build_model_server_config as build_model_server_config
    from ._serve import serve_model as serve_model
    from ._usage import Usage as Usage

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
