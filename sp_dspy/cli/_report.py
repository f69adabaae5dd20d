"""``sp-dspy report``: compare result sets on the same cases in one HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .._benchmarks import benchmark_kind
from .._errors import ConfigError
from .._report import build_report_config, summarise_results
from . import _options as opt
from ._console import check_target, console, err_console, say_note

if TYPE_CHECKING:
    from .._report import ReportConfig, SummarisedResults


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
    config = report_config(
        results, label, baseline, data=data, cap_aware=cap_aware, skip_bad_lines=skip_bad_lines, seed=seed,
        n_boot=n_boot,
    )  # fmt: skip
    summarised = summarise_results(config, notify=say_note)
    summary = summarised.summary
    console.print(render_terminal(summary))
    kind_table = benchmark_kind(summary.benchmark).report_terminal(
        [(entry.label, entry.extra) for entry in summary.variants]
    )
    if kind_table is not None:
        console.print(kind_table)
    print_notes(summarised)
    if json_out is not None:
        console.print(f"Summary written to {summary.write_json(json_out)}", markup=False, highlight=False)
    console.print(f"Report written to {write_html(summary, out)}", markup=False, highlight=False)


def report_config(
    results: list[str],
    labels: list[str] | None,
    baseline: str | None,
    *,
    data: opt.RecordedFlags,
    cap_aware: bool,
    skip_bad_lines: bool,
    seed: int,
    n_boot: int,
) -> ReportConfig:
    """The ``ReportConfig`` of ``report``'s and ``view``'s flags (RESULTS as ``parse_results`` reads them)."""
    return build_report_config(
        {"variants": parse_results(results, labels or []), "baseline": baseline, "data": data.selection(),
         "cap_aware": cap_aware, "skip_bad_lines": skip_bad_lines, "seed": seed, "n_boot": n_boot}
    )  # fmt: skip


def print_notes(summarised: SummarisedResults) -> None:
    """The summary's caveats on stderr, one ``note:`` line each."""
    for note in summarised.caveats():
        err_console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
