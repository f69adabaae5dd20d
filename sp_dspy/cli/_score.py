"""``sp-dspy score``: recompute the official metrics from result files.

The benchmark kind (``--benchmark``) chooses the tables and adds its own JSON
sections: PKU-SafeRLHF prints (and ``--json`` holds, under ``pku``) harm categories,
safe/unsafe and severity beside the paper's figures; ``custom`` prints RMR/RDR over
all cases and per tag (``tags``). A kind without levels has no level cell. Nothing here
touches dspy or litellm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .._metrics import EXIT_BELOW_THRESHOLD
from .._scoring import build_score_config, score_results
from . import _options as opt
from ._console import console, say_note, warn, write_json_report
from ._fail_under import FailUnder, check_known_cells, meets, parse_fail_under

ResultFiles = Annotated[
    list[Path],
    typer.Argument(help="Result JSONL files; a later file wins on the same case id.", show_default=False),
]
PerRule = Annotated[
    bool, typer.Option("--per-rule", help="Require per-rule judgment files (auto-detected otherwise).")
]
JsonOut = Annotated[
    str | None, typer.Option("--json", help="Write the full report as JSON to this file ('-' = stdout).")
]


def register(app: typer.Typer) -> None:
    app.command("score")(score_command)


@opt.with_flag_groups
def score_command(
    files: ResultFiles,
    data: opt.RecordedFlags = opt.RecordedFlags(),
    per_rule: PerRule = False,
    cap_aware: opt.CapAware = False,
    json_out: JsonOut = None,
    skip_bad_lines: opt.SkipBadLines = False,
    seed: opt.Seed = 0,
    n_boot: opt.NBoot = 1000,
    fail_under: FailUnder = None,
) -> None:
    """Score result JSONL files (per-policy records or per-rule judgments).

    Exit status: 0 scored (and every --fail-under met); 2 bad input; 4 a --fail-under threshold not met.
    """
    config = build_score_config(
        {"files": files, "per_rule": per_rule, "cap_aware": cap_aware, "skip_bad_lines": skip_bad_lines,
         "seed": seed, "n_boot": n_boot, "data": data.selection()}
    )  # fmt: skip
    thresholds = parse_fail_under(fail_under)
    scored = score_results(config, notify=say_note)
    check_known_cells(thresholds, scored.kind.name)
    document = scored.to_json()
    # The report file first: a terminal or pipe closed early (``| head``) must not lose it.
    target = None if json_out in (None, "-") else write_json_report(json_out, document)
    if json_out == "-":
        typer.echo(document)
    else:
        console.print(
            f"Scored {len(scored.cases)} cases of {scored.dataset.source} against "
            f"{len(scored.results.files)} file(s)\n  cases: {scored.described}",
            markup=False,
            highlight=False,
        )
        for table in scored.kind.score_tables(scored.report, scored.extra):
            console.print(table)
    for warning in scored.warnings:
        warn(warning)
    if target is not None:
        console.print(f"Report written to {target}", markup=False, highlight=False)
    if not meets(scored.report, thresholds):
        raise SystemExit(EXIT_BELOW_THRESHOLD)
