"""Runs, compiles, ablations and experiments as MLflow runs, logged through MLflow's client.

Everything is logged from what the job wrote (records, manifests, summaries, compiled
artifacts), scored by the same functions as ``sp-dspy score``, so MLflow shows the numbers
the terminal printed. Each variant is one MLflow run (parameters: model, program, protocol,
optimizer, seed, split; metrics: RMR, RMR@1.0, RDR per cell with their 95% intervals, cost,
calls; the results and manifest as artifacts); an ablation or experiment is one parent run
(its summary and report as artifacts) with a child per variant, nested through MLflow's
``mlflow.parentRunId`` tag. A compile's run logs each candidate's dev score as a step.
``MlflowClient`` is used with explicit run ids, so nothing depends on a global active run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import ConfigError
from ._scored import ScoredRun

if TYPE_CHECKING:
    from mlflow import MlflowClient

#: The MLflow experiment sp-dspy logs into unless told otherwise.
DEFAULT_EXPERIMENT = "sp-dspy"
#: The per-cell metrics logged, by their ``score --json`` keys, and their MLflow names.
CELL_METRICS = {"rmr_avg": "rmr", "rmr_exact": "rmr_at_1.0", "rdr": "rdr", "refusal": "excluded_pct"}
_PARENT_TAG = "mlflow.parentRunId"
#: How long a tracking server gets to answer the check made before any LM call.
CHECK_TIMEOUT_S = 5


def require_mlflow(flag: str) -> None:
    """One line naming the extra when MLflow is not installed."""
    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise ConfigError(f"{flag} needs MLflow: pip install 'sp-dspy[mlflow]'") from None


def tracking_uri(uri: str | None) -> str | None:
    """``--mlflow-uri``, else ``MLFLOW_TRACKING_URI``, else None (no logging)."""
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or None


@contextmanager
def _quick_http() -> Iterator[None]:
    """MLflow's HTTP client without its minutes of retries, for the check only."""
    saved = {
        name: os.environ.get(name)
        for name in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")
    }
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(CHECK_TIMEOUT_S)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def check_tracking_uri(uri: str, *, flag: str = "--mlflow-uri") -> None:
    """Reach the tracking store once, before any LM call: one line when it cannot be used."""
    require_mlflow(flag)
    from mlflow import MlflowClient

    if uri.startswith("sqlite:///"):
        folder = Path(uri.removeprefix("sqlite:///")).expanduser().resolve().parent
        if not folder.is_dir():
            raise ConfigError(f"{flag} {uri}: no such directory {folder}")
    try:
        with _quick_http():
            MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
    except Exception as exc:  # MLflow raises many types (MlflowException, requests' and SQLAlchemy's)
        text = str(exc).strip()
        if "Failed to establish a new connection" in text or "Max retries exceeded" in text:
            raise ConfigError(
                f"{flag} {uri}: nothing answers there (is the tracking server running?)"
            ) from None
        first = text.splitlines()[0] if text else type(exc).__name__
        raise ConfigError(f"{flag} {uri}: the tracking store cannot be used: {first[:300]}") from None


@dataclass
class MlflowLogger:
    """Logs into one experiment of one tracking store."""

    uri: str
    experiment: str = DEFAULT_EXPERIMENT
    _client: MlflowClient | None = field(default=None, init=False, repr=False)
    _experiment_id: str | None = field(default=None, init=False, repr=False)

    @property
    def client(self) -> MlflowClient:
        if self._client is None:
            from mlflow import MlflowClient

            self._client = MlflowClient(tracking_uri=self.uri)
        return self._client

    @property
    def experiment_id(self) -> str:
        if self._experiment_id is None:
            found = self.client.get_experiment_by_name(self.experiment)
            self._experiment_id = (
                found.experiment_id if found is not None else self.client.create_experiment(self.experiment)
            )
        return self._experiment_id

    def start(self, name: str, *, parent: str | None = None, tags: Mapping[str, str] | None = None) -> str:
        """A new run's id (a child of ``parent`` when given)."""
        all_tags = {**(tags or {}), **({_PARENT_TAG: parent} if parent else {})}
        return str(self.client.create_run(self.experiment_id, run_name=name, tags=all_tags).info.run_id)

    def log(
        self,
        run_id: str,
        *,
        params: Mapping[str, Any] | None = None,
        metrics: Mapping[str, float] | None = None,
        steps: Mapping[str, list[float]] | None = None,
        artifacts: list[Path] | None = None,
    ) -> None:
        """Parameters (as text), metrics, step series and artifact files or folders of one run."""
        from mlflow.entities import Metric, Param

        stamp = _now_ms()
        param_list = [
            Param(key, _param_text(value)) for key, value in (params or {}).items() if value is not None
        ]
        metric_list = [Metric(key, float(value), stamp, 0) for key, value in (metrics or {}).items()]
        for key, values in (steps or {}).items():
            metric_list += [Metric(key, float(value), stamp, step) for step, value in enumerate(values)]
        for start in range(
            0, max(len(param_list), len(metric_list)), 100
        ):  # MLflow's batch limit is 100 params
            self.client.log_batch(
                run_id, metrics=metric_list[start : start + 100], params=param_list[start : start + 100]
            )
        for path in artifacts or []:
            if path.is_dir():
                self.client.log_artifacts(run_id, str(path), artifact_path=path.name)
            elif path.is_file():
                self.client.log_artifact(run_id, str(path))

    def finish(self, run_id: str, *, ok: bool = True) -> None:
        self.client.set_terminated(run_id, "FINISHED" if ok else "FAILED")


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


def _param_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text[:6000]  # MLflow's limit on a parameter's value


def variant_metrics(run: ScoredRun) -> dict[str, float]:
    """RMR, RMR@1.0, RDR and the excluded share per cell, their 95% intervals, cost and calls."""
    metrics: dict[str, float] = {}
    for cell, values in run.report.cells.items():
        name = cell.replace(" ", "_")
        interval = run.report.ci.get(cell) or {}
        for key, metric in CELL_METRICS.items():
            if values.get(key) is None:
                continue
            metrics[f"{name}/{metric}"] = values[key]
            bounds = interval.get(key) if isinstance(interval, dict) else None
            if isinstance(bounds, list | tuple) and len(bounds) == 2 and None not in bounds:
                metrics[f"{name}/{metric}_ci_low"], metrics[f"{name}/{metric}_ci_high"] = bounds
        metrics[f"{name}/n_eval"] = values.get("n_eval", 0)
    records = list(run.records.values())
    costs = [
        record.usage.cost for record in records if record.usage is not None and record.usage.cost is not None
    ]
    if costs:
        metrics["cost_usd"] = round(sum(costs), 6)
    if run.recorded is not None:
        totals = run.recorded.run.totals
        metrics["calls"] = totals.records
        metrics["errors"] = totals.errors
        metrics["prompt_tokens"] = totals.usage.prompt_tokens
        metrics["completion_tokens"] = totals.usage.completion_tokens
    return metrics


def variant_params(run: ScoredRun, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Model, program, protocol, parser, benchmark, dataset and split of a variant, plus ``extra``."""
    params: dict[str, Any] = {"benchmark": run.benchmark, "dataset": run.dataset_source, "variant": run.label}
    if run.recorded is not None:
        settings, manifest = run.recorded.manifest.settings, run.recorded.manifest
        params.update(
            model=run.recorded.run.lm.get("model") or run.recorded.run.model,
            program=settings.get("program"),
            protocol=settings.get("protocol"),
            parser=settings.get("parser"),
            run_id=manifest.run_id,
            split=(settings.get("data") or {}).get("split"),
            transport=run.recorded.run.transport,
        )
    params.update(extra or {})
    return params


def log_variant(
    logger: MlflowLogger,
    run: ScoredRun,
    *,
    parent: str | None = None,
    params: Mapping[str, Any] | None = None,
    artifacts: list[Path] | None = None,
) -> str:
    """One variant's MLflow run: its parameters, metrics, results files and manifest."""
    run_id = logger.start(run.label, parent=parent, tags={"sp_dspy.kind": "evaluation"})
    files = [*run.files, *([run.recorded.path] if run.recorded is not None else []), *(artifacts or [])]
    logger.log(run_id, params=variant_params(run, params), metrics=variant_metrics(run), artifacts=files)
    status = run.recorded.run.status if run.recorded is not None else "complete"
    logger.finish(run_id, ok=status == "complete")
    return run_id


def compile_facts(artifact: Path) -> tuple[dict[str, Any], dict[str, float], dict[str, list[float]]]:
    """Parameters, metrics and the candidates' dev scores (as steps) of a compiled artifact's manifest."""
    manifest = json.loads((artifact / "manifest.json").read_text(encoding="utf-8"))
    optimizer = manifest.get("optimizer") or {}
    split = manifest.get("split") or {}
    dev = manifest.get("dev") or {}
    params = {
        "optimizer": optimizer.get("name"),
        "optimizer_parameters": optimizer.get("parameters"),
        "seed": manifest.get("seed"),
        "program": manifest.get("program", {}).get("name")
        if isinstance(manifest.get("program"), dict)
        else manifest.get("program"),
        "protocol": manifest.get("protocol"),
        "model": ((manifest.get("lms") or {}).get("task") or {}).get("model"),
        "split": split.get("source"),
        "split_seed": split.get("seed"),
        "benchmark": (manifest.get("dataset") or {}).get("benchmark"),
    }
    metrics: dict[str, float] = {}
    for stage in ("before", "after"):
        for key in ("score", "rmr_avg", "rmr_exact", "rdr"):
            value = (dev.get(stage) or {}).get(key)
            if value is not None:
                metrics[f"dev_{stage}/{key}"] = value
    usage = manifest.get("usage") or {}
    for key in ("calls", "prompt_tokens", "completion_tokens"):
        if usage.get(key) is not None:
            metrics[f"compile_{key}"] = usage[key]
    if usage.get("usd") is not None:
        metrics["compile_cost_usd"] = usage["usd"]
    candidates = [
        c["dev"]["score"]
        for c in dev.get("candidates") or []
        if (c.get("dev") or {}).get("score") is not None
    ]
    return params, metrics, {"dev_candidate_score": candidates} if candidates else {}


def log_compile(
    logger: MlflowLogger, artifact: Path, *, parent: str | None = None, name: str | None = None
) -> str:
    """A compile's MLflow run: optimizer, seed, split, dev scores (candidates as steps), the artifact."""
    params, metrics, steps = compile_facts(artifact)
    run_id = logger.start(name or f"compile {artifact.name}", parent=parent, tags={"sp_dspy.kind": "compile"})
    logger.log(run_id, params=params, metrics=metrics, steps=steps, artifacts=[artifact])
    logger.finish(run_id)
    return run_id
