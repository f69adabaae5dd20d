"""``sp-dspy score``: recompute the official metrics from result files.

A SafePyramid dataset is read as scoring views (``prefetch_scoring_cases``, which
gives what ``load_scoring_cases`` gives): the scorer needs a few fields of each
case, and the views of an unchanged file come from a parse cache
(``--no-data-cache`` bypasses it). Otherwise a worker process decodes the file,
started from the raw arguments (``ScoreCommand``) while the command imports its
modules and reads the result files (``read_scoring_results``: the fields the scorer
reads of each record, decoded by msgspec). With ``--benchmark pku-saferlhf`` the
full cases are loaded and it also prints (and ``--json`` also holds, under
``pku``) the PKU-SafeRLHF report: harm categories, safe/unsafe and severity, beside
the paper's published figures.

Imports of the scorer happen inside the command so ``sp-dspy --help`` stays fast;
nothing here touches dspy or litellm. Bad input raises ``SpDspyError`` subclasses,
which the top-level CLI prints as one line (exit 2).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand

from .._errors import ConfigError
from . import KeepAlive
from . import _options as opt
from ._console import console, err_console

if TYPE_CHECKING:
    from .._data import AnyCase, Benchmark, ScoringLoad
    from .._metrics import PolicyRecord, ResultSet


#: Where ``ScoreCommand.start_early`` leaves the worker it started (in the context's
#: ``meta``, which click shares between a group's context and its command's).
_WORKER = "sp_dspy.score.views_worker"


def register(app: typer.Typer) -> None:
    """Add the ``score`` command to ``app``."""
    app.command(
        "score", cls=ScoreCommand, help="Score result JSONL files (per-policy records or per-rule judgments)."
    )(score_command)


class ScoreCommand(TyperCommand):
    """``score``'s command: it can start decoding the dataset before any argument is converted.

    Typer converts arguments with pydantic, which it imports (about 80 ms) when the
    top-level group converts its own. The raw ``--dataset``, ``--lenient``,
    ``--no-data-cache`` and ``--benchmark`` are all it takes to start the worker that
    decodes the dataset (``start_views_worker``), so ``LazyGroup`` calls
    ``start_early`` first, and the worker decodes on the second core while
    arguments are converted and the scorer is imported. ``score_command`` adopts it
    (``prefetch_scoring_cases`` re-checks that it reads the file the converted
    ``--dataset`` names); one nobody adopted is stopped when the group's context
    closes, however the command ended.
    """

    def start_early(self, parent: Any, args: list[str]) -> None:
        """Start the dataset worker from the raw arguments (see the class docstring)."""
        try:
            raw, _, _ = self.make_parser(typer.Context(self, parent=parent)).parse_args(args=list(args))
        except Exception:  # a usage error, or anything else: the real parse deals with it
            return
        if raw.get("help") or raw.get("benchmark", "safepyramid") != "safepyramid":
            return
        from .._data._scoring_worker import start_views_worker

        worker = start_views_worker(
            raw.get("dataset"), lenient=bool(raw.get("lenient")), cache=not raw.get("no_data_cache")
        )
        if worker is not None:
            parent.meta[_WORKER] = worker
            parent.call_on_close(worker.stop)


def score_command(
    ctx: typer.Context,
    files: Annotated[
        list[Path],
        typer.Argument(help="Result JSONL files; a later file wins on the same case id.", show_default=False),
    ],
    dataset: opt.Dataset = None,
    benchmark: opt.Benchmark = "safepyramid",
    level: opt.Level = None,
    domain: opt.Domain = None,
    per_rule: Annotated[
        bool, typer.Option("--per-rule", help="Require per-rule judgment files (auto-detected otherwise).")
    ] = False,
    cap_aware: opt.CapAware = False,
    json_out: Annotated[
        str | None, typer.Option("--json", help="Write the full report as JSON to this file ('-' = stdout).")
    ] = None,
    skip_bad_lines: opt.SkipBadLines = False,
    lenient: opt.Lenient = False,
    with_evidence: opt.WithEvidence = False,
    seed: opt.Seed = 0,
    n_boot: Annotated[
        int, typer.Option("--n-boot", help="Bootstrap resamples for the 95% CIs (0 = none).")
    ] = 1000,
    no_data_cache: opt.NoDataCache = False,
) -> KeepAlive:
    """Score result files against the dataset and print (or write) the report.

    Returns the dataset, results and report wrapped in ``KeepAlive`` so the console
    entry point can exit without freeing them (see ``sp_dspy.cli.KeepAlive``).
    """
    if n_boot < 0:
        raise ConfigError(f"--n-boot: must be >= 0, got {n_boot}")
    loaded: ScoringLoad | Benchmark
    results: ResultSet[Any]
    pku_input: tuple[Benchmark, ResultSet[PolicyRecord]] | None = None  # full cases and records
    if benchmark == "safepyramid":
        # Before numpy is imported: a worker is forked only while the process has a
        # single thread (``worker_allowed``); usually ``ScoreCommand`` has started one.
        from .._data import prefetch_scoring_cases

        pending = prefetch_scoring_cases(
            dataset,
            with_evidence=with_evidence,
            lenient=lenient,
            cache=not no_data_cache,
            worker=ctx.meta.pop(_WORKER, None),
        )
        with pending:
            _import_numpy_without_blas_threads()
            from .._metrics import read_scoring_results

            results = read_scoring_results(files, skip_bad_lines=skip_bad_lines)
            import numpy.random  # noqa: F401  (the bootstrap's; imported here while a worker decodes)

            loaded = pending.result()
    else:  # the PKU-SafeRLHF adapter needs full cases (and words an unknown --benchmark)
        from .._data import load_benchmark

        full = load_benchmark(dataset, with_evidence=with_evidence, lenient=lenient, benchmark=benchmark)
        _import_numpy_without_blas_threads()
        from .._metrics import read_result_files

        full_results = read_result_files(files, skip_bad_lines=skip_bad_lines)
        loaded, results, pku_input = full, full_results, (full, full_results)
    from .._data import filter_cases
    from .._metrics import render_score_table, score

    everything: list[AnyCase] = list(loaded.cases)
    cases = filter_cases(everything, level=level, domain=domain)
    report = score(
        cases,
        results,
        cap_aware=cap_aware,
        per_rule=per_rule,
        ci=n_boot > 0,
        seed=seed,
        n_boot=n_boot,
        all_ids=[c.id for c in everything],
    )

    data = report.to_json_dict()
    pku = None
    if pku_input is not None:  # only PKU-SafeRLHF gets here
        from .._metrics_pku import score_pku_results

        full, full_results = pku_input
        full_cases = filter_cases(full.cases, level=level, domain=domain)
        pku = score_pku_results(full_cases, full_results, cap_aware=cap_aware, per_rule=per_rule)
        data["pku"] = pku.to_json_dict()
    document = json.dumps(data, indent=2, ensure_ascii=False)
    # The report file first: a terminal or pipe closed early (``| head``) must not lose it.
    target = None if json_out in (None, "-") else Path(json_out)
    if target is not None:
        try:
            target.write_text(document + "\n", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--json {target}: cannot write: {exc.strerror or exc}") from None
    if json_out == "-":
        typer.echo(document)
    else:
        console.print(
            f"Scored {len(cases)} cases of {loaded.source} against {len(results.files)} file(s)",
            markup=False,
            highlight=False,
        )
        for table in render_score_table(report):
            console.print(table)
        if pku is not None:
            from .._metrics_pku import render_pku_report

            console.print(render_pku_report(pku))
    if loaded.skipped:
        _warn(f"{loaded.skipped} malformed dataset case(s) skipped (--lenient)")
    if results.bad_lines:
        first = results.bad_line_messages[0] if results.bad_line_messages else ""
        _warn(f"{results.bad_lines} malformed result line(s) skipped; first: {first}")
    if report.unknown_ids.count:
        examples = ", ".join(report.unknown_ids.examples)
        _warn(f"{report.unknown_ids.count} result id(s) not in the dataset (e.g. {examples})")
    if target is not None:
        console.print(f"Report written to {target}", markup=False, highlight=False)
    return KeepAlive(loaded, cases, results, report, data, pku)


def _import_numpy_without_blas_threads() -> None:
    """Import numpy with one OpenBLAS thread, unless the user set a number.

    ``score`` does no linear algebra; by default OpenBLAS starts a spinning worker per
    core when numpy is imported, and on a busy machine they take CPU from the scorer.
    OpenBLAS reads the variable once, when it loads, so it is removed right after.
    """
    if "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


def _warn(message: str) -> None:
    """One plain line on stderr (no rich markup: paths and ids may contain brackets)."""
    err_console.print(f"warning: {message}", markup=False, highlight=False, soft_wrap=True)
