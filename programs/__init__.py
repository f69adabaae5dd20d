"""Guard programs: the official fixed-prompt baselines and typed DSPy programs.

``make_program`` builds one by name, ``load_program`` restores a compiled one, ``run_case``
runs any of them; ``import sp_dspy.programs`` loads none of them (nor DSPy) until first use.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

# The DSPy-based modules import DSPy (and through it LiteLLM) on first use; LiteLLM
# must not try to download its price list then, as this package runs offline too.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

if TYPE_CHECKING:  # the names as type checkers see them ("as" re-exports them)
    from ._examples import PROGRAM_INPUTS as PROGRAM_INPUTS
    from ._examples import case_to_example as case_to_example
    from ._examples import rubric_json as rubric_json
    from ._native import GuardFormat as GuardFormat
    from ._native import NativeAnswer as NativeAnswer
    from ._native import NativePerPolicy as NativePerPolicy
    from ._native import NativePerRule as NativePerRule
    from ._native import NativeRequest as NativeRequest
    from ._official import OfficialPerPolicy as OfficialPerPolicy
    from ._official import OfficialPerRule as OfficialPerRule
    from ._outputs import JudgmentRecord as JudgmentRecord
    from ._outputs import PolicyRecord as PolicyRecord
    from ._outputs import Status as Status
    from ._outputs import Usage as Usage
    from ._outputs import aggregate_judgments as aggregate_judgments
    from ._per_policy import FindViolatedRules as FindViolatedRules
    from ._per_policy import PerPolicyGuard as PerPolicyGuard
    from ._per_policy import PerPolicyGuardCoT as PerPolicyGuardCoT
    from ._per_rule import JudgeRule as JudgeRule
    from ._per_rule import PerRuleGuard as PerRuleGuard
    from ._per_rule import PerRuleGuardCoT as PerRuleGuardCoT
    from ._per_rule import rubric_targets as rubric_targets
    from ._per_rule import target_examples as target_examples
    from ._pku import AssessResponse as AssessResponse
    from ._pku import PkuSeverityGuard as PkuSeverityGuard
    from ._pku import PkuSeverityGuardCoT as PkuSeverityGuardCoT
    from ._pku import severity_fields as severity_fields
    from ._registry import ARTIFACT_KIND as ARTIFACT_KIND
    from ._registry import GUARD_PROGRAMS as GUARD_PROGRAMS
    from ._registry import PROGRAM_NAMES as PROGRAM_NAMES
    from ._registry import PROGRAM_SUMMARIES as PROGRAM_SUMMARIES
    from ._registry import PROTOCOLS as PROTOCOLS
    from ._registry import RAW_PROGRAMS as RAW_PROGRAMS
    from ._registry import SEVERITY_PROGRAMS as SEVERITY_PROGRAMS
    from ._registry import GuardProgram as GuardProgram
    from ._registry import default_protocol as default_protocol
    from ._registry import guard_format as guard_format
    from ._registry import is_raw_program as is_raw_program
    from ._registry import judge_target as judge_target
    from ._registry import load_program as load_program
    from ._registry import make_program as make_program
    from ._registry import program_spec as program_spec
    from ._registry import resolve_program as resolve_program
    from ._registry import run_case as run_case

_LAZY = {
    name: module
    for module, names in {
        "._examples": ("PROGRAM_INPUTS", "case_to_example", "rubric_json"),
        "._outputs": ("JudgmentRecord", "PolicyRecord", "Status", "Usage", "aggregate_judgments"),
        "._official": ("OfficialPerPolicy", "OfficialPerRule"),
        "._native": ("GuardFormat", "NativeAnswer", "NativePerPolicy", "NativePerRule", "NativeRequest"),
        "._per_policy": ("FindViolatedRules", "PerPolicyGuard", "PerPolicyGuardCoT"),
        "._per_rule": ("JudgeRule", "PerRuleGuard", "PerRuleGuardCoT", "rubric_targets", "target_examples"),
        "._pku": ("AssessResponse", "PkuSeverityGuard", "PkuSeverityGuardCoT", "severity_fields"),
        "._registry": (
            "ARTIFACT_KIND",
            "GUARD_PROGRAMS",
            "PROGRAM_NAMES",
            "PROGRAM_SUMMARIES",
            "RAW_PROGRAMS",
            "PROTOCOLS",
            "SEVERITY_PROGRAMS",
            "GuardProgram",
            "default_protocol",
            "guard_format",
            "is_raw_program",
            "judge_target",
            "load_program",
            "make_program",
            "program_spec",
            "resolve_program",
            "run_case",
        ),
    }.items()
    for name in names
}


def __getattr__(name: str) -> Any:
    """Import ``name`` from its module on first use and keep it here (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


# In ruff's order: constants, classes, then the rest.
__all__ = sorted(_LAZY, key=lambda name: (not name.isupper(), not name[:1].isupper(), name))
