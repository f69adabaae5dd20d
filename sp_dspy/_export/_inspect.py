"""A variant's results as an inspect_ai evaluation log, written through inspect_ai's own API.

inspect_ai's log format is not frozen, so the log is built from its public models
(``EvalLog``, ``EvalSample``, ``Score``) and written by ``write_eval_log``; ``inspect view``
shows it and ``inspect_ai.analysis`` reads it. One sample per case: the policy and the
conversation as input, the gold rules as target, the model's answer as output, and one score
``safepyramid`` per sample holding exact match, the RMR@tau matches, FP and FN (an excluded
case says why). The aggregate metrics are the cells ``sp-dspy score`` prints, one
``EvalScore`` per cell (``ALL`` first, the headline).
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._metrics import TAUS, TAUS_FULL, CaseOutcome, PolicyRecord, tau_key
from .._usage import Usage
from ._scored import ScoredRun

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample
    from inspect_ai.model import ModelUsage

#: The sample score's name, and the scorer named in the log's results.
SCORE_NAME = "safepyramid"
SCORER = "sp_dspy"
#: The metrics each cell's score carries, by their ``score --json`` keys.
CELL_METRICS = ("rmr_avg", "rmr_exact", "rdr", "refusal", *(tau_key(tau) for tau, _ in TAUS_FULL))
#: inspect_ai's run status for a manifest's run status.
STATUS = {"complete": "success", "interrupted": "cancelled", "running": "started"}


def _file_stem(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "run"


def log_file_name(run: ScoredRun) -> str:
    """``<created>_<task>_<label>.eval``: inspect's own naming (time first, so a folder lists in order)."""
    created = _created(run).replace(":", "-")
    return f"{created}_{_file_stem(_task(run))}_{_file_stem(run.label)}.eval"


def _task(run: ScoredRun) -> str:
    settings = run.recorded.manifest.settings if run.recorded else {}
    protocol = settings.get("protocol") or ("per-rule" if run.per_rule else "per-policy")
    program = settings.get("program") or "results"
    return f"{run.benchmark}/{protocol}/{program}"


def _created(run: ScoredRun) -> str:
    if run.recorded is not None:
        return run.recorded.run.started_at
    return datetime.fromtimestamp(min(f.stat().st_mtime for f in run.files), UTC).isoformat(
        timespec="seconds"
    )


def inspect_usage(usage: Usage | None) -> ModelUsage:
    """sp-dspy's ``Usage`` in inspect_ai's shape (cached prompt tokens as cache reads)."""
    from inspect_ai.model import ModelUsage

    usage = usage or Usage()
    return ModelUsage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens or usage.prompt_tokens + usage.completion_tokens,
        input_tokens_cache_read=usage.cache_read_tokens,
        input_tokens_cache_write=usage.cache_write_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        total_cost=usage.cost,
    )


def sample_score_value(outcome: CaseOutcome) -> dict[str, Any]:
    """The sample's score: exact match and the RMR@tau matches (``None`` when excluded), FP, FN."""
    matches: dict[str, Any] = {
        tau_key(tau): (None if outcome.excluded else int(hit))
        for (tau, _), hit in zip(TAUS_FULL, outcome.hits, strict=True)
    }
    rmr = None if outcome.excluded else round(100 * sum(outcome.hits[: len(TAUS)]) / len(TAUS), 2)
    return {
        "exact_match": None if outcome.excluded else int(outcome.exact),
        "rmr": rmr,
        **matches,
        "fp": outcome.fp,
        "fn": outcome.fn,
        "excluded": outcome.excluded,
    }


def _answer(record: PolicyRecord | None) -> str:
    """What the model answered, as far as the record keeps it."""
    if record is None:
        return ""
    if record.answer:
        return record.answer
    if record.error:
        return ""
    body: dict[str, Any] = {"violated_rules": record.violated_rules}
    if record.analysis:
        body["analysis"] = record.analysis
    if record.reasoning:
        body["reasoning"] = record.reasoning
    return json.dumps(body, ensure_ascii=False)


def _sample(run: ScoredRun, index: int, model: str) -> EvalSample:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, ModelOutput
    from inspect_ai.scorer import Score

    case, outcome = run.cases[index], run.outcomes[index]
    record = run.records.get(case.id)
    why = "no record" if record is None else record.exclusion(cap_aware=run.cap_aware)
    output = ModelOutput.from_content(model=model, content=_answer(record))
    if record is not None and record.error:
        output.error = record.error
    metadata: dict[str, Any] = {
        "level": case.level,
        "domain": case.domain,
        "tags": list(case.tags),
        "gold_rules": sorted(outcome.gt),
        "predicted_rules": sorted(outcome.pred),
        "excluded": outcome.excluded,
        "exclusion": why if outcome.excluded else None,
        "parse_status": None if record is None else record.parse_status,
    }
    if run.per_rule:
        metadata["judgments"] = [
            judgment.model_dump(mode="json", exclude_none=True) for judgment in run.judgments.get(case.id, [])
        ]
    usage = record.usage if record is not None else None
    return EvalSample(
        id=case.id,
        epoch=1,
        input=[
            ChatMessageSystem(content=case.policy, source="input"),
            ChatMessageUser(content=case.conversation, source="input"),
        ],
        target=[str(rule) for rule in sorted(outcome.gt)],
        output=output,
        scores={
            SCORE_NAME: Score(
                value=sample_score_value(outcome),
                answer=", ".join(str(rule) for rule in sorted(outcome.pred)) or "none",
                explanation=f"excluded: {why}" if outcome.excluded else f"FP {outcome.fp}, FN {outcome.fn}",
                metadata={"excluded": outcome.excluded, "exclusion": why if outcome.excluded else None},
            )
        },
        metadata=metadata,
        model_usage={model: inspect_usage(usage)} if usage is not None else {},
        total_time=None if record is None else record.latency_s,
    )


def _results(run: ScoredRun) -> Any:
    from inspect_ai.log import EvalMetric, EvalResults, EvalScore

    scored = sum(1 for outcome in run.outcomes if not outcome.excluded)
    cells = dict(run.report.cells)
    order = ["ALL", *(name for name in cells if name != "ALL")]
    scores = []
    for name in order:
        cell, interval = cells[name], run.report.ci.get(name) or {}
        metrics = {
            key: EvalMetric(
                name=key,
                value=cell[key],
                metadata={"ci95": interval[key]} if isinstance(interval, dict) and key in interval else None,
            )
            for key in CELL_METRICS
            if cell.get(key) is not None
        }
        scores.append(
            EvalScore(
                name=name,
                scorer=SCORER,
                scored_samples=cell.get("n_eval"),
                unscored_samples=cell.get("excluded"),
                metrics=metrics,
                metadata={"cell": name, "total": cell.get("total")},
            )
        )
    return EvalResults(
        total_samples=len(run.cases),
        completed_samples=scored,
        scores=scores,
        metadata={"n_boot": run.report.n_boot, "seed": run.report.seed, "mode": run.report.mode},
    )


def inspect_log(run: ScoredRun) -> EvalLog:
    """The evaluation log of ``run``: its spec (task, model, settings, dataset), samples and results."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalRevision, EvalSpec, EvalStats

    recorded = run.recorded
    model = (recorded.run.lm.get("model") or recorded.run.model) if recorded else (run.label or "unknown")
    manifest = recorded.manifest if recorded else None
    samples = [_sample(run, index, model) for index in range(len(run.cases))]
    total = Usage.total(record.usage for record in run.records.values() if record.usage is not None)
    run_id = manifest.run_id if manifest else _file_stem(run.label)
    digest = hashlib.sha256(f"{run_id}\0{model}\0{_created(run)}".encode()).hexdigest()[:22]
    spec = EvalSpec(
        eval_id=digest,
        run_id=run_id,
        created=_created(run),
        task=_task(run),
        task_id=digest,
        task_args=manifest.settings if manifest else {},
        dataset=EvalDataset(
            name=run.benchmark,
            location=run.dataset_source,
            samples=len(run.cases),
            sample_ids=[case.id for case in run.cases],
        ),
        model=model,
        model_args=recorded.run.lm if recorded else {},
        config=EvalConfig(),
        revision=EvalRevision(type="git", origin="", commit=manifest.git_commit)
        if manifest and manifest.git_commit
        else None,
        packages={
            name: version for name, version in (manifest.versions if manifest else {}).items() if version
        },
        metadata={
            "sp_dspy": {
                "results_files": [str(path) for path in run.files],
                "command": manifest.command if manifest else None,
                "transport": recorded.run.transport if recorded else None,
                "cap_aware": run.cap_aware,
            }
        },
    )
    status = STATUS.get(recorded.run.status, "error") if recorded else "success"
    return EvalLog(
        status=status,  # type: ignore[arg-type]
        eval=spec,
        results=_results(run),
        stats=EvalStats(
            started_at=_created(run),
            completed_at=(recorded.run.finished_at or "") if recorded else "",
            model_usage={model: inspect_usage(total)},
        ),
        samples=samples,
    )


def write_inspect_logs(runs: list[ScoredRun], out: Path) -> list[Path]:
    """One ``.eval`` log per variant in ``out`` (created), through ``write_eval_log``."""
    from inspect_ai.log import write_eval_log

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for run in runs:
        target = out / log_file_name(run)
        write_eval_log(inspect_log(run), target, format="eval")
        written.append(target)
    return written
