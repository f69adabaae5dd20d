"""Typed results of the output parsers, which never raise on model text.

``strict`` is the official parser; ``robust`` also recovers answers it loses and marks
them ``recovered``. ``status`` is the field to branch on; ``refused`` and ``parse_failed``
are the result-record format's flags (contract section 4), kept consistent with it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from sp_dspy._errors import ConfigError

ParseMode = Literal["strict", "robust"]
ParseStatus = Literal["clean", "recovered", "failed", "refused"]
Status = Literal["clean", "recovered", "failed", "refused", "error"]
"""How a case's answer was obtained: a ``ParseStatus`` (``recovered`` also for a per-rule case
with some failed judgments), or ``error`` when the call itself failed."""
Verdict = Literal["violated", "not_violated"]
PARSE_MODES: tuple[ParseMode, ...] = ("strict", "robust")


def check_parse_mode(mode: str) -> None:
    if mode not in PARSE_MODES:
        raise ConfigError(f"parse mode must be one of {', '.join(PARSE_MODES)}, got {mode!r}")


def _check_status(status: ParseStatus, refused: bool, parse_failed: bool, has_value: bool) -> None:
    if refused != (status == "refused") or parse_failed != (status == "failed"):
        raise ValueError(f"status {status!r} disagrees with refused={refused}, parse_failed={parse_failed}")
    if has_value != (status in ("clean", "recovered")):
        raise ValueError(f"status {status!r} must {'not ' if not has_value else ''}carry a prediction")


class PolicyParse(BaseModel):
    """A parsed per-policy answer; ``failed``/``refused`` carry no prediction (the case is excluded)."""

    model_config = ConfigDict(frozen=True)

    violated_rules: list[int] | None
    status: ParseStatus
    refused: bool = False
    parse_failed: bool = False
    analysis: str | None = None
    reasoning: str | None = None
    predicted_label: Literal["safe", "unsafe"] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> PolicyParse:
        _check_status(self.status, self.refused, self.parse_failed, self.violated_rules is not None)
        return self

    @classmethod
    def refusal(cls, reasoning: str | None = None) -> PolicyParse:
        return cls(violated_rules=None, status="refused", refused=True, reasoning=reasoning)

    @classmethod
    def failure(cls, reasoning: str | None = None) -> PolicyParse:
        return cls(violated_rules=None, status="failed", parse_failed=True, reasoning=reasoning)


class VerdictParse(BaseModel):
    """A parsed per-rule verdict; statuses mean the same as in ``PolicyParse``."""

    model_config = ConfigDict(frozen=True)

    verdict: Verdict | None
    status: ParseStatus
    refused: bool = False
    parse_failed: bool = False
    reason: str | None = None
    reasoning: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> VerdictParse:
        _check_status(self.status, self.refused, self.parse_failed, self.verdict is not None)
        return self

    @property
    def violated(self) -> bool:
        """Whether the rule is flagged: refusals and failures count as not flagged."""
        return self.verdict == "violated"

    @classmethod
    def refusal(cls, reasoning: str | None = None) -> VerdictParse:
        return cls(verdict=None, status="refused", refused=True, reasoning=reasoning)

    @classmethod
    def failure(cls, reasoning: str | None = None) -> VerdictParse:
        return cls(verdict=None, status="failed", parse_failed=True, reasoning=reasoning)
