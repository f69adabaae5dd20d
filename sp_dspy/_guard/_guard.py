"""``Guard``: a guard program and an LM behind one call an application can make.

Checks run through ``programs.run_case``, the evaluation's path. Bad inputs are a one-line
``DataError`` before any LM call; what the model does is a ``Verdict`` status, never raised,
and so is a check its deadline ended (``error_class`` ``"deadline"``).
A guard owns the connection pools its checks open: ``with``/``async with`` or ``close``/``aclose``
end them (a pool belongs to the event loop that opened it, so ``acheck``'s close on that loop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Coroutine
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from pydantic import ValidationError

from sp_dspy.programs import OfficialPerPolicy, OfficialPerRule, is_raw_program, resolve_program, run_case

from .._data import SCOPES, guard_case, last_turn_case
from .._errors import ConfigError, validation_problem
from .._lm import (
    LMConfig,
    close_transport,
    closing_transports,
    import_dspy,
    load_configured_models,
    make_lm,
    resolve_model_config,
)
from .._metrics import PolicyRecord
from .._protocol import PARSE_MODES
from ._verdict import Verdict

if TYPE_CHECKING:
    from sp_dspy._data import Case
    from sp_dspy.programs import GuardProgram

_T = TypeVar("_T")

#: Seconds one check may take in all (every call, retry and backoff) unless ``Guard.load(deadline=...)``
#: says otherwise. The LM settings bound each call, not the check: with the defaults (timeout 120 s,
#: 3 retries) a server that accepts and never answers would hold a check for about 485 s.
DEFAULT_DEADLINE_S = 60.0
#: ``Verdict.error_class`` of a check its deadline ended (status ``error``, no verdict).
DEADLINE = "deadline"


class Guard:
    """A guard program bound to an LM: ``check(policy, conversation) -> Verdict``; see :meth:`load`."""

    def __init__(
        self,
        program: GuardProgram,
        *,
        label: str,
        lm: Any | None = None,
        model: str | None = None,
        json_adapter: bool = False,
        deadline: float | None = DEFAULT_DEADLINE_S,
    ):
        self.program = program
        self.label = label
        self.deadline = _checked_deadline(deadline)
        self._lm = lm
        self._model = model
        self._json_adapter = json_adapter
        self._used: list[Any] = []  # the LMs acheck called: their pools on its loop are the guard's to close
        self._closed = False

    @classmethod
    def load(
        cls,
        dir_or_name: str | Path,
        *,
        lm: LMConfig | str | Any | None = None,
        protocol: str | None = None,
        parser: str = "robust",
        max_concurrency: int = 8,
        models_file: str | Path | None = None,
        deadline: float | None = DEFAULT_DEADLINE_S,
        **lm_settings: Any,
    ) -> Guard:
        """A guard from a compiled artifact directory or a program name.

        Args:
            dir_or_name: an artifact directory, or a program name (``"official"``,
                ``"dspy"``, ...); a ``Path`` is always a directory, a string one when that
                directory exists (it wins over a name, as in ``sp-dspy eval --program``).
            lm: an ``LMConfig``, a model string (``"openai/gpt-5-mini"``,
                ``"fake/oracle"``), a model name from ``models_file``, a ``dspy.LM``,
                or ``None`` to use the LM set with ``dspy.configure(lm=...)`` at check time.
            protocol: ``"per-policy"`` or ``"per-rule"``; default per-policy for a
                name, the artifact's own for a directory (a different value is an error).
            parser: ``"robust"`` or ``"strict"``: how the official baseline reads answers.
            max_concurrency: judgments in flight per check (per-rule programs).
            models_file: a models YAML added on top of the package's and the user's
                when a model *name* is looked up (as ``--config``).
            deadline: seconds one check may take in all, its calls' retries and backoff
                included (``timeout`` and ``num_retries`` bound each call, not the check);
                past it the check ends with an ``error`` verdict whose ``error_class`` is
                ``"deadline"``. ``None``: no deadline. Default 60.
            lm_settings: ``LMConfig`` fields (``api_base``, ``temperature``, ...) that
                override the model's settings, as the CLI flags do; not with a ``dspy.LM``.

        Raises:
            ConfigError: an unknown program, protocol, parser, model or setting (one line).
        """
        if parser not in PARSE_MODES:
            raise ConfigError(f"parser {parser!r}: expected 'strict' or 'robust'")
        _checked_deadline(deadline)  # before an LM is built

        # A schema-constrained endpoint gets what evaluation sends it: a response_format
        # from the baseline, the JSON adapter for DSPy programs.
        live_lm, model, constrained = _resolve_lm(lm, models_file, lm_settings)
        program, _ = resolve_program(
            dir_or_name, protocol, parser=parser, constrained=constrained,
            max_concurrency=max(1, max_concurrency),
        )  # fmt: skip
        json_adapter = constrained and not is_raw_program(program)
        return cls(
            program,
            label=str(dir_or_name),
            lm=live_lm,
            model=model,
            json_adapter=json_adapter,
            deadline=deadline,
        )

    @property
    def protocol(self) -> str:
        """``per-policy`` or ``per-rule``."""
        return str(self.program.protocol)

    @property
    def lm(self) -> Any | None:
        """The ``dspy.LM`` this guard calls, or ``None`` when it uses ``dspy.settings.lm``."""
        return self._lm

    def case(
        self, policy: object, conversation: object, *, framework: object = "", scope: str = "conversation"
    ) -> Case:
        """The benchmark ``Case`` that ``check`` sends for these inputs (validated)."""
        self.refuse_scope(scope)
        case = guard_case(policy, conversation, framework=framework)
        return case if scope == "conversation" else last_turn_case(case)

    def refuse_scope(self, scope: str) -> None:
        """A ``ConfigError`` for a scope this guard cannot judge: an unknown one, or ``last-turn``
        with a program that sends its own fixed prompt (the official one keeps the reference's, a
        guard model's format its model's), which judges the whole conversation."""
        if scope not in SCOPES:
            raise ConfigError(f"scope {scope!r}: expected 'conversation' or 'last-turn'")
        if scope != "last-turn" or not is_raw_program(self.program):
            return
        sender = (
            "the official program keeps the reference's prompt"
            if isinstance(self.program, OfficialPerPolicy | OfficialPerRule)
            else f"{self.label} sends its guard model's own prompt"
        )
        raise ConfigError(
            f"scope last-turn: {sender}, which judges the whole conversation; "
            "use dspy, dspy-cot or a compiled artifact"
        )

    def check(
        self,
        policy: str,
        conversation: str | list[dict[str, Any]],
        *,
        framework: str = "",
        scope: str = "conversation",
    ) -> Verdict:
        """Check ``conversation`` (``Turn N - ...`` text or chat messages) against ``policy``.

        ``scope``: ``"conversation"`` judges it whole, ``"last-turn"`` only its last message in the
        context of the earlier ones (the prompt says so; not with the official program).
        Safe to call from inside a running event loop (it then runs on a worker thread).

        Raises:
            DataError: a malformed policy or conversation (before any LM call).
            ConfigError: the guard is closed, no LM was given and none is configured in DSPy, or
                the scope is not one this guard judges.
        """
        self._refuse_closed()
        case = self.case(policy, conversation, framework=framework, scope=scope)
        return _run_sync(self._verdict(case, self._live_lm()))  # its loop's pools close with it

    async def acheck(
        self,
        policy: str,
        conversation: str | list[dict[str, Any]],
        *,
        framework: str = "",
        scope: str = "conversation",
    ) -> Verdict:
        """The async twin of :meth:`check`; close the guard on this loop (``async with``, ``aclose``)."""
        self._refuse_closed()
        case = self.case(policy, conversation, framework=framework, scope=scope)
        lm = self._live_lm()
        if all(lm is not known for known in self._used):
            self._used.append(lm)  # its pool on this loop stays open for the next check, until aclose
        return await self._verdict(case, lm)

    @property
    def closed(self) -> bool:
        """``True`` once :meth:`close` or :meth:`aclose` ran: further checks are refused."""
        return self._closed

    async def aclose(self) -> None:
        """Close the connection pools this guard's ``acheck`` calls opened on the running event
        loop; a closed guard refuses further checks. Closing twice is a no-op."""
        self._closed = True
        used, self._used = self._used, []
        for lm in used:
            await close_transport(lm)

    def close(self) -> None:
        """Close the guard: ``check`` closes its pools as each call ends; pools ``acheck`` opened
        belong to their event loop, so inside one this refuses (``await guard.aclose()`` there)."""
        self._closed = True
        if self._used:
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # their loop has ended: nothing of them is left to close
                self._used = []
            else:
                raise ConfigError(
                    "Guard.close: acheck opened connections on this event loop; "
                    "close them with `await guard.aclose()` (or `async with Guard.load(...)`)"
                )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    def _refuse_closed(self) -> None:
        if self._closed:
            raise ConfigError("Guard: closed; load a new guard with Guard.load(...) to check again")

    def _live_lm(self) -> Any:
        lm = self._lm
        if lm is None:
            lm = import_dspy().settings.lm
            if lm is None:
                raise ConfigError(
                    "Guard: no LM; pass lm= to Guard.load or configure one with dspy.configure(lm=...)"
                )
        return lm

    async def _verdict(self, case: Case, lm: Any) -> Verdict:
        dspy = import_dspy()
        adapter = dspy.JSONAdapter() if self._json_adapter else dspy.settings.adapter
        deadline = asyncio.timeout(self.deadline)  # cancels the calls in flight when it expires
        try:
            async with deadline:
                with dspy.context(adapter=adapter):
                    answer = await run_case(self.program, case, lm)
        except TimeoutError:
            if not deadline.expired():
                raise
            answer = PolicyRecord(
                id=case.id, protocol=self.program.protocol, violated_rules=None, parse_status="error",
                error_class=DEADLINE,
                error=f"no answer within the check's deadline of {self.deadline:g} s "
                "(Guard.load(deadline=...); timeout and num_retries bound each call)",
            )  # fmt: skip
        model = self._model or str(getattr(lm, "model", "unknown"))
        return Verdict.of(case, answer, program=self.label, model=model)

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return f"Guard(program={self.label!r}, protocol={self.protocol!r}, model={self._model!r}{state})"


def _checked_deadline(deadline: float | None) -> float | None:
    valid = (
        isinstance(deadline, int | float) and not isinstance(deadline, bool) and 0 < deadline < float("inf")
    )
    if deadline is not None and not valid:
        raise ConfigError(f"Guard.load: deadline {deadline!r}: expected a positive number of seconds or None")
    return deadline


def _resolve_lm(
    lm: LMConfig | str | Any | None, models_file: str | Path | None, settings: dict[str, Any]
) -> tuple[Any | None, str | None, bool]:
    """``(dspy LM or None, model string or None, JSON-schema endpoint)`` for what ``load`` got."""
    if lm is None or not isinstance(lm, str | LMConfig):
        if settings:
            raise ConfigError(
                f"Guard.load: LM settings ({', '.join(sorted(settings))}) need lm= as a model "
                "string, a configured name or an LMConfig"
            )
        if lm is None:
            return None, None, False
        if isinstance(lm, import_dspy().BaseLM):
            return lm, str(lm.model), False
        raise ConfigError(f"lm: expected an LMConfig, a model string or a dspy.LM, got {type(lm).__name__}")
    if lm == "local":
        raise ConfigError(
            "lm='local': the embedded model is started by the CLI; run `sp-dspy serve` and pass "
            "lm='openai/local' with api_base= its endpoint"
        )
    config = lm if isinstance(lm, LMConfig) else _named_config(lm, models_file)
    if settings:
        config = _with_settings(config, settings)
    return make_lm(config), config.model, config.json_schema


def _named_config(spec: str, models_file: str | Path | None) -> LMConfig:
    """A model string as is, or a name looked up in the models YAML (as ``--lm`` does)."""
    path = Path(models_file) if models_file is not None else None
    if path is not None and not path.is_file():
        raise ConfigError(f"models_file {str(path)!r}: no such file")
    configured = load_configured_models(path)
    try:
        return resolve_model_config(spec, configured)
    except ConfigError as exc:  # its message names the CLI flag; here the argument is lm=
        raise ConfigError(f"lm={spec!r}: {str(exc).partition(': ')[2]}") from None


def _with_settings(config: LMConfig, settings: dict[str, Any]) -> LMConfig:
    unknown = sorted(set(settings) - set(LMConfig.model_fields) - {"model"})
    if unknown or "model" in settings:
        raise ConfigError(
            f"Guard.load: unknown LM setting(s) {', '.join(unknown or ['model'])}; "
            f"expected some of {', '.join(f for f in LMConfig.model_fields if f not in ('model', 'name'))}"
        )
    try:
        return LMConfig.model_validate({**config.model_dump(), **settings})
    except ValidationError as exc:
        field, message = validation_problem(exc)
        raise ConfigError(f"Guard.load: LM setting {field}: {message}") from None


def _run_sync(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coroutine`` from synchronous code; inside a running loop, on a thread carrying this context."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(closing_transports(coroutine))
    future: concurrent.futures.Future[_T] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            future.set_result(asyncio.run(closing_transports(coroutine)))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=context.run, args=(run,), daemon=True).start()
    return future.result()
