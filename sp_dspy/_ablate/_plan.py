"""The ablation plan, saved as ``OUTDIR/plan.json`` (secrets masked; a valid ``--plan`` file).

A resumed ablation must ask the same model the same cases with the same sampling, or
its rows would silently compare two different setups.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .._compile._artifact import write_json
from .._data._scan import read_json_file
from .._errors import ConfigError, DataError, validation_problem
from .._lm import LMConfig
from .._lm._config import ANSWER_SETTINGS
from .._runner import DataSelection
from .._runner._config import Parser
from .._runner._paths import RunId
from .._user_dirs import ensure_writable_dir
from .._writer_lock import WriterLock
from .._yaml_lines import read_yaml_mapping
from ._variants import DEFAULT_VARIANTS

PLAN_FILE = "plan.json"
#: Held while an ablation writes its ``--out`` (removed when it ends).
LOCK_FILE = "ablate.lock"


class AblationPlan(BaseModel):
    """What an ablation runs; built from flags over an optional YAML ``--plan`` file."""

    model_config = ConfigDict(extra="forbid")

    lm: LMConfig
    variants: list[str] = Field(default_factory=lambda: list(DEFAULT_VARIANTS), min_length=1)
    data: DataSelection = Field(default_factory=DataSelection)
    parser: Parser = "strict"
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


def _flatten(document: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(document, dict):
        return {prefix: document}
    flat: dict[str, Any] = {}
    for key, value in document.items():
        flat.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def first_difference(old: dict[str, Any], new: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """(dotted field, old value, new value) of the first field that differs, or None."""
    flat_old, flat_new = _flatten(old), _flatten(new)
    for key in [*flat_old, *(k for k in flat_new if k not in flat_old)]:
        if flat_old.get(key) != flat_new.get(key):
            return key, flat_old.get(key), flat_new.get(key)
    return None


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
    found = first_difference(old, new)
    if found is None:
        return plan
    field, was, now = found
    if resume:
        raise ConfigError(
            f"--resume: {where} ran with {field}={was!r}, this run asks for {now!r};"
            " resuming would mix two setups in one report (use another --out)"
        )
    raise ConfigError(
        f"{out} holds a different ablation ({where}: {field}={was!r}, now {now!r});"
        " pass --resume to continue it, or choose another --out"
    )
