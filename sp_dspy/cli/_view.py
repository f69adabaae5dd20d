"""``sp-dspy view``: the report's page for a quick look at the cases, without the plots."""

from __future__ import annotations

import webbrowser
from pathlib import Path
from typing import Annotated

import typer

from .._scoring import RecordedSelection
from . import _options as opt
from ._console import check_target, console, err_console
from ._report import print_notes, summarise_results


def register(app: typer.Typer) -> None:
    app.command("view")(view_command)


@opt.with_flag_groups
def view_command(
    results: Annotated[
        list[str],
        typer.Argument(
            help="Result JSONL files, one run each, or LABEL=file1,file2 to read files as one run.",
            show_default=False,
        ),
    ],
    data: opt.RecordedFlags = opt.RecordedFlags(),
    label: opt.RunLabels = None,
    baseline: opt.BaselineRun = None,
    out: Annotated[Path, typer.Option("--out", help="HTML page to write.")] = Path("view.html"),
    open_page: Annotated[
        bool, typer.Option("--open", help="Open the page in the default web browser.")
    ] = False,
    cap_aware: opt.CapAware = False,
    skip_bad_lines: opt.SkipBadLines = False,
    seed: opt.Seed = 0,
    n_boot: opt.NBoot = 1000,
) -> None:
    """See a run's cases, or several runs' side by side: outcomes, rules, answers, won and lost cases.

    Writes the page ``report`` writes (its Cases view and tables) without the plots, on the
    same cases (those the runs selected, or the selection flags').
    """
    from .._report import write_html

    check_target(out, "--out")
    summary, skipped = summarise_results(
        results, label or [], baseline, data=RecordedSelection(**data.selection()), cap_aware=cap_aware,
        skip_bad_lines=skip_bad_lines, seed=seed, n_boot=n_boot,
    )  # fmt: skip
    print_notes(summary, skipped)
    title = f"sp-dspy view: {', '.join(entry.label for entry in summary.variants)}"
    page = write_html(summary, out, title=title, plots=[], command="sp-dspy view")
    console.print(f"Cases view of {summary.n_cases} case(s) written to {page}", markup=False, highlight=False)
    if open_page and not webbrowser.open(page.resolve().as_uri()):
        err_console.print(
            f"note: no web browser found to open it; open {page} in one", markup=False, highlight=False
        )
