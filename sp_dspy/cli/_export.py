"""``sp-dspy export``: results as inspect_ai logs or MLflow runs, and ``--mlflow-uri`` for the jobs.

A variant is scored exactly as ``sp-dspy score`` scores it (the same loader, selection and
``score``), so an exported log or MLflow run holds the numbers ``score`` prints. The
extras are imported only here, and only when asked for.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from .._errors import ConfigError, DataError
from .._export import (
    DEFAULT_EXPERIMENT,
    MlflowLogger,
    ScoredRun,
    check_tracking_uri,
    scored_run,
    tracking_uri,
)
from .._run_manifest import read_run_manifest, run_of
from .._scoring import RecordedSelection, build_score_config, score_results
from . import _options as opt
from ._console import console, say_note, warn

MlflowUri = Annotated[
    str | None,
    typer.Option(
        "--mlflow-uri",
        help="Log to this MLflow tracking store (e.g. sqlite:///mlflow.db, http://host:5000); "
        "default MLFLOW_TRACKING_URI. Needs sp-dspy[mlflow].",
    ),
]
MlflowExperiment = Annotated[
    str, typer.Option("--mlflow-experiment", help="The MLflow experiment the runs go into.")
]


@dataclass
class MlflowFlags:
    """``--mlflow-uri`` and ``--mlflow-experiment`` of the commands that log (a flag group)."""

    mlflow_uri: MlflowUri = None
    mlflow_experiment: MlflowExperiment = DEFAULT_EXPERIMENT

    def tracking(self) -> str | None:
        """The tracking store to log to, checked before anything runs (None: no logging)."""
        return mlflow_check(self.mlflow_uri)


class Target(StrEnum):
    inspect = "inspect"
    mlflow = "mlflow"


def register(app: typer.Typer) -> None:
    app.command("export")(export_command)


def _check_target(to: Target, out: Path | None, mlflow_uri: str | None) -> str | None:
    """Refuse a target that cannot be written before anything is scored; the MLflow store's URI."""
    if to is Target.inspect:
        if out is None:
            raise ConfigError("--to inspect needs --out DIR (the folder the logs go into)")
        require_inspect()
        if out.exists() and not out.is_dir():
            raise ConfigError(f"--out {out}: exists and is not a folder")
    uri = tracking_uri(mlflow_uri)
    if to is Target.mlflow:
        if uri is None:
            raise ConfigError("--to mlflow needs --mlflow-uri URI (or MLFLOW_TRACKING_URI)")
        check_tracking_uri(uri)
    return uri


@opt.with_flag_groups
def export_command(
    files: Annotated[
        list[Path], typer.Argument(help="Result JSONL files, one variant each.", show_default=False)
    ],
    to: Annotated[Target, typer.Option("--to", help="inspect (inspect_ai logs) or mlflow (MLflow runs).")],
    out: Annotated[
        Path | None, typer.Option("--out", help="--to inspect: the folder the .eval logs go into.")
    ] = None,
    mlflow_uri: MlflowUri = None,
    mlflow_experiment: MlflowExperiment = DEFAULT_EXPERIMENT,
    data: opt.RecordedFlags = opt.RecordedFlags(),
    cap_aware: opt.CapAware = False,
    skip_bad_lines: opt.SkipBadLines = False,
    seed: opt.Seed = 0,
    n_boot: opt.NBoot = 1000,
) -> None:
    """Export results as inspect_ai logs (one per variant) or MLflow runs, scored as `score` scores them."""
    uri = _check_target(to, out, mlflow_uri)
    selection = RecordedSelection(**data.selection())
    runs = [
        scored_file(
            file, data=selection, cap_aware=cap_aware, skip_bad_lines=skip_bad_lines, seed=seed,
            n_boot=n_boot,
        )
        for file in files
    ]  # fmt: skip
    if to is Target.inspect:
        from .._export import write_inspect_logs

        assert out is not None
        for run, path in zip(runs, write_inspect_logs(runs, out), strict=True):
            console.print(f"{run.label}: {len(run.cases)} samples -> {path}", markup=False, highlight=False)
        console.print(f"View them with: inspect view --log-dir {out}", markup=False, highlight=False)
        return
    assert uri is not None
    logger = MlflowLogger(uri, mlflow_experiment)
    for run in runs:
        from .._export import log_variant

        run_id = log_variant(logger, run)
        console.print(f"{run.label}: MLflow run {run_id} in {uri}", markup=False, highlight=False)


def require_inspect() -> None:
    """One line naming the extra when inspect_ai is not installed."""
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        raise ConfigError("--to inspect needs inspect_ai: pip install 'sp-dspy[inspect]'") from None


def scored_file(
    file: Path,
    *,
    data: RecordedSelection | None = None,
    cap_aware: bool = False,
    skip_bad_lines: bool = False,
    seed: int = 0,
    n_boot: int = 1000,
    label: str | None = None,
) -> ScoredRun:
    """One results file scored by ``sp-dspy score FILE``'s own job (``score_results``: refused the same way)."""
    config = build_score_config(
        {"files": [file], "data": data or RecordedSelection(), "cap_aware": cap_aware,
         "skip_bad_lines": skip_bad_lines, "seed": seed, "n_boot": n_boot}
    )  # fmt: skip
    scored = score_results(config, notify=say_note)
    if scored.results.bad_lines:
        warn(f"{file}: {scored.results.bad_lines} malformed result line(s) skipped")
    return scored_run(
        label or file.stem,
        (file,),
        scored.results,
        benchmark=scored.dataset.benchmark,
        dataset_source=str(scored.dataset.source),
        cases=tuple(scored.cases),
        report=scored.report,
        recorded=run_of(file),
        cap_aware=cap_aware,
    )


def mlflow_check(uri: str | None) -> str | None:
    """The tracking URI of ``--mlflow-uri`` (or ``MLFLOW_TRACKING_URI``), checked before any LM call."""
    resolved = tracking_uri(uri)
    if resolved is not None:
        check_tracking_uri(resolved)
    return resolved


def mlflow_log_eval(uri: str, results_files: Sequence[Path], *, experiment: str = DEFAULT_EXPERIMENT) -> None:
    """``eval --mlflow-uri``: one MLflow run per model's results file."""
    logger = MlflowLogger(uri, experiment)
    from .._export import log_variant

    for file in results_files:
        run = scored_file(file)
        run_id = log_variant(logger, run)
        console.print(f"MLflow: {run.label} logged as run {run_id}", markup=False, highlight=False)


def mlflow_log_compile(uri: str, artifact: Path, *, experiment: str = DEFAULT_EXPERIMENT) -> None:
    """``compile --mlflow-uri``: the compile's run, its candidates' dev scores as steps."""
    from .._export import log_compile

    run_id = log_compile(MlflowLogger(uri, experiment), artifact, name=f"compile {artifact.name}")
    console.print(f"MLflow: compile logged as run {run_id}", markup=False, highlight=False)


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


def mlflow_log_plan(uri: str, out: Path, *, experiment: str = DEFAULT_EXPERIMENT) -> None:
    """``ablate``/``experiment --mlflow-uri``: a parent run (summary, report) with a child per variant
    and, for an experiment, one per compile."""
    from .._export import log_compile, log_variant

    summary_file = out / "summary.json"
    try:
        summary = json.loads(summary_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"{summary_file}: no summary to log to MLflow ({exc})") from None
    kind = "experiment" if summary.get("kind") == "sp-dspy-experiment" else "ablation"
    logger = MlflowLogger(uri, experiment)
    parent = logger.start(f"{kind} {out.name}", tags={"sp_dspy.kind": kind})
    saved = (
        summary_file,
        out / "report.html",
        out / "plan.json",
        out / "experiment.json",
    )  # the plan as saved
    artifacts = [path for path in saved if path.is_file()]
    logger.log(parent, params=_plan_params(summary), artifacts=artifacts)
    for label, file, params, extra in _plan_variants(out, summary):
        log_variant(logger, scored_file(file, label=label), parent=parent, params=params)
        for artifact in extra:
            log_compile(logger, artifact, parent=parent, name=f"compile {label}")
    logger.finish(parent)
    console.print(f"MLflow: {kind} logged as run {parent} (with its variants)", markup=False, highlight=False)
