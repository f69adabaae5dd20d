"""``sp-dspy report``: compare result sets on the same cases in one HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .._benchmarks import benchmark_kind
from .._errors import ConfigError
from .._scoring import RecordedSelection, load_for_results, read_results
from . import _options as opt
from ._console import check_target, console, err_console, say_note

if TYPE_CHECKING:
    from .._report import ComparisonSummary


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)


def parse_results(arguments: list[str], labels: list[str]) -> list[tuple[str | None, list[Path]]]:
    """RESULTS arguments -> ``(label or None, files)`` per variant.

    An existing path is a file even if its name contains ``=``; otherwise ``LABEL=a,b``
    groups files under a label. ``--label`` values name the plain-file arguments in order.
    """
    variants: list[tuple[str | None, list[Path]]] = []
    for argument in arguments:
        if Path(argument).exists() and not Path(argument).is_dir():  # a device too: the reader says why not
            variants.append((None, [Path(argument)]))
            continue
        label, sep, listed = argument.partition("=")
        if Path(argument).is_dir():
            raise ConfigError(
                f"RESULTS: {argument}: a directory, not a result file (name the results_*.jsonl in it)"
            )
        if not sep:
            raise ConfigError(f"RESULTS: no such file: {argument}")
        if not label.strip():
            raise ConfigError(f"RESULTS {argument}: the label before '=' is empty")
        files = [Path(name) for name in listed.split(",") if name.strip()]
        if not files:
            raise ConfigError(f"RESULTS {argument}: no files after '='")
        for file in files:
            if not file.exists():
                raise ConfigError(f"RESULTS {label}=...: no such file: {file}")
        variants.append((label.strip(), files))
    unlabelled = [i for i, (label, _) in enumerate(variants) if label is None]
    if labels and len(labels) != len(unlabelled):
        raise ConfigError(
            f"--label: {len(labels)} label(s) for {len(unlabelled)} result file argument(s) without LABEL=; "
            "give one per file, in order"
        )
    for index, label in zip(unlabelled, labels, strict=False):
        variants[index] = (label, variants[index][1])
    return variants


@opt.with_flag_groups
def report_command(
    results: Annotated[
        list[str],
        typer.Argument(
            help="Result JSONL files, one variant each, or LABEL=file1,file2 to score files as one variant.",
            show_default=False,
        ),
    ],
    data: opt.RecordedFlags = opt.RecordedFlags(),
    label: opt.RunLabels = None,
    baseline: opt.BaselineRun = None,
    out: Annotated[Path, typer.Option("--out", help="HTML report to write.")] = Path("report.html"),
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the summary as JSON here.")
    ] = None,
    cap_aware: opt.CapAware = False,
    skip_bad_lines: opt.SkipBadLines = False,
    seed: opt.Seed = 0,
    n_boot: opt.NBoot = 1000,
) -> None:
    """Compare result sets (protocols, programs, models) in one self-contained HTML report."""
    from .._report import render_terminal, write_html

    check_target(out, "--out")
    check_target(json_out, "--json")
    summary, skipped = summarise_results(
        results, label or [], baseline, data=RecordedSelection(**data.selection()), cap_aware=cap_aware,
        skip_bad_lines=skip_bad_lines, seed=seed, n_boot=n_boot,
    )  # fmt: skip
    console.print(render_terminal(summary))
    kind_table = benchmark_kind(summary.benchmark).report_terminal(
        [(entry.label, entry.extra) for entry in summary.variants]
    )
    if kind_table is not None:
        console.print(kind_table)
    print_notes(summary, skipped)
    if json_out is not None:
        console.print(f"Summary written to {summary.write_json(json_out)}", markup=False, highlight=False)
    console.print(f"Report written to {write_html(summary, out)}", markup=False, highlight=False)


def summarise_results(
    results: list[str],
    labels: list[str],
    baseline: str | None,
    *,
    data: RecordedSelection,
    cap_aware: bool,
    skip_bad_lines: bool,
    seed: int,
    n_boot: int,
) -> tuple[ComparisonSummary, int]:
    """RESULTS scored on the cases their runs selected, as ``report`` and ``view`` show them;
    with how many malformed dataset cases ``--lenient`` skipped."""
    from .._report import build_summary

    variants = parse_results(results, labels)
    # RESULTS is required, and no variant is empty; every variant must belong to the dataset.
    sets = [read_results(paths, skip_bad_lines=True) for _, paths in variants]
    scored = load_for_results(
        [paths for _, paths in variants], sets, data=data, announce=False, notify=say_note
    )
    loaded = scored.loaded
    summary = build_summary(
        scored.cases,
        variants,
        baseline,
        benchmark=loaded.benchmark,
        dataset=loaded.source,
        content_hash=loaded.content_hash,
        cap_aware=cap_aware,
        n_boot=n_boot,
        seed=seed,
        skip_bad_lines=skip_bad_lines,
        all_ids=[case.id for case in loaded.cases],
        cases_note=scored.note,
    )
    return summary, loaded.skipped


def print_notes(summary: ComparisonSummary, skipped: int) -> None:
    """The summary's caveats on stderr, one ``note:`` line each."""
    notes = list(summary.notes)
    if skipped:
        notes.append(f"{skipped} malformed dataset case(s) skipped (--lenient)")
    for note in notes:
        err_console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
