"""Many checks with one guard (``sp-dspy check --batch``): concurrently, answered in input order.

The lines run through the runner's ``UnitEngine`` (at most ``concurrency`` in flight, one
failed line never stopping the others); each answer is emitted as soon as every line before
it has been, so a long batch streams its verdicts in the order it was given.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .._data import BadLine, GuardLine
from .._runner import UnitEngine
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
    scope: str = "conversation",
) -> None:
    """Check every line (``framework`` serves those without their own; ``scope`` as ``Guard.check``)
    and ``emit`` one answer per line, bad lines included, in input order; the guard closes on this
    loop at the end."""

    async def verdict(line: GuardLine) -> dict[str, Any]:
        found = await guard.acheck(
            line.policy, line.conversation, framework=line.framework or framework, scope=scope
        )
        return found.model_dump(mode="json")

    async with guard:
        await answer_lines(lines, verdict, emit, concurrency=concurrency)


async def answer_lines(
    lines: Sequence[GuardLine | BadLine],
    answer: Callable[[GuardLine], Awaitable[dict[str, Any]]],
    emit: Callable[[LineAnswer], None],
    *,
    concurrency: int,
) -> None:
    """``answer`` every line (at most ``concurrency`` at once) and ``emit`` one answer per line,
    bad lines included, in input order: ``check --batch`` and the guard service's batches alike."""
    numbers = iter([line.number for line in lines])
    waiting: dict[int, LineAnswer] = {}
    due = next(numbers, None)

    def finish(done: LineAnswer) -> None:
        nonlocal due
        waiting[done["line"]] = done
        while due in waiting:
            emit(waiting.pop(due))
            due = next(numbers, None)

    async def work(line: GuardLine | BadLine) -> LineAnswer:
        if isinstance(line, BadLine):
            return {**_head(line), "error": line.message}
        return {**_head(line), **await answer(line)}

    def on_error(line: GuardLine | BadLine, error: BaseException) -> LineAnswer:
        return {**_head(line), "error": str(error)}

    engine: UnitEngine[GuardLine | BadLine, LineAnswer] = UnitEngine(
        work=work, on_error=on_error, store=[], concurrency=concurrency, on_record=finish
    )
    await engine.run(lines)


def _head(line: GuardLine | BadLine) -> LineAnswer:
    return {"line": line.number} if line.id is None else {"line": line.number, "id": line.id}
