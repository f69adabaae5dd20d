"""Benchmark data: schema, loading (file, Hub, bundled sample), an application's inputs, and splits.

Below the benchmark kinds (``sp_dspy._benchmarks``), which score and render what is loaded here.

Names are imported from their modules on first use, so a command pays for building
the pydantic models (cases, the PKU adapter, the splitter) only when it uses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

_MODULES: dict[str, tuple[str, ...]] = {
    "._custom": ("load_custom",),
    "._filters": ("filter_cases",),
    "._gc": ("gc_paused",),
    "._guard_lines": ("BadLine", "GuardLine", "read_guard_lines"),
    "._inputs": ("SCOPES", "Source", "guard_case", "last_turn_case", "policy_rules"),
    "._loader": ("Benchmark", "load_file"),
    "._pku": ("load_pku",),
    "._pku_policy": ("PKU_CATEGORIES",),
    "._recorded": ("RecordedData", "check_results_belong", "recorded_data"),
    "._rule_number": ("RuleNumber",),
    "._scan": ("read_json_file", "read_regular_lines", "rule_line_numbers"),
    "._schema": ("Case", "RubricEntry", "conversation_id"),
    "._selection": ("CaseSelection", "resolved_path"),
    "._source": ("resolve_dataset",),
    "._splits": ("Split", "load_split", "make_split", "parse_ratios", "select_split"),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:  # the names as type checkers see them ("as" re-exports them)
    from ._custom import load_custom as load_custom
    from ._filters import filter_cases as filter_cases
    from ._gc import gc_paused as gc_paused
    from ._guard_lines import BadLine as BadLine
    from ._guard_lines import GuardLine as GuardLine
    from ._guard_lines import read_guard_lines as read_guard_lines
    from ._inputs import SCOPES as SCOPES
    from ._inputs import Source as Source
    from ._inputs import guard_case as guard_case
    from ._inputs import last_turn_case as last_turn_case
    from ._inputs import policy_rules as policy_rules
    from ._loader import Benchmark as Benchmark
    from ._loader import load_file as load_file
    from ._pku import load_pku as load_pku
    from ._pku_policy import PKU_CATEGORIES as PKU_CATEGORIES
    from ._recorded import RecordedData as RecordedData
    from ._recorded import check_results_belong as check_results_belong
    from ._recorded import recorded_data as recorded_data
    from ._rule_number import RuleNumber as RuleNumber
    from ._scan import read_json_file as read_json_file
    from ._scan import read_regular_lines as read_regular_lines
    from ._scan import rule_line_numbers as rule_line_numbers
    from ._schema import Case as Case
    from ._schema import RubricEntry as RubricEntry
    from ._schema import conversation_id as conversation_id
    from ._selection import CaseSelection as CaseSelection
    from ._selection import resolved_path as resolved_path
    from ._source import resolve_dataset as resolve_dataset
    from ._splits import Split as Split
    from ._splits import load_split as load_split
    from ._splits import make_split as make_split
    from ._splits import parse_ratios as parse_ratios
    from ._splits import select_split as select_split

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
