"""``sp-dspy check``'s job from Python: ``run_check(CheckConfig(...), lm)``.

A ``CheckConfig`` names files (a policy, a conversation or a ``--batch`` JSONL file, a framework),
the guard (program, protocol, parser) and the scope, as the command's flags do. ``read_check_input``
reads and validates the files before any LM starts (bad input costs nothing); ``run_check`` loads
the guard with ``Guard.load`` and checks the one conversation (``Guard.check``) or every line
(``check_lines``, answered in input order).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .._data import BadLine, GuardLine, Source, guard_case, policy_rules, read_guard_lines
from .._errors import ConfigError, DataError
from .._regular import MAX_JSON_FILE_BYTES, decode_utf8, read_text
from ._batch import LineAnswer, check_lines
from ._guard import Guard
from ._verdict import Verdict

#: ``CheckConfig.conversation``'s name for standard input.
STDIN = Path("-")


class CheckConfig(BaseModel):
    """What ``sp-dspy check`` checks, and with which guard (each field is the flag of its name).

    Give ``conversation`` (a ``Turn N - ...`` text file, a ``.json`` list of chat messages, or
    ``Path("-")`` for standard input) with ``policy``, or ``batch`` (JSON lines, one check each;
    ``policy`` serves the lines without their own)."""

    model_config = ConfigDict(extra="forbid")

    policy: Path | None = None
    conversation: Path | None = None
    batch: Path | None = None
    framework: Path | None = None  # regulatory framework text shown to per-rule judges
    program: str = "official"  # an artifact directory or a program name (``Guard.load``)
    protocol: str | None = None  # per-policy or per-rule (default: per-policy, or the artifact's)
    parser: str = "strict"  # the official baseline's parser: strict (the reference's) or robust
    scope: Literal["conversation", "last-turn"] = "conversation"
    concurrency: int = Field(default=16, ge=1)  # with ``batch``: lines checked at once


@dataclass(frozen=True)
class CheckInput:
    """A ``CheckConfig``'s files, read and validated: the policy's text and its ``rules`` by number,
    the framework text, and the ``conversation`` (text or messages) or the batch's ``lines``."""

    policy: str | None
    rules: dict[int, str]
    framework: str
    conversation: str | list[Any] | None = None
    lines: list[GuardLine | BadLine] | None = None


@dataclass
class CheckOutcome:
    """What a check gave: the one conversation's ``verdict``, or the batch's ``answers`` in input order
    (``{"line": N, "id"?, **verdict}``, or ``{"line": N, "id"?, "error": "FILE:N: ..."}``); ``rules``:
    the policy's rule texts by number (for printing the violated ones)."""

    rules: dict[int, str]
    verdict: Verdict | None = None
    answers: list[LineAnswer] = field(default_factory=list)


def read_check_input(config: CheckConfig) -> CheckInput:
    """The files ``config`` names, read and validated before any LM starts; a bad one is one
    ``DataError`` or ``ConfigError`` naming its flag (``--policy``, ``--conversation``, ``--batch``)."""
    if (config.conversation is None) == (config.batch is None):
        raise ConfigError("give one of --conversation FILE (- for standard input) or --batch FILE.jsonl")
    policy = read_text(config.policy, "--policy") if config.policy is not None else None
    framework = read_text(config.framework, "--framework") if config.framework is not None else ""
    rules = {} if policy is None else policy_rules(policy, source=Source("policy", str(config.policy)))
    if config.batch is not None:
        return CheckInput(policy, rules, framework, lines=read_guard_lines(config.batch, policy=policy))
    if policy is None:
        raise ConfigError("--policy: missing (the policy the conversation is checked against)")
    path = Path(str(config.conversation))
    conversation = read_conversation(path)
    where = "<stdin>" if path == STDIN else str(path)
    guard_case(policy, conversation, framework=framework, conversation_source=Source("conversation", where))
    return CheckInput(policy, rules, framework, conversation=conversation)


def load_check_guard(config: CheckConfig, lm: Any) -> Guard:
    """The guard ``config`` names on ``lm`` (``Guard.load``'s), refusing a scope it cannot judge.

    No deadline: the LM's timeout and retries bound a check (an embedded model may need minutes
    on a CPU), where ``Guard.load``'s default would cut them short."""
    guard = Guard.load(config.program, lm=lm, protocol=config.protocol, parser=config.parser, deadline=None)
    guard.refuse_scope(config.scope)
    return guard


def run_check(
    config: CheckConfig,
    lm: Any = None,
    *,
    inputs: CheckInput | None = None,
    guard: Guard | None = None,
    emit: Callable[[LineAnswer], None] | None = None,
) -> CheckOutcome:
    """Check ``config``'s conversation, or every line of its batch, with its guard on ``lm`` (an
    ``LMConfig``, a model string or name, a ``dspy.LM``: as ``Guard.load``).

    ``inputs`` and ``guard``: already read (``read_check_input``) and loaded (``load_check_guard``),
    as the command does to refuse bad input before an LM starts. ``emit`` gets each batch answer as
    soon as every line before it has been answered; the outcome holds them all too."""
    inputs = inputs or read_check_input(config)
    guard = guard or load_check_guard(config, lm)
    if inputs.lines is None:
        with guard:
            verdict = guard.check(
                str(inputs.policy), inputs.conversation or [], framework=inputs.framework, scope=config.scope
            )
        return CheckOutcome(inputs.rules, verdict=verdict)
    outcome = CheckOutcome(inputs.rules)

    def keep(answer: LineAnswer) -> None:
        outcome.answers.append(answer)
        if emit is not None:
            emit(answer)

    asyncio.run(
        check_lines(
            guard, inputs.lines, keep, concurrency=config.concurrency, framework=inputs.framework,
            scope=config.scope,
        )
    )  # fmt: skip
    return outcome


def read_conversation(path: Path) -> str | list[Any]:
    """A ``.json`` file's message list (a bare list or ``{"messages": [...]}``), else the text;
    ``-`` reads standard input, JSON when it starts with ``[`` or ``{``."""
    if path == STDIN:
        path = Path("<stdin>")
        raw = sys.stdin.buffer.read(MAX_JSON_FILE_BYTES + 1)
        if len(raw) > MAX_JSON_FILE_BYTES:
            raise DataError(
                f"--conversation -: standard input holds more than {MAX_JSON_FILE_BYTES >> 20} MiB"
            )
        text = decode_utf8(raw, path)
        if not text.lstrip().startswith(("[", "{")):
            return text
    else:
        text = read_text(path, "--conversation")
        if path.suffix.lower() != ".json":
            return text
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    if isinstance(document, dict) and "messages" in document:
        document = document["messages"]
    if not isinstance(document, list):
        raise DataError(
            f'{path}: expected a JSON list of {{role, content}} messages (or {{"messages": [...]}}), '
            f"got {type(document).__name__}"
        )
    return document
