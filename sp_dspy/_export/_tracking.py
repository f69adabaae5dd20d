"""What ``--mlflow-uri`` logs once a job has run: ``eval``'s results files, ``compile``'s artifact,
``ablate``'s and ``experiment``'s plan (a parent run with a child per variant and per compile).

Each function reads what the job wrote and scores it as ``sp-dspy score`` does (``scored_file``),
so MLflow shows the numbers the terminal printed; each returns the MLflow runs it made (the
commands print them). ``MlflowConfig.checked`` reaches the tracking store before the job runs,
so an unusable store is one line before any LM call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from .._errors import ConfigError, DataError
from .._run_manifest import read_run_manifest
from .._scoring import Notify
from ._mlflow import (
    DEFAULT_EXPERIMENT,
    MlflowLogger,
    check_tracking_uri,
    log_compile,
    log_variant,
    tracking_uri,
)
from ._scored import scored_file


class MlflowConfig(BaseModel):
    """Where a job's results are logged: the tracking store (``--mlflow-uri``; None: the environment's
    ``MLFLOW_TRACKING_URI``, else nowhere) and the experiment (``--mlflow-experiment``)."""

    model_config = ConfigDict(extra="forbid")

    uri: str | None = None
    experiment: str = DEFAULT_EXPERIMENT

    def checked(self) -> MlflowConfig | None:
        """This config with its store resolved and reached once (a ``ConfigError`` line when it cannot
        be used), before any LM call; None when neither the URI nor the environment names a store."""
        resolved = tracking_uri(self.uri)
        if resolved is None:
            return None
        check_tracking_uri(resolved)
        return self.model_copy(update={"uri": resolved})

    def logger(self) -> MlflowLogger:
        """The logger into this store and experiment."""
        resolved = tracking_uri(self.uri)
        if resolved is None:
            raise ConfigError("--mlflow-uri: no tracking store given (and no MLFLOW_TRACKING_URI)")
        return MlflowLogger(resolved, self.experiment)


@dataclass(frozen=True)
class LoggedRun:
    """One MLflow run logged: its ``label`` (the run's name) and ``run_id``."""

    label: str
    run_id: str


@dataclass(frozen=True)
class LoggedPlan:
    """An ablation's or experiment's MLflow runs: ``kind`` (``ablation`` or ``experiment``), the parent
    ``run_id``, and its ``children`` (one per variant, then per compile)."""

    kind: str
    run_id: str
    children: list[LoggedRun] = field(default_factory=list)


def mlflow_log_eval(
    config: MlflowConfig, results_files: Sequence[Path], *, notify: Notify | None = None
) -> list[LoggedRun]:
    """``eval --mlflow-uri``: one MLflow run per model's results file (``notify``: the scoring's notes)."""
    logger = config.logger()
    logged = []
    for file in results_files:
        run = scored_file(file, notify=notify)
        logged.append(LoggedRun(run.label, log_variant(logger, run)))
    return logged


def mlflow_log_compile(config: MlflowConfig, artifact: Path) -> LoggedRun:
    """``compile --mlflow-uri``: the compile's run, its candidates' dev scores as steps."""
    name = f"compile {artifact.name}"
    return LoggedRun(name, log_compile(config.logger(), artifact, name=name))


def mlflow_log_plan(config: MlflowConfig, out: Path, *, notify: Notify | None = None) -> LoggedPlan:
    """``ablate``/``experiment --mlflow-uri``: a parent run (summary, report) with a child per variant
    and, for an experiment, one per compile."""
    summary_file = out / "summary.json"
    try:
        summary = json.loads(summary_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"{summary_file}: no summary to log to MLflow ({exc})") from None
    kind = "experiment" if summary.get("kind") == "sp-dspy-experiment" else "ablation"
    logger = config.logger()
    parent = logger.start(f"{kind} {out.name}", tags={"sp_dspy.kind": kind})
    saved = (
        summary_file,
        out / "report.html",
        out / "plan.json",
        out / "experiment.json",
    )  # the plan as saved
    logger.log(parent, params=_plan_params(summary), artifacts=[path for path in saved if path.is_file()])
    children = []
    for label, file, params, extra in _plan_variants(out, summary):
        run = scored_file(file, label=label, notify=notify)
        children.append(LoggedRun(label, log_variant(logger, run, parent=parent, params=params)))
        for artifact in extra:
            name = f"compile {label}"
            children.append(LoggedRun(name, log_compile(logger, artifact, parent=parent, name=name)))
    logger.finish(parent)
    return LoggedPlan(kind, parent, children)


def _plan_variants(out: Path, summary: dict[str, Any]) -> list[tuple[str, Path, dict[str, Any], list[Path]]]:
    """``(label, results file, extra params, extra artifacts)`` of each variant an ablation or
    experiment wrote under ``out``, from its summary and the manifests of ``out/results``."""
    found: list[tuple[str, Path, dict[str, Any], list[Path]]] = []
    if summary.get("kind") == "sp-dspy-experiment":
        labels: dict[str, tuple[dict[str, Any], list[Path]]] = {
            summary["baseline"]: ({"optimizer": "none (baseline)"}, [])
        }
        for optimizer in summary.get("optimizers", []):
            for seed in optimizer.get("seeds", []):
                artifact = [Path(seed["artifact"])] if seed.get("artifact") else []
                labels[seed["label"]] = ({"optimizer": seed["optimizer"], "seed": seed["seed"]}, artifact)
        for manifest_file in sorted((out / "results").glob("manifest_*.json")):
            manifest = read_run_manifest(manifest_file)
            if manifest is None:
                continue
            label = manifest.run_id.removeprefix("experiment-")
            if label not in labels:
                continue
            for model_run in manifest.runs.values():
                file = out / "results" / Path(model_run.results_file).name
                found.append((label, file, *labels[label]))
        return found
    for variant in summary.get("variants", []):
        for name in variant.get("files", []):
            file = out / "results" / Path(name).name
            found.append((variant["label"], file, {"variant": variant.get("variant")}, []))
    return found


def _plan_params(summary: dict[str, Any]) -> dict[str, Any]:
    """The parent run's params: an experiment's plan (its ``data`` settings a param each, as they
    were before the plan nested them), an ablation's data and statistics settings."""
    from .._ablate import EXPERIMENT_DATA_KEYS

    plan = summary.get("plan") or {
        key: summary.get(key) for key in ("benchmark", "dataset", "n_boot", "seed")
    }
    data = plan.get("data")
    if isinstance(data, dict):
        plan = {key: value for key, value in plan.items() if key != "data"}
        plan.update({key: data.get(key) for key in EXPERIMENT_DATA_KEYS})
    return {key: value for key, value in plan.items() if value is not None}
