"""Public entry points of the output parsers: one per protocol, two modes each.

``strict`` is the official parser (leaderboard-comparable exclusions); ``robust``
recovers answers the official parser loses and marks them ``recovered``, so a run can
report how much of its score depends on recovery. Neither ever raises on model text.
"""

from __future__ import annotations

from sp_dspy._errors import ConfigError
from sp_dspy._protocol._parse_models import PARSE_MODES, ParseMode, PolicyParse, VerdictParse
from sp_dspy._protocol._parse_policy import parse_policy_robust, parse_policy_strict
from sp_dspy._protocol._parse_verdict import parse_verdict_robust, parse_verdict_strict


def _check_mode(mode: str) -> None:
    if mode not in PARSE_MODES:
        raise ConfigError(f"parse mode must be one of {', '.join(PARSE_MODES)}, got {mode!r}")


def parse_policy_output(text: str | None, mode: ParseMode) -> PolicyParse:
    """Parse a per-policy answer (the violated rules) from raw model text."""
    _check_mode(mode)
    return parse_policy_strict(text) if mode == "strict" else parse_policy_robust(text)


def parse_verdict_output(text: str | None, mode: ParseMode) -> VerdictParse:
    """Parse a per-rule verdict (violated / not_violated) from raw model text."""
    _check_mode(mode)
    return parse_verdict_strict(text) if mode == "strict" else parse_verdict_robust(text)
