"""The published SafePyramid leaderboard, shipped as package data with its citation.

Users compare their runs to the paper's; reading the numbers from a file shipped
with the package (not typed into the report code) keeps them auditable against the
paper and keeps the report working offline.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel

from .._errors import DataError
from ._model import CELLS

Protocol = Literal["per-policy", "per-rule"]
_SECTIONS: dict[Protocol, str] = {"per-policy": "overallPolicy", "per-rule": "overallRule"}


class PublishedRow(BaseModel):
    """One model's published figures; arrays are ``[L0, L1, L2, ALL]`` percentages."""

    model: str
    org: str | None = None
    kind: str | None = None
    protocol: Protocol
    rmr: list[float]
    rmr_exact: list[float]
    rdr: list[float]
    refusal: float | None = None

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

    def rows(self, protocol: Protocol) -> list[PublishedRow]:
        return self.per_policy if protocol == "per-policy" else self.per_rule


def _rows(document: dict[str, Any], protocol: Protocol) -> list[PublishedRow]:
    meta = document.get("META", {})
    rows = []
    for model, figures in document[_SECTIONS[protocol]].items():
        info = meta.get(model, {})
        row = PublishedRow(
            model=model,
            org=info.get("org"),
            kind=info.get("type"),
            protocol=protocol,
            rmr=figures["RMR"],
            rmr_exact=figures["RMR@1.0"],
            rdr=figures["RDR"],
            refusal=figures.get("Refusal"),
        )
        if not len(row.rmr) == len(row.rmr_exact) == len(row.rdr) == len(CELLS):
            raise DataError(f"leaderboard.json: {protocol} row {model}: expected [L0, L1, L2, ALL] arrays")
        rows.append(row)
    return rows


@lru_cache(maxsize=1)
def load_leaderboard() -> Leaderboard:
    """The bundled ``leaderboard.json`` (read once per process)."""
    text = resources.files("sp_dspy._report").joinpath("leaderboard.json").read_text(encoding="utf-8")
    document = json.loads(text)
    citation = document["citation"]
    return Leaderboard(
        citation=citation["text"],
        note=citation["note"],
        per_policy=_rows(document, "per-policy"),
        per_rule=_rows(document, "per-rule"),
    )
