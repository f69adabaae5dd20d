"""``sp-dspy export``: results as inspect_ai logs or MLflow runs, and ``--mlflow-uri`` for the jobs.

The flags become an ``ExportConfig`` and the job is the library's ``export_results``
(``sp_dspy/_export/_job.py``: each file scored exactly as ``sp-dspy score`` scores it, so an
exported log or MLflow run holds the numbers ``score`` prints); this module prints where each
file went. ``MlflowFlags`` is the ``--mlflow-uri`` flag group of the jobs that log (their logging
is the library's ``mlflow_log_eval``, ``mlflow_log_compile`` and ``mlflow_log_plan``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from .._export import DEFAULT_EXPERIMENT, LoggedPlan, MlflowConfig, build_export_config, export_results
from . import _options as opt
from ._console import console, say_note

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

    def config(self) -> MlflowConfig:
        """The flags as the library's ``MlflowConfig``."""
        return MlflowConfig(uri=self.mlflow_uri, experiment=self.mlflow_experiment)

    def tracking(self) -> MlflowConfig | None:
        """Where to log, the store checked before anything runs (None: no logging)."""
        return self.config().checked()


def print_logged_plan(plan: LoggedPlan) -> None:
    """The line ``ablate``/``experiment --mlflow-uri`` print once their plan is logged."""
    console.print(
        f"MLflow: {plan.kind} logged as run {plan.run_id} (with its variants)", markup=False, highlight=False
    )


class Target(StrEnum):
    inspect = "inspect"
    mlflow = "mlflow"


def register(app: typer.Typer) -> None:
    app.command("export")(export_command)


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
    config = build_export_config(
        {"files": files, "to": to.value, "out": out, "data": data.selection(), "cap_aware": cap_aware,
         "skip_bad_lines": skip_bad_lines, "seed": seed, "n_boot": n_boot,
         "mlflow": {"uri": mlflow_uri, "experiment": mlflow_experiment}}
    )  # fmt: skip
    outcome = export_results(config, notify=say_note)
    for run in outcome.runs:
        label = run.scored.label
        if outcome.to == "inspect":
            line = f"{label}: {len(run.scored.cases)} samples -> {run.destination}"
        else:
            line = f"{label}: MLflow run {run.destination} in {outcome.where}"
        console.print(line, markup=False, highlight=False)
    if outcome.to == "inspect":
        console.print(
            f"View them with: inspect view --log-dir {outcome.where}", markup=False, highlight=False
        )
