"""The published SafePyramid leaderboard, shipped as package data with its citation.

Reading the paper's numbers from a shipped file keeps them auditable and the report offline.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from pydantic import BaseModel, Field

from .._errors import DataError
from .._metrics import CELLS
from .._protocol import Protocol

_SECTIONS: dict[Protocol, str] = {"per-policy": "overallPolicy", "per-rule": "overallRule"}


class PublishedRow(BaseModel):
    """One model's published figures; arrays are ``[L0, L1, L2, ALL]`` percentages."""

    model: str
    org: str | None = None
    protocol: Protocol
    rmr: list[float] = Field(validation_alias="RMR")
    rmr_exact: list[float] = Field(validation_alias="RMR@1.0")
    rdr: list[float] = Field(validation_alias="RDR")

    def at(self, cell: str) -> dict[str, float]:
        """The RMR, RMR@1.0 and RDR of one cell (``L0``..``ALL``)."""
        i = CELLS.index(cell)
        return {"rmr": self.rmr[i], "rmr_exact": self.rmr_exact[i], "rdr": self.rdr[i]}


class Leaderboard(BaseModel):
    """Published per-policy and per-rule rows plus the citation they must travel with."""

    citation: str
    note: str
    per_policy: list[PublishedRow]
    per_rule: list[PublishedRow]


def _rows(document: dict[str, Any], protocol: Protocol) -> list[PublishedRow]:
    rows = []
    for model, figures in document[_SECTIONS[protocol]].items():
        info = document.get("META", {}).get(model, {})
        row = PublishedRow.model_validate(
            {**figures, "model": model, "org": info.get("org"), "protocol": protocol}
        )
        if not len(row.rmr) == len(row.rmr_exact) == len(row.rdr) == len(CELLS):
            raise DataError(f"leaderboard.json: {protocol} row {model}: expected [L0, L1, L2, ALL] arrays")
        rows.append(row)
    return rows


@lru_cache(maxsize=1)
def load_leaderboard() -> Leaderboard:
    """The bundled ``leaderboard.json`` (read once per process)."""
    document = json.loads(resources.files("sp_dspy._report").joinpath("leaderboard.json").read_text("utf-8"))
    citation = document["citation"]
    return Leaderboard(
        citation=citation["text"],
        note=citation["note"],
        per_policy=_rows(document, "per-policy"),
        per_rule=_rows(document, "per-rule"),
    )
