"""Programs by name, compiled programs from disk, and one way to run any of them on a case.

Loading an artifact never runs code from it: bounded JSON, checked keys, ``load_state``; saved
LM settings are dropped so a downloaded artifact cannot redirect requests (and keys) elsewhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from pydantic import BaseModel, ConfigDict, ValidationError

from sp_dspy.errors import ConfigError, DataError, validation_problem
from sp_dspy.files import read_json_file
from sp_dspy.lm import answer_price, history_batched, history_usage
from sp_dspy.protocol import build_targets, framework_for, parse_policy_output

from ._examples import case_to_example
from ._native import GuardFormat, NativePerPolicy, NativePerRule, check_protocol
from ._official import OfficialPerPolicy, OfficialPerRule, lm_errors
from ._outputs import JudgmentRecord, PolicyRecord, Protocol, Status, Usage, error_fields

if TYPE_CHECKING:
    import dspy

    from sp_dspy.data import Case
    from sp_dspy.protocol import RuleTarget

GUARD_PROGRAMS: Final = ("llama-guard", "granite-guardian", "shieldgemma", "dynaguard", "gpt-oss-safeguard")
"""Guard models asked in their own authors' format (``_guard_formats``, ``_policy_formats``)."""
PROGRAM_NAMES: Final = ("official", "dspy", "dspy-cot", "dspy-severity", "dspy-severity-cot", *GUARD_PROGRAMS)
RAW_PROGRAMS: Final = ("official", *GUARD_PROGRAMS)
"""Programs that send their own messages (no DSPy adapter): nothing of them is compiled."""
PROGRAM_SUMMARIES: Final = {
    "official": "the reference harness's prompt and parser, as published (the baseline)",
    "dspy": "a DSPy signature of the same task, compilable by every optimizer",
    "dspy-cot": "the dspy program with chain of thought (a reasoning field before the answer)",
    "dspy-severity": "PKU-SafeRLHF: the rules violated plus the response's safe flag and severity",
    "dspy-severity-cot": "dspy-severity with chain of thought",
    "llama-guard": "Llama Guard 3/4 in its own prompt format (docs/guard-models.md)",
    "granite-guardian": "Granite Guardian in its served version's format (docs/guard-models.md)",
    "shieldgemma": "ShieldGemma in its own prompt format (docs/guard-models.md)",
    "dynaguard": "DynaGuard in its own prompt format (docs/guard-models.md)",
    "gpt-oss-safeguard": "gpt-oss-safeguard in its own prompt format (docs/guard-models.md)",
}
"""One line per program of ``PROGRAM_NAMES``: what ``sp-dspy list-programs`` says it is."""
SEVERITY_PROGRAMS: Final = ("dspy-severity", "dspy-severity-cot")
"""Per-policy only: they predict a response's safe flag and severity besides its rule set."""
PROTOCOLS: Final[tuple[Protocol, ...]] = ("per-policy", "per-rule")
MANIFEST_FILE: Final = "manifest.json"
ARTIFACT_KIND: Final = "sp-dspy-compiled-guard"
"""The ``kind`` of a compiled artifact's manifest (a run's manifest, a split file are other kinds)."""
STATE_FILE: Final = "program.json"

GuardProgram: TypeAlias = (
    "OfficialPerPolicy | OfficialPerRule | NativePerPolicy | NativePerRule | dspy.Module"
)
RawProgram: TypeAlias = "OfficialPerPolicy | OfficialPerRule | NativePerPolicy | NativePerRule"


def _dspy_classes() -> dict[tuple[str, str], Any]:
    """The DSPy program classes by ``(name, protocol)`` (imported here: they import DSPy)."""
    from ._per_policy import PerPolicyGuard, PerPolicyGuardCoT
    from ._per_rule import PerRuleGuard, PerRuleGuardCoT
    from ._pku import PkuSeverityGuard, PkuSeverityGuardCoT

    return {
        ("dspy", "per-policy"): PerPolicyGuard,
        ("dspy-cot", "per-policy"): PerPolicyGuardCoT,
        ("dspy", "per-rule"): PerRuleGuard,
        ("dspy-cot", "per-rule"): PerRuleGuardCoT,
        ("dspy-severity", "per-policy"): PkuSeverityGuard,
        ("dspy-severity-cot", "per-policy"): PkuSeverityGuardCoT,
    }


def guard_format(name: str, **options: Any) -> GuardFormat:
    """The format of guard program ``name`` (in ``GUARD_PROGRAMS``) with its options."""
    from ._guard_formats import GraniteGuardian, LlamaGuard, ShieldGemma
    from ._policy_formats import DynaGuard, GptOssSafeguard

    classes: dict[str, Any] = {
        "llama-guard": LlamaGuard, "granite-guardian": GraniteGuardian, "shieldgemma": ShieldGemma,
        "dynaguard": DynaGuard, "gpt-oss-safeguard": GptOssSafeguard,
    }  # fmt: skip
    try:
        return classes[name](**options)
    except TypeError:
        raise ConfigError(f"program {name!r}: unsupported option(s) {', '.join(sorted(options))}") from None


def default_protocol(name: str) -> str:
    """The protocol a program name runs when none is asked: per-policy, or a guard format's only one."""
    return guard_format(name).protocols[0] if name in GUARD_PROGRAMS else "per-policy"


def is_raw_program(program: Any) -> bool:
    """Whether ``program`` sends its own messages (official baselines, guard formats): no adapter."""
    return isinstance(program, OfficialPerPolicy | OfficialPerRule | NativePerPolicy | NativePerRule)


def make_program(name: str, protocol: str = "per-policy", **options: Any) -> GuardProgram:
    """A fresh program: ``name`` in ``PROGRAM_NAMES``, ``protocol`` in ``PROTOCOLS``.

    Options: ``official`` takes ``mode`` ('strict'|'robust'), and for per-rule also
    ``layout`` ('official'|'prefix') and ``max_concurrency``; per-rule DSPy programs
    take ``max_concurrency``; per-policy DSPy programs (``dspy-severity`` too) take none.
    """
    if protocol not in PROTOCOLS:
        raise ConfigError(f"protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    if name not in PROGRAM_NAMES:
        raise ConfigError(f"program {name!r}: expected one of {', '.join(PROGRAM_NAMES)}")
    if name in SEVERITY_PROGRAMS and protocol != "per-policy":
        raise ConfigError(f"program {name!r}: per-policy only (one call grades the whole response)")
    if name in GUARD_PROGRAMS:
        concurrency = options.pop("max_concurrency", None)
        fmt = guard_format(name, **options)
        check_protocol(fmt, protocol)
        if protocol == "per-policy":
            if concurrency is not None:
                raise ConfigError(f"program {name!r} (per-policy): unsupported option(s) max_concurrency")
            return NativePerPolicy(fmt)
        return NativePerRule(fmt) if concurrency is None else NativePerRule(fmt, max_concurrency=concurrency)
    if name == "official":
        factory: Any = OfficialPerPolicy if protocol == "per-policy" else OfficialPerRule
    else:
        factory = _dspy_classes()[(name, protocol)]
    try:
        return factory(**options)
    except TypeError:
        raise ConfigError(
            f"program {name!r} ({protocol}): unsupported option(s) {', '.join(sorted(options))}"
        ) from None


def program_spec(program: GuardProgram) -> dict[str, str]:
    """``{"program": name, "protocol": protocol}``: the manifest fields ``load_program`` reads."""
    if isinstance(program, OfficialPerPolicy | OfficialPerRule):
        return {"program": "official", "protocol": program.protocol}
    if isinstance(program, NativePerPolicy | NativePerRule):
        return {"program": program.name, "protocol": program.protocol}
    names = {cls: name for (name, _), cls in _dspy_classes().items()}
    name = next((names[cls] for cls in type(program).__mro__ if cls in names), "dspy")
    return {"program": name, "protocol": program.protocol}


class _FieldState(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prefix: str
    description: str


class _SignatureState(BaseModel):
    model_config = ConfigDict(extra="forbid")
    instructions: str
    fields: list[_FieldState]


class _PredictorState(BaseModel):
    """The keys ``dspy.Predict.dump_state`` writes; ``load_state`` would set any other key as an attribute."""

    model_config = ConfigDict(extra="forbid")
    traces: list[Any] = []
    train: list[Any] = []
    demos: list[dict[str, Any]] = []
    signature: _SignatureState
    lm: dict[str, Any] | None = None
    fields: dict[str, Any] | None = None


def load_program(artifact_dir: str | Path, **options: Any) -> dspy.Module:
    """The compiled DSPy program saved in ``artifact_dir`` (``manifest.json`` + ``program.json``).

    ``options`` are runtime options for ``make_program`` (e.g. ``max_concurrency``);
    what was learned (instructions, demos) comes from the artifact.
    """
    artifact_dir = Path(artifact_dir)
    manifest_path = artifact_dir / MANIFEST_FILE
    manifest = read_json_file(manifest_path, "artifact manifest")
    if not isinstance(manifest, dict):
        raise DataError(f"{manifest_path}: expected a JSON object")
    kind = manifest.get("kind", ARTIFACT_KIND)  # the first artifacts wrote no kind
    if kind != ARTIFACT_KIND:
        raise DataError(
            f"{manifest_path}: field 'kind' is {kind!r:.60}, expected {ARTIFACT_KIND!r} (not an artifact)"
        )
    name, protocol = manifest.get("program"), manifest.get("protocol")
    if name in RAW_PROGRAMS or name not in PROGRAM_NAMES:
        expected = ", ".join(repr(n) for n in PROGRAM_NAMES if n not in RAW_PROGRAMS)
        raise DataError(f"{manifest_path}: field 'program' is {name!r}, expected one of {expected}")
    if protocol not in PROTOCOLS:
        raise DataError(f"{manifest_path}: field 'protocol' is {protocol!r}, expected one of {PROTOCOLS}")
    if name in SEVERITY_PROGRAMS and protocol != "per-policy":
        raise DataError(f"{manifest_path}: field 'protocol' is {protocol!r}, but {name} is per-policy only")
    program: Any = make_program(name, protocol, **options)
    state_path = artifact_dir / STATE_FILE
    state = read_json_file(state_path, "artifact program state")
    if not isinstance(state, dict):
        raise DataError(f"{state_path}: expected a JSON object of predictor states")
    predictors = [predictor_name for predictor_name, _ in program.named_predictors()]
    checked: dict[str, Any] = {}
    for predictor_name in predictors:
        if predictor_name not in state:
            raise DataError(
                f"{state_path}: no state for predictor {predictor_name!r} of a {name} {protocol} program"
            )
        try:
            parsed = _PredictorState.model_validate(state[predictor_name])
        except ValidationError as exc:
            where, message = validation_problem(exc)
            raise DataError(
                f"{state_path}: predictor {predictor_name!r}, field '{where}': {message}"
            ) from None
        checked[predictor_name] = parsed.model_dump(exclude_none=True) | {"lm": None}
    extra = [key for key in state if key not in checked and key != "metadata"]  # DSPy's save block
    if extra:  # ``load_state`` would ignore it: the state of another program, silently half-loaded
        raise DataError(
            f"{state_path}: predictor {extra[0]!r:.60} is not one of a {name} {protocol} program "
            f"(it has {', '.join(map(repr, predictors))})"
        )
    try:
        program.load_state(checked)
    except (KeyError, ValueError, TypeError) as exc:
        raise DataError(f"{state_path}: state does not fit a {name} {protocol} program ({exc})") from None
    return program


def resolve_program(
    spec: str | Path,
    protocol: str | None = None,
    *,
    parser: str = "strict",
    constrained: bool = False,
    layout: str = "official",
    max_concurrency: int | None = None,
    flags: bool = False,
) -> tuple[GuardProgram, Path | None]:
    """The program ``spec`` names, and the artifact directory it was loaded from (``None``: a name).

    A ``Path`` is always an artifact directory; a string is one when such a directory exists
    (it wins over a program name), else a name in ``PROGRAM_NAMES``. ``protocol`` defaults to
    per-policy for a name and must match an artifact's own. ``parser``, ``constrained`` and
    ``layout`` configure the official baseline; ``max_concurrency`` (per-rule programs) the
    judgments a whole-case call runs at once. ``flags``: errors name the CLI options
    (``--program``, ``--protocol``) instead of the API arguments.
    """
    path = Path(spec)
    if isinstance(spec, Path) or path.is_dir():
        if not path.is_dir():
            raise ConfigError(
                f"{'--program' if flags else 'program'} {str(path)!r}: no such artifact directory"
            )
        program: Any = load_program(path)
        if protocol is not None and protocol != program.protocol:
            if flags:
                raise ConfigError(
                    f"--protocol {protocol}: the artifact {path} is a {program.protocol} program; "
                    "drop --protocol (an artifact runs its own protocol)"
                )
            raise ConfigError(
                f"{path}: the artifact is a {program.protocol} program; protocol {protocol!r} does not apply"
            )
        if max_concurrency is not None and program.protocol == "per-rule":
            program.max_concurrency = max_concurrency
        return program, path
    if spec not in PROGRAM_NAMES:
        expected = f"expected {', '.join(PROGRAM_NAMES)} or an artifact directory"
        if flags:
            raise ConfigError(f"--program: {expected}, got {spec!r}")
        raise ConfigError(f"program {spec!r}: {expected} (no such directory)")
    protocol = protocol or default_protocol(spec)
    options: dict[str, Any] = {}
    if max_concurrency is not None and protocol == "per-rule":
        options["max_concurrency"] = max_concurrency
    if spec == "official":
        options.update(mode=parser, constrained=constrained)
        if protocol == "per-rule":
            options["layout"] = layout
    return make_program(spec, protocol, **options), None


def history_accounting(lm: Any) -> tuple[Usage, int, int]:
    """Tokens and USD (``None``: unpriced), cache hits and batch answers of the answers in ``lm.history``.

    Counted as the official path counts them: a replayed answer keeps its tokens and
    cost, a call DSPy left unpriced (sp-dspy's HTTP engine) is priced by that engine, and
    one of the run's batch answers counts as batched, not as a cache hit, however DSPy handed it over.
    """
    usage, hits, batched = Usage(), 0, 0
    for entry in getattr(lm, "history", []):
        tokens, cached = history_usage(entry)
        tokens = tokens or Usage()
        cost = entry.get("cost")
        usage = usage + tokens.model_copy(update={"cost": answer_price(lm, tokens) if cost is None else cost})
        from_batch = history_batched(lm, entry)
        hits += cached and not from_batch
        batched += from_batch
    return usage, hits, batched


async def run_case(program: GuardProgram, case: Case, lm: dspy.LM) -> PolicyRecord:
    """Run any guard program on one case with ``lm`` and return its answer (``PolicyRecord``).

    Never raises for what the model does: an answer the adapter cannot parse becomes
    ``failed`` (or ``refused`` when it is a refusal) and a failed LM call ``error``.
    """
    import dspy

    if isinstance(program, OfficialPerPolicy | OfficialPerRule | NativePerPolicy | NativePerRule):
        with dspy.context(disable_history=True):  # see judge_target
            return await program.acall_case(case, lm)

    from ._pku import severity_fields

    protocol: Protocol = program.protocol
    inputs = case_to_example(case, protocol).inputs().toDict()
    case_lm = lm.copy()  # its own history: the cost of this case's calls only
    with dspy.context(lm=case_lm):
        try:
            prediction = await program.acall(**inputs)
        except (dspy.AdapterParseError, *lm_errors()) as exc:
            prediction = exc
    usage, cache_hits, batched = history_accounting(case_lm)
    common: dict[str, Any] = dict(
        id=case.id, protocol=protocol, usage=usage, cache_hits=cache_hits, batched=batched
    )
    if isinstance(prediction, dspy.AdapterParseError):
        refused = parse_policy_output(str(prediction.lm_response or ""), mode="robust").refused
        status: Status = "refused" if refused else "failed"
        return PolicyRecord(
            **common, violated_rules=None, parse_status=status, refused=refused, parse_failed=not refused,
            answer=str(prediction.lm_response or ""),
        )  # fmt: skip
    if isinstance(prediction, Exception):
        return PolicyRecord(**common, violated_rules=None, parse_status="error", **error_fields(prediction))
    reasoning = str(prediction.get("reasoning", "") or "")
    if protocol == "per-policy":
        rules = sorted(set(prediction.violated_rules))
        return PolicyRecord(
            **common,
            violated_rules=rules,
            parse_status="clean",
            reasoning=reasoning,
            **severity_fields(prediction),
        )
    gold = {target.rule: target.gold for target in build_targets(case)}
    judgments = [j.model_copy(update={"cid": case.id, "gt": gold.get(j.rule)}) for j in prediction.judgments]
    return PolicyRecord(
        **common,
        violated_rules=prediction.violated_rules,
        parse_status=prediction.status,
        refused=prediction.status == "refused",
        judgments=judgments,
    )


async def judge_target(program: GuardProgram, case: Case, target: RuleTarget, lm: dspy.LM) -> JudgmentRecord:
    """One per-rule judgment of ``case`` by a per-rule program (the runner resumes per judgment)."""
    import dspy

    from ._per_rule import PerRuleGuard, hand_up_usage

    if isinstance(program, OfficialPerRule | NativePerRule):
        # Its answers are read from each call's result; DSPy's history (its last 10,000 calls)
        # would keep every answer whole, so memory would grow with what the model returns.
        with dspy.context(disable_history=True):
            return await program.ajudge(case, target, lm)
    if not isinstance(program, PerRuleGuard):
        raise ConfigError(f"{type(program).__name__} is not a per-rule program")
    target_lm = lm.copy()  # its own history: the cost of this judgment only
    with dspy.context(lm=target_lm):
        judgment, usage_data = await program._ajudge(target, framework_for(case), case.conversation)
    hand_up_usage(dspy.settings.usage_tracker, [usage_data])  # as a whole case's forward() does
    usage, cache_hits, batched = history_accounting(target_lm)
    return judgment.model_copy(
        update={
            "cid": case.id,
            "gt": target.gold,
            "usage": usage,
            "cache_hits": cache_hits,
            "batched": batched,
        }
    )
