"""The plans of an ablation (``OUTDIR/plan.json``) and of an experiment (``OUTDIR/experiment.json``),
saved with secrets masked (each a valid ``--plan`` file), and the check that a resumed one is the same.

A resumed ablation must ask the same model the same cases with the same sampling, or
its rows would silently compare two different setups; both compare identities with the one
identity check (``sp_dspy._runner._identity``), as ``eval --resume`` does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails

from sp_dspy.optimizers import OPTIMIZER_NAMES, get_recipe, load_settings
from sp_dspy.programs import RAW_PROGRAMS

from .._budget import BudgetCaps
from .._compile import DEFAULT_RATIOS
from .._compile._artifact import write_json
from .._data import read_json_file
from .._errors import ConfigError, DataError, validation_problem
from .._lm import ANSWER_SETTINGS, LMConfig
from .._protocol import ParseMode, Protocol
from .._runner import DataSelection, RunId, first_difference, refuse_changed
from .._user_dirs import ensure_writable_dir
from .._writer_lock import WriterLock
from .._yaml_lines import read_yaml_mapping
from ._variants import DEFAULT_VARIANTS, NAMED_VARIANTS

PLAN_FILE = "plan.json"
EXPERIMENT_FILE = "experiment.json"
#: Held while an ablation writes its ``--out`` (removed when it ends).
LOCK_FILE = "ablate.lock"


class AblationPlan(BaseModel):
    """What an ablation runs; built from flags over an optional YAML ``--plan`` file."""

    model_config = ConfigDict(extra="forbid")

    lm: LMConfig
    variants: list[str] = Field(default_factory=lambda: list(DEFAULT_VARIANTS), min_length=1)
    data: DataSelection = Field(default_factory=DataSelection)
    parser: ParseMode = "strict"
    allow_overlap: bool = False  # run artifact variants on cases of their own train/dev split
    concurrency: int = Field(default=16, ge=1, le=1024)
    batch: bool = False  # every variant's requests through the provider's batch API (--batch)
    run_id: RunId | None = None
    baseline: str | None = None
    n_boot: int = Field(default=1000, ge=0)
    seed: int = 0

    @field_validator("variants", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        """``"a,b"`` (the flag's form) is the list ``[a, b]``."""
        return value.split(",") if isinstance(value, str) else value

    @field_validator("variants")
    @classmethod
    def _non_empty(cls, value: list[str]) -> list[str]:
        cleaned = [item.strip() for item in value]
        if any(not item for item in cleaned):
            raise ValueError("empty variant name (check the commas)")
        return cleaned

    def public_dict(self) -> dict[str, Any]:
        """The plan as saved: JSON types, the LM's settings without secrets."""
        document = self.model_dump(mode="json")
        document["lm"] = self.lm.public_dict()
        return document

    def identity(self) -> dict[str, Any]:
        """What a resumed ablation must share with the run it continues."""
        public = self.public_dict()
        lm = {key: public["lm"].get(key) for key in ANSWER_SETTINGS}
        return {"lm": lm, **{key: public[key] for key in ("data", "parser", "run_id")}}


def read_plan_file(path: Path) -> dict[str, Any]:
    """The mapping in a YAML (or JSON) plan file; errors name the file and line."""
    return read_yaml_mapping(
        path, "ablation plan", "a mapping of ablation settings (lm, variants, data, ...)"
    )


def build_plan(settings: dict[str, Any], where: str = "flags") -> AblationPlan:
    """Validate merged settings; the first problem becomes one line naming the field."""
    try:
        return AblationPlan.model_validate(settings)
    except ValidationError as exc:
        field, message = validation_problem(exc)
        raise ConfigError(f"{where}: field {field or 'plan'}: {message}") from None


def load_saved_plan(out: Path) -> AblationPlan | None:
    """``OUTDIR/plan.json``, or None when the directory holds no ablation yet."""
    path = out / PLAN_FILE
    if not path.exists():
        return None
    try:
        document = read_json_file(path, "ablation plan")
    except DataError as exc:
        raise ConfigError(f"{exc}; move it away or choose another --out") from None
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return build_plan(document, str(path))


def ablation_lock(out: Path) -> WriterLock:
    """The one-writer lock of the ablation in ``out`` (take it with ``with``)."""
    return WriterLock(
        out / LOCK_FILE,
        f"the ablation in {out}",
        "one ablation has one writer; wait for it to end (or stop it), then --resume",
    )


def save_plan(plan: AblationPlan, out: Path) -> Path:
    """Write ``OUTDIR/plan.json`` atomically (``OUTDIR`` checked writable first: one line, not a traceback)."""
    ensure_writable_dir(out, what="--out")
    write_json(out / PLAN_FILE, plan.public_dict())
    return out / PLAN_FILE


def reconcile(plan: AblationPlan, out: Path, *, resume: bool, new_run_id: str) -> AblationPlan:
    """The plan to run in ``out``: check it against a saved one, fill in the run id.

    Without ``resume`` a saved plan must equal this one; with it only the variant list
    may change. An omitted run id is the saved plan's on resume, else ``new_run_id``.
    """
    saved = load_saved_plan(out)
    if saved is not None:  # a plan saved with its files as typed (older versions) compares resolved
        saved = saved.model_copy(update={"data": saved.data.resolved()})
    where = out / PLAN_FILE
    if saved is None:
        if resume and plan.run_id is None:
            raise ConfigError(f"--resume: {where} does not exist, so there is no ablation to continue")
        return plan.model_copy(update={"run_id": plan.run_id or new_run_id})
    if not resume and plan.run_id is None:
        raise ConfigError(
            f"{out} already holds an ablation ({where}, run id {saved.run_id});"
            " pass --resume to continue it, or choose another --out"
        )
    plan = plan.model_copy(update={"run_id": plan.run_id or saved.run_id})
    old, new = saved.identity(), plan.identity()
    if not resume:  # the very same ablation, variants included
        old, new = {**old, "variants": saved.variants}, {**new, "variants": plan.variants}
    if resume:
        refuse_changed(old, new, where=str(where))
        return plan
    found = first_difference(old, new)
    if found is None:
        return plan
    field, was, now = found
    raise ConfigError(
        f"{out} holds a different ablation ({where}: {field}={was!r}, now {now!r});"
        " pass --resume to continue it, or choose another --out"
    )


# --- the experiment's plan (a plan of compiles, then an ablation of their artifacts) ---------------

#: Settings a resumed experiment may change: they change what it may spend, how fast or how it is
#: paid (``batch``), not its answers.
MAY_CHANGE = ("caps", "concurrency", "batch")
#: The data settings an experiment takes: which dataset and how it loads. Plans of earlier versions
#: (``experiment.json``, ``--plan`` files) held them flat, beside ``lm``; they are still read so.
EXPERIMENT_DATA_KEYS = ("dataset", "benchmark", "lenient")
_OWN_SPLIT = "an experiment makes its own split of every case of its dataset (--ratios, --split-seed)"
#: Why ``data`` may not set its other fields in an experiment (one not named here: ``_OWN_SPLIT``).
NOT_FOR_AN_EXPERIMENT = {
    "split": f"{_OWN_SPLIT}; drop it",
    "with_evidence": "an experiment's compiles read the benchmark without evidence (its split and its "
    "test evaluations read it as they do); drop it",
}


def _field_error(field: tuple[str, ...], message: str, value: Any) -> ValidationError:
    """A validation error at ``field`` (raised in a validator, pydantic reports it at that path)."""
    details = InitErrorDetails(type="value_error", loc=field, input=value, ctx={"error": ValueError(message)})
    return ValidationError.from_exception_data("ExperimentPlan", [details])


def nest_data(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with the flat data keys of an older plan (``dataset``, ``benchmark``, ``lenient``)
    moved under ``data``, where the plan holds them now.

    Raises:
        ValidationError: a key is given both flat and under ``data`` (which one is meant is unclear).
    """
    flat = {key: document[key] for key in EXPERIMENT_DATA_KEYS if key in document}
    data = document.get("data")
    if not flat or not isinstance(data, dict | DataSelection | None):
        return document  # nothing to move, or a ``data`` pydantic refuses on its own
    nested = {} if data is None else data
    if isinstance(nested, DataSelection):
        nested = nested.model_dump(exclude_unset=True)
    for key, value in flat.items():
        if key in nested:
            raise _field_error(
                ("data", key),
                f"given twice: as {key} (the older, flat form) and as data.{key}; keep data.{key}",
                value,
            )
    rest = {key: value for key, value in document.items() if key not in EXPERIMENT_DATA_KEYS}
    return {**rest, "data": {**nested, **flat}}


class ExperimentPlan(BaseModel):
    """What an experiment runs; built from flags over an optional YAML ``--plan`` file.

    ``settings``: per optimizer, settings over the optimizer file's (``{"mipro": {"num_trials": 2}}``).
    ``split_seed``: the one split every optimizer seed compiles on (the seeds vary the optimizer only).
    ``split_per_seed``: each seed compiles on a split of its own, made with that seed; every variant
    is then tested on the cases in all of their test parts (no compile saw them).
    ``seed_lm``: each compile's LMs are sent its seed as well (the request body's ``seed``), so a
    provider that samples by seed samples differently per seed and alike when a seed is rerun.
    ``batch``: the test evaluations go through the provider's batch API (ablate's ``--batch``);
    the compiles call one at a time, since an optimizer's next call depends on earlier answers.
    """

    model_config = ConfigDict(extra="forbid")

    lm: LMConfig
    prompt_lm: LMConfig | None = None
    reflection_lm: LMConfig | None = None
    #: Which dataset and how it loads (``dataset``, ``benchmark``, ``lenient``); the experiment
    #: selects no cases itself, it splits them all.
    data: DataSelection = Field(default_factory=DataSelection)
    protocol: Protocol = "per-policy"
    program: Literal["dspy", "dspy-cot"] = "dspy"
    #: The fixed-prompt program the artifacts are compared to: the official prompt, or the model's
    #: own guard format (``llama-guard``, ...) under the same protocol.
    baseline_program: str = "official"
    optimizers: list[str] = Field(default_factory=lambda: ["mipro"], min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    split_seed: int = 0
    split_per_seed: bool = False  # each seed compiles on a split of its own (seed = the optimizer seed)
    seed_lm: bool = False  # the compiles' LMs get the seed too (providers that take one: OpenAI-compatible)
    ratios: tuple[float, float, float] = DEFAULT_RATIOS
    settings: dict[str, dict[str, Any]] = Field(default_factory=dict)
    optimizer_config: Path | None = None
    top_k: int = Field(default=1, ge=1)
    caps: BudgetCaps = Field(default_factory=BudgetCaps)
    concurrency: int = Field(default=8, ge=1, le=1024)
    batch: bool = False  # the test evaluations through the provider's batch API (compiles never)
    n_boot: int = Field(default=1000, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _nested_data(cls, value: Any) -> Any:
        """A plan of an earlier version (flat ``dataset``, ``benchmark``, ``lenient``) reads as it did."""
        return nest_data(value) if isinstance(value, dict) else value

    @field_validator("optimizers", "seeds", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        """``"a,b"`` (the flag's form) is the list ``[a, b]``."""
        return [item.strip() for item in value.split(",")] if isinstance(value, str) else value

    @field_validator("data")
    @classmethod
    def _whole_dataset(cls, value: DataSelection) -> DataSelection:
        """Only the dataset and how it loads: the experiment splits every case itself, and selects none."""
        for name, info in DataSelection.model_fields.items():
            if name not in EXPERIMENT_DATA_KEYS and getattr(value, name) != info.get_default():
                reason = NOT_FOR_AN_EXPERIMENT.get(
                    name, f"{_OWN_SPLIT}; give it a dataset of just those cases"
                )
                raise _field_error((name,), reason, getattr(value, name))
        return value

    @field_validator("optimizers")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in OPTIMIZER_NAMES:
                raise ValueError(f"unknown optimizer {name!r}; expected one of {', '.join(OPTIMIZER_NAMES)}")
        if len(set(value)) < len(value):
            raise ValueError("an optimizer is listed twice")
        return value

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, value: list[int]) -> list[int]:
        if len(set(value)) < len(value):
            raise ValueError("a seed is listed twice")
        return value

    @field_validator("ratios")
    @classmethod
    def _ratios(cls, value: tuple[float, float, float]) -> tuple[float, float, float]:
        if any(part < 0 for part in value) or abs(sum(value) - 1.0) > 1e-6:
            raise ValueError("expected three non-negative train,dev,test ratios summing to 1")
        return value

    @field_validator("settings")
    @classmethod
    def _settings_of_listed(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name in value:
            if name not in OPTIMIZER_NAMES:
                raise ValueError(f"settings for unknown optimizer {name!r}")
        return value

    @model_validator(mode="after")
    def _baseline_variant(self) -> Self:
        if self.baseline not in NAMED_VARIANTS or self.baseline_program not in RAW_PROGRAMS:
            supported = sorted({p for p, protocol, _ in NAMED_VARIANTS.values() if protocol == self.protocol})
            raise ValueError(
                f"baseline_program {self.baseline_program!r}: expected one of "
                f"{', '.join(p for p in supported if p in RAW_PROGRAMS)} under {self.protocol}"
            )
        return self

    @property
    def baseline(self) -> str:
        """The baseline's variant name under this protocol (the official prompt unless set)."""
        return f"{self.baseline_program}-{self.protocol}"

    def public_dict(self) -> dict[str, Any]:
        """The plan as saved: JSON types, the LMs' settings without secrets."""
        document = self.model_dump(mode="json")
        for role in ("lm", "prompt_lm", "reflection_lm"):
            config = getattr(self, role)
            document[role] = None if config is None else config.public_dict()
        return document

    def identity(self) -> dict[str, Any]:
        """What a resumed experiment must share with the run it continues (not caps or concurrency)."""
        public = self.public_dict()
        for role in ("lm", "prompt_lm", "reflection_lm"):
            if public[role] is not None:
                public[role] = {key: public[role].get(key) for key in ANSWER_SETTINGS}
        return {key: value for key, value in public.items() if key not in MAY_CHANGE}

    def resolved(self) -> ExperimentPlan:
        """The dataset and optimizer files as absolute paths (a Hub id stays as it is), so the saved
        plan means the same from any working directory (``--resume`` from elsewhere)."""
        settings_file = (
            None if self.optimizer_config is None else self.optimizer_config.expanduser().resolve()
        )
        return self.model_copy(update={"data": self.data.resolved(), "optimizer_config": settings_file})

    def steps(self) -> list[tuple[str, int]]:
        """Every (optimizer, seed) compile, in the order they run."""
        return [(optimizer, seed) for optimizer in self.optimizers for seed in self.seeds]


def build_experiment(settings: dict[str, Any], where: str = "flags") -> ExperimentPlan:
    """Validate merged settings; the first problem becomes one line naming the field.

    Each optimizer's settings are checked now too: a bad one must not wait for the compiles before it.
    """
    try:
        plan = ExperimentPlan.model_validate(settings)
    except ValidationError as exc:
        name, message = validation_problem(exc)
        raise ConfigError(f"{where}: field {name or 'plan'}: {message}") from None
    for optimizer in plan.optimizers:
        recipe = get_recipe(optimizer)
        load_settings(
            recipe.name,
            recipe.settings_model,
            path=plan.optimizer_config,
            overrides=plan.settings.get(optimizer),
        )
    return plan


def read_experiment_file(path: Path) -> dict[str, Any]:
    """The settings in a YAML (or JSON) experiment plan, data keys under ``data`` (an older plan's
    flat ones moved there), so flags can go over them; errors name the file and line (or field)."""
    document = read_yaml_mapping(path, "experiment plan", "a mapping of experiment settings")
    if not isinstance(document.get("data"), dict | None):
        found = type(document["data"]).__name__
        raise ConfigError(f"{path}: field data: expected a mapping of data settings, got {found}")
    try:
        return nest_data(document)
    except ValidationError as exc:
        name, message = validation_problem(exc)
        raise ConfigError(f"{path}: field {name}: {message}") from None


def load_saved(out: Path) -> ExperimentPlan | None:
    """``OUTDIR/experiment.json``, or None when the directory holds no experiment yet."""
    path = out / EXPERIMENT_FILE
    if not path.exists():
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"{path}: not readable JSON ({exc}); move it away or choose another --out"
        ) from None
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return build_experiment(document, str(path))


def reconcile_experiment(plan: ExperimentPlan, out: Path, *, resume: bool) -> None:
    """Refuse to mix two experiments in one ``out``: a saved one needs ``resume`` and the same setup."""
    saved = load_saved(out)
    saved = None if saved is None else saved.resolved()
    plan = plan.resolved()
    where = out / EXPERIMENT_FILE
    if saved is None:
        if resume:
            raise ConfigError(f"--resume: {where} does not exist, so there is no experiment to continue")
        return
    if not resume:
        raise ConfigError(
            f"{out} already holds an experiment ({where}); pass --resume to continue it, or choose another --out"
        )
    refuse_changed(saved.identity(), plan.identity(), where=str(where))
