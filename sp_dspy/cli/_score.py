"""``sp-dspy score``: recompute the official metrics from result files.

The benchmark kind (``--benchmark``) chooses the tables and adds its own JSON
sections: PKU-SafeRLHF prints (and ``--json`` holds, under ``pku``) harm categories,
safe/unsafe and severity beside the paper's figures; ``custom`` prints RMR/RDR over
all cases and per tag (``tags``). A kind without levels has no level cell. Nothing here
touches dspy or litellm.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from .._benchmarks import benchmark_kind
from .._data._selection import CaseSelection
from .._errors import ConfigError
from .._metrics import score
from .._metrics._gate import EXIT_BELOW_THRESHOLD
from . import _options as opt
from ._console import console, warn, write_json_report
from ._dataset import load_for_results, read_results
from ._fail_under import FailUnder, check_known_cells, meets, parse_fail_under


def register(app: typer.Typer) -> None:
    app.command("score")(score_command)


def score_command(
    files: Annotated[
        list[Path],
        typer.Argument(help="Result JSONL files; a later file wins on the same case id.", show_default=False),
    ],
    dataset: opt.RecordedDataset = None,
    benchmark: opt.RecordedBenchmark = None,
    level: opt.Level = None,
    domain: opt.Domain = None,
    split: opt.ScoreSplit = None,
    limit: opt.ScoreLimit = None,
    start_idx: opt.ScoreStartIdx = 0,
    shard: opt.ScoreShard = None,
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
    n_boot: opt.NBoot = 1000,
    fail_under: FailUnder = None,
) -> None:
    """Score result JSONL files (per-policy records or per-rule judgments).

    Exit status: 0 scored (and every --fail-under met); 2 bad input; 4 a --fail-under threshold not met.
    """
    if n_boot < 0:
        raise ConfigError(f"--n-boot: must be >= 0, got {n_boot}")
    thresholds = parse_fail_under(fail_under)

    results = read_results(files, skip_bad_lines=skip_bad_lines, allow_empty=False)
    select = CaseSelection(
        level=level, domain=domain, split=split, limit=limit, start_idx=start_idx, shard=shard
    )
    data = load_for_results(
        [files], [results], dataset=dataset, benchmark=benchmark, select=select,
        with_evidence=with_evidence, lenient=lenient,
    )  # fmt: skip
    loaded, cases = data.loaded, data.cases
    kind = benchmark_kind(loaded.benchmark)
    check_known_cells(thresholds, kind.name)
    report = score(
        cases,
        results,
        cap_aware=cap_aware,
        per_rule=per_rule,
        ci=n_boot > 0,
        seed=seed,
        n_boot=n_boot,
        all_ids=[c.id for c in loaded.cases],
        by=kind.breakdown,
        unit=kind.unit,
    )

    document_data = report.to_json_dict()
    extra = kind.extra_scores(cases, results, cap_aware=cap_aware, per_rule=per_rule)
    document_data.update(extra)
    document = json.dumps(document_data, indent=2, ensure_ascii=False)
    # The report file first: a terminal or pipe closed early (``| head``) must not lose it.
    target = None if json_out in (None, "-") else write_json_report(json_out, document)
    if json_out == "-":
        typer.echo(document)
    else:
        console.print(
            f"Scored {len(cases)} cases of {loaded.source} against {len(results.files)} file(s)\n"
            f"  cases: {data.described}",
            markup=False,
            highlight=False,
        )
        for table in kind.score_tables(report, extra):
            console.print(table)
    if loaded.skipped:
        warn(f"{loaded.skipped} malformed dataset case(s) skipped (--lenient)")
    if results.bad_lines:
        first = results.bad_line_messages[0] if results.bad_line_messages else ""
        warn(f"{results.bad_lines} malformed result line(s) skipped; first: {first}")
    if report.unknown_ids.count:
        examples = ", ".join(report.unknown_ids.examples)
        warn(f"{report.unknown_ids.count} result id(s) not in the dataset (e.g. {examples})")
    if target is not None:
        console.print(f"Report written to {target}", markup=False, highlight=False)
    if not meets(report, thresholds):
        raise SystemExit(EXIT_BELOW_THRESHOLD)
