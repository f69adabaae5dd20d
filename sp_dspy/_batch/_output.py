"""Reading an ended batch's output one line at a time: a bad line costs its own request, never the
others' answers.

A line that is not JSON (a truncated file ends in one), not an object, not an answer the wire
knows, or that names an id outside the batch (unknown, or another batch's) is counted; its
request stays unanswered and the run asks it again. An id answered twice keeps its first answer;
two different answers are reported by id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from .._redact import redact
from ._wire import BatchAnswer


@dataclass
class Output:
    """What a batch's output held: the answers kept, the bad lines, the ids answered differently twice."""

    answers: list[BatchAnswer] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)  # "line 3: not JSON"
    conflicts: list[str] = field(default_factory=list)

    def lines(self, batch_id: str) -> list[str]:
        """The warnings to print: one for the bad lines, one per id answered differently twice."""
        said = []
        if self.bad:
            shown = "; ".join(self.bad[:3]) + ("; ..." if len(self.bad) > 3 else "")
            said.append(
                f"batch {batch_id}: {len(self.bad)} line(s) of its output unreadable ({redact(shown)}); "
                "the requests they answered are asked again"
            )
        said += [
            f"batch {batch_id}: request {cid} answered twice with different answers; the first is kept"
            for cid in self.conflicts
        ]
        return said


def read_output(
    lines: list[bytes], held: set[str], answer_of: Callable[[dict[str, Any]], BatchAnswer | None]
) -> Output:
    """The answers among ``lines`` to the requests ``held`` by the batch, each line on its own."""
    output = Output()
    first: dict[str, BatchAnswer] = {}
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        why = _problem(raw, held)
        if isinstance(why, str):
            output.bad.append(f"line {number}: {why}")
            continue
        try:
            answer = answer_of(why)
        except ValueError as exc:
            output.bad.append(f"line {number}: {exc}")
            continue
        if answer is None:
            continue  # never run (expired, cancelled): a later batch sends it
        kept = first.get(answer.custom_id)
        if kept is None:
            first[answer.custom_id] = answer
            output.answers.append(answer)
        elif kept != answer and answer.custom_id not in output.conflicts:
            output.conflicts.append(answer.custom_id)
    return output


def _problem(raw: bytes, held: set[str]) -> dict[str, Any] | str:
    """The line as an object with one of ``held``'s ids, else what is wrong with it."""
    try:
        line = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "not JSON (cut short?)" if raw.lstrip().startswith(b"{") else "not JSON"
    if not isinstance(line, dict):
        return f"a JSON {type(line).__name__}, not an object"
    cid = line.get("custom_id")
    if not isinstance(cid, str):
        return "no custom_id"
    if cid not in held:
        return f"custom_id {cid[:48]!r} is not one of this batch's requests"
    return line
