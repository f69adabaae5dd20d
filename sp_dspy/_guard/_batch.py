"""Many checks with one guard (``sp-dspy check --batch``): concurrently, answered in input order.

The lines run through the runner's ``UnitEngine`` (at most ``concurrency`` in flight, one
failed line never stopping the others); each answer is emitted as soon as every line before
it has been, so a long batch streams its verdicts in the order it was given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._data import BadLine, GuardLine
from .._runner._engine import UnitEngine
from ._guard import Guard

#: A line's answer: ``{"line": N, "id"?, **verdict}``, or ``{"line": N, "id"?, "error": "FILE:N: ..."}``.
LineAnswer = dict[str, Any]


async def check_lines(
    guard: Guard,
    lines: Sequence[GuardLine | BadLine],
    emit: Callable[[LineAnswer], None],
    *,
    concurrency: int,
    framework: str = "",
) -> None:
    """Check every line (``framework`` serves those without their own) and ``emit`` one answer
    per line, bad lines included, in input order; the guard closes on this loop at the end."""
    numbers = iter([line.number for line in lines])
    waiting: dict[int, LineAnswer] = {}
    due = next(numbers, None)

    def finish(answer: LineAnswer) -> None:
        nonlocal due
        waiting[answer["line"]] = answer
        while due in waiting:
            emit(waiting.pop(due))
            due = next(numbers, None)

    async def work(line: GuardLine | BadLine) -> LineAnswer:
        if isinstance(line, BadLine):
            return {**_head(line), "error": line.message}
        verdict = await guard.acheck(line.policy, line.conversation, framework=line.framework or framework)
        return {**_head(line), **verdict.model_dump(mode="json")}

    def on_error(line: GuardLine | BadLine, error: BaseException) -> LineAnswer:
        return {**_head(line), "error": str(error)}

    engine: UnitEngine[GuardLine | BadLine, LineAnswer] = UnitEngine(
        work=work, on_error=on_error, store=[], concurrency=concurrency, on_record=finish
    )
    async with guard:
        await engine.run(lines)


def _head(line: GuardLine | BadLine) -> LineAnswer:
    return {"line": line.number} if line.id is None else {"line": line.number, "id": line.id}
