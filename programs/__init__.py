"""Guard programs: the official fixed-prompt baselines and typed DSPy programs.

``make_program`` builds one by name, ``load_program`` restores a compiled one, ``run_case``
runs any of them; ``import programs`` loads only the result types, not DSPy.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

# The DSPy-based modules import DSPy (and through it LiteLLM) on first use; LiteLLM
# must not try to download its price list then, as this package runs offline too.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from programs._outputs import CaseOutput, JudgmentOutput, Status, Usage, aggregate_judgments

if TYPE_CHECKING:
    from programs._examples import PROGRAM_INPUTS, case_to_example, rubric_json
    from programs._official import OfficialPerPolicy, OfficialPerRule
    from programs._per_policy import FindViolatedRules, PerPolicyGuard, PerPolicyGuardCoT
    from programs._per_rule import JudgeRule, PerRuleGuard, PerRuleGuardCoT, rubric_targets, target_examples
    from programs._pku import AssessResponse, PkuSeverityGuard, PkuSeverityGuardCoT, severity_fields
    from programs._registry import (
        PROGRAM_NAMES,
        PROTOCOLS,
        SEVERITY_PROGRAMS,
        GuardProgram,
        judge_target,
        load_program,
        make_program,
        program_spec,
        run_case,
    )

_LAZY = {
    name: module
    for module, names in {
        "._examples": ("PROGRAM_INPUTS", "case_to_example", "rubric_json"),
        "._official": ("OfficialPerPolicy", "OfficialPerRule"),
        "._per_policy": ("FindViolatedRules", "PerPolicyGuard", "PerPolicyGuardCoT"),
        "._per_rule": ("JudgeRule", "PerRuleGuard", "PerRuleGuardCoT", "rubric_targets", "target_examples"),
        "._pku": ("AssessResponse", "PkuSeverityGuard", "PkuSeverityGuardCoT", "severity_fields"),
        "._registry": (
            "PROGRAM_NAMES",
            "PROTOCOLS",
            "SEVERITY_PROGRAMS",
            "GuardProgram",
            "judge_target",
            "load_program",
            "make_program",
            "program_spec",
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


__all__ = [
    "PROGRAM_INPUTS",
    "PROGRAM_NAMES",
    "PROTOCOLS",
    "SEVERITY_PROGRAMS",
    "AssessResponse",
    "CaseOutput",
    "FindViolatedRules",
    "GuardProgram",
    "JudgeRule",
    "JudgmentOutput",
    "OfficialPerPolicy",
    "OfficialPerRule",
    "PerPolicyGuard",
    "PerPolicyGuardCoT",
    "PerRuleGuard",
    "PerRuleGuardCoT",
    "PkuSeverityGuard",
    "PkuSeverityGuardCoT",
    "Status",
    "Usage",
    "aggregate_judgments",
    "case_to_example",
    "judge_target",
    "load_program",
    "make_program",
    "program_spec",
    "rubric_json",
    "rubric_targets",
    "run_case",
    "severity_fields",
    "target_examples",
]
