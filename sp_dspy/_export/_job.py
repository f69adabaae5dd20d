"""``sp-dspy export``'s job from Python: results as inspect_ai logs or MLflow runs.

``export_results(ExportConfig(files=[...], to="inspect", out="logs"))`` scores each file exactly
as ``sp-dspy score`` scores it (``scored_file``: the same loader, selection and ``score``), so an
exported log or MLflow run holds the numbers ``score`` prints, then writes one inspect_ai log or
logs one MLflow run per file. The target is checked before anything is scored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .._errors import ConfigError
from .._scoring import NBoot, Note, Notify, RecordedSelection, config_from_flags
from ._mlflow import MlflowLogger, check_tracking_uri, log_variant, tracking_uri
from ._scored import ScoredRun, scored_file
from ._tracking import MlflowConfig


class ExportConfig(BaseModel):
    """What ``sp-dspy export FILES`` exports, and where (each field is the flag of its name; ``to``:
    ``inspect`` writes ``.eval`` logs into ``out``, ``mlflow`` logs runs into ``mlflow``'s store)."""

    model_config = ConfigDict(extra="forbid")

    files: list[Path] = Field(min_length=1)  # one variant each
    to: Literal["inspect", "mlflow"]
    out: Path | None = None  # --to inspect: the folder the logs go into
    mlflow: MlflowConfig = Field(default_factory=MlflowConfig)  # --to mlflow: --mlflow-uri/-experiment
    data: RecordedSelection = Field(default_factory=RecordedSelection)
    cap_aware: bool = False  # also exclude completions of >= 65,000 tokens
    skip_bad_lines: bool = False  # count malformed result lines instead of failing
    seed: int = 0
    n_boot: NBoot = 1000  # bootstrap resamples for the 95% intervals (0: none)


def build_export_config(settings: dict[str, Any]) -> ExportConfig:
    """``settings`` (the flags' values by field name) as an ``ExportConfig``; a bad value is one
    ``ConfigError`` naming its flag (``--to: ...``, ``--mlflow-uri: ...``, ``FILES: ...``)."""
    return config_from_flags(
        ExportConfig, settings, arguments={"files": "FILES"}, sections={"mlflow": "mlflow-"}
    )


@dataclass(frozen=True)
class ExportedRun:
    """One file exported: the variant as ``score`` scored it (``scored``: its label, cases and report),
    and where it went (``destination``: the ``.eval`` log written, or the MLflow run's id)."""

    scored: ScoredRun
    destination: str


@dataclass(frozen=True)
class ExportOutcome:
    """What ``export`` did: the ``runs`` in the order of the files, ``where`` they went (the logs'
    folder, or the MLflow tracking store's URI), and the ``notes`` said while scoring them."""

    to: Literal["inspect", "mlflow"]
    where: str
    runs: list[ExportedRun]
    notes: list[Note] = field(default_factory=list)


def require_inspect() -> None:
    """One line naming the extra when inspect_ai is not installed."""
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        raise ConfigError("--to inspect needs inspect_ai: pip install 'sp-dspy[inspect]'") from None


def check_export_target(config: ExportConfig) -> str:
    """Refuse a target that cannot be written before anything is scored; where the runs go (the
    logs' folder, or the MLflow store's URI, reached once)."""
    if config.to == "inspect":
        if config.out is None:
            raise ConfigError("--to inspect needs --out DIR (the folder the logs go into)")
        require_inspect()
        if config.out.exists() and not config.out.is_dir():
            raise ConfigError(f"--out {config.out}: exists and is not a folder")
        return str(config.out)
    uri = tracking_uri(config.mlflow.uri)
    if uri is None:
        raise ConfigError("--to mlflow needs --mlflow-uri URI (or MLFLOW_TRACKING_URI)")
    check_tracking_uri(uri)
    return uri


def export_results(config: ExportConfig, *, notify: Notify | None = None) -> ExportOutcome:
    """Export ``config.files`` as ``sp-dspy export`` does: the target checked, every file scored as
    ``score`` scores it, then one inspect_ai log or MLflow run each. ``notify`` gets each note as the
    data loads (the command prints it on stderr); the notes are kept in the outcome."""
    notes: list[Note] = []

    def say(note: Note) -> None:
        notes.append(note)
        if notify is not None:
            notify(note)

    where = check_export_target(config)
    scored = [
        scored_file(
            file, data=config.data, cap_aware=config.cap_aware, skip_bad_lines=config.skip_bad_lines,
            seed=config.seed, n_boot=config.n_boot, notify=say,
        )
        for file in config.files
    ]  # fmt: skip
    if config.to == "inspect":
        from ._inspect import write_inspect_logs

        written = write_inspect_logs(scored, Path(where))
        runs = [ExportedRun(run, str(path)) for run, path in zip(scored, written, strict=True)]
    else:
        logger = MlflowLogger(where, config.mlflow.experiment)
        runs = [ExportedRun(run, log_variant(logger, run)) for run in scored]
    return ExportOutcome(config.to, where, runs, notes)
