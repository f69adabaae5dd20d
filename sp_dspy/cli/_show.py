"""``sp-dspy show``: one result file case by case, next to the dataset's rules (wrapped, never cut)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.rule import Rule
from rich.table import Table

from .._benchmarks import benchmark_kind
from .._errors import DataError
from .._metrics import case_outcomes, cells_of, classify_failure, resolve_records
from .._scoring import RecordedSelection, load_for_results, read_results
from . import _options as opt
from ._console import console, say_note, visible

if TYPE_CHECKING:
    from .._data import Case
    from .._metrics import CaseOutcome, JudgmentRecord, PolicyRecord


def register(app: typer.Typer) -> None:
    app.command("show")(show_command)


def show_command(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Result JSONL file(s) of one run; a later file wins on the same case.", show_default=False
        ),
    ],
    case_ids: Annotated[
        list[str] | None,
        typer.Option("--id", help="Only this case (repeatable, or comma-separated ids).", show_default=False),
    ] = None,
    failed: Annotated[
        bool, typer.Option("--failed", help="Only cases that are not an exact match (excluded ones too).")
    ] = False,
    dataset: opt.Dataset = None,
    benchmark: opt.RecordedBenchmark = None,
    lenient: opt.Lenient = False,
) -> None:
    """Show a run case by case: gold and predicted rules with their texts, FP/FN, status and the answer."""
    results = read_results(files)
    recorded = RecordedSelection(dataset=dataset, benchmark=benchmark, lenient=lenient)
    data = load_for_results([files], [results], data=recorded, check=False, notify=say_note)
    loaded = data.loaded
    by_id = {case.id: case for case in data.cases}  # the run's selected cases
    # Case ids in the order the results file first mentions them.
    in_order = dict.fromkeys([*results.records, *(judgment.cid for judgment in results.judgments)])
    present = [cid for cid in in_order if cid in by_id]
    unknown = sorted(results.result_ids() - {case.id for case in loaded.cases})
    if unknown:
        raise DataError(
            f"{files[0]}: {len(unknown)} case id(s) not in the dataset {loaded.source} ({', '.join(unknown[:3])}); "
            "pass the run's --dataset"
        )
    wanted = [part.strip() for value in case_ids or [] for part in value.split(",") if part.strip()]
    if wanted:
        missing = [cid for cid in wanted if cid not in present]
        if missing:
            raise DataError(f"--id {missing[0]}: no result for this case in {', '.join(map(str, files))}")
        present = [cid for cid in present if cid in wanted]
    cases = [by_id[cid] for cid in present]
    records = resolve_records(cases, results)
    judgments: dict[str, list[JudgmentRecord]] = {}
    for judgment in results.judgments:
        judgments.setdefault(judgment.cid, []).append(judgment)
    views = [
        _View(case, outcome, results.records.get(case.id) or records.get(case.id), judgments.get(case.id, []))
        for case, outcome in zip(cases, case_outcomes(cases, records), strict=True)
        if not (failed and outcome.exact)
    ]
    for view in views:
        _print_case(view)
    which = "failed " if failed else ""
    console.print(
        f"[dim]{len(views)} {which}case(s) shown of {len(present)} with results "
        f"({len(data.cases)} selected: {escape(data.described)})[/dim]",
        highlight=False,
    )


@dataclass
class _View:
    """One case with what the results say about it."""

    case: Case
    outcome: CaseOutcome
    record: PolicyRecord | None
    judgments: list[JudgmentRecord]


def _status(view: _View) -> str:
    if view.judgments:
        counts = Counter(str(j.parse_status) for j in view.judgments)
        without = sum(1 for j in view.judgments if not j.has_verdict)
        parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()) if status != "None")
        return f"{len(view.judgments)} judgments ({parts or 'no status'}; {without} without a verdict)"
    record = view.record
    if record is None:
        return "no record"
    return record.parse_status or (
        "refused" if record.refused else "failed" if record.parse_failed else "recorded"
    )


def _verdict(view: _View) -> str:
    outcome = view.outcome
    if outcome.excluded:
        return "[red]excluded[/red]"
    if outcome.exact:
        return "[green]exact match[/green]"
    # Failure modes are SafePyramid's (exceptions, conditionals, distractors); other kinds have none.
    has_modes = benchmark_kind(view.case.benchmark).has_leaderboard
    modes = " ".join(classify_failure(view.case, outcome)) if has_modes else ""
    return f"[yellow]FP {outcome.fp}, FN {outcome.fn}[/yellow]" + (f" ({modes})" if modes else "")


def _where(case: Case) -> str:
    """The case's level and domain (``L0 finance``); a benchmark without levels names no level,
    but the case's tags where it breaks down by them (``custom (tag refunds)``)."""
    by = benchmark_kind(case.benchmark).breakdown
    cells = cells_of(case.level, case.tags, by)
    if by == "level":
        return " ".join([*cells, case.domain])
    if by == "tag":  # a custom policy: its tags say where the case counts, its one domain nothing
        return ", ".join(cells) or "no tag"
    return case.domain + (f" ({', '.join(cells)})" if cells else "")


def _print_case(view: _View) -> None:
    case, outcome = view.case, view.outcome
    console.print(Rule(escape(visible(case.id)), align="left"))
    console.print(
        f"{escape(visible(_where(case)))}; status {escape(visible(_status(view)))}; {_verdict(view)}",
        highlight=False,
    )
    console.print(
        f"gold {sorted(outcome.gt) or '[]'}; predicted {'none' if outcome.excluded and not outcome.pred else sorted(outcome.pred)}",
        highlight=False,
        markup=False,
    )
    entries = {entry.rule: entry for entry in case.rubric.entries()}
    undecided = {j.rule for j in view.judgments if not j.has_verdict}
    rules = sorted(outcome.gt | outcome.pred | undecided)
    if rules:
        table = Table(show_edge=False, pad_edge=False, expand=False)
        for header in ("rule", "gold", "pred", ""):
            table.add_column(header, justify="right" if header == "rule" else "left", no_wrap=True)
        typed = benchmark_kind(case.benchmark).rule_types  # elsewhere every rule would read "decisive"
        if typed:
            table.add_column("type", overflow="fold")
        table.add_column("text", overflow="fold", ratio=1)
        for rule in rules:
            entry = entries.get(rule)
            table.add_row(
                str(rule),
                "yes" if rule in outcome.gt else "-",
                "?" if rule in undecided else "yes" if rule in outcome.pred else "-",
                _mark(rule, outcome, undecided),
                *([escape(visible(entry.type)) if entry is not None else ""] if typed else []),
                escape(visible(entry.text)) if entry is not None else "(not a rule of this policy)",
            )
        console.print(table)
    _print_answer(view, rules)


def _mark(rule: int, outcome: CaseOutcome, undecided: set[int]) -> str:
    if rule in undecided:
        return "[red]no verdict[/red]"
    if rule in outcome.gt and rule in outcome.pred:
        return "[green]TP[/green]"
    return "[yellow]FP[/yellow]" if rule in outcome.pred else "[yellow]FN[/yellow]"


def _print_answer(view: _View, rules: list[int]) -> None:
    """What the model said: the record's answer fields, or the shown judgments' reasons."""
    lines: list[tuple[str, Any]] = []
    record = view.record
    if record is not None and not view.judgments:
        lines += [
            ("analysis", record.analysis),
            ("reasoning", record.reasoning),
            ("answer", record.answer),
            ("error", record.error),
        ]
        if record.dropped_rules:
            lines.append(("dropped", f"rule numbers {record.dropped_rules} are not rules of this policy"))
    for judgment in view.judgments:
        said = judgment.error or judgment.reason or judgment.answer
        if judgment.rule in rules and said:
            lines.append((f"rule {judgment.rule}", said))
    for label, value in lines:
        if value not in (None, ""):
            console.print(f"[dim]{label}:[/dim] {escape(visible(str(value)))}", highlight=False)
    sent: list[tuple[int | None, PolicyRecord | JudgmentRecord]] = (
        [(None, record)] if record is not None and not view.judgments else []
    )
    sent += [(j.rule, j) for j in view.judgments if j.rule in rules]
    for rule, line in sent:  # kept by --log-requests: what the model was sent, as --show-request prints it
        for request in line.requests or []:
            label = "request" if rule is None else f"rule {rule} request"
            text = json.dumps(request, ensure_ascii=False, indent=2)
            console.print(f"[dim]{label}:[/dim] {escape(visible(text))}", highlight=False)
