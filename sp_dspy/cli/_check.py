"""``sp-dspy check``: one policy, one conversation, one verdict, with the ``sp_dspy.Guard`` an application uses.

The job is the library's (``CheckConfig``, ``read_check_input``, ``run_check``); this module
parses the flags and prints the verdict, or streams the batch's answers.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer
from rich.markup import escape
from rich.table import Table

from .._errors import OutputError
from .._guard import CheckConfig, load_check_guard, read_check_input, run_check
from .._lm import configure_cache, is_lasting
from .._runner import fix_for
from . import _lm_options as lmo
from . import _options as opt
from ._console import console, err_console, visible, warn

if TYPE_CHECKING:
    from .._guard import LineAnswer, Verdict
    from .._lm import LMConfig

NO_ANSWER = ("failed", "refused", "error")
EXIT_VIOLATED = 1


class Scope(StrEnum):
    """What ``--scope`` judges: ``Guard.check``'s ``scope``."""

    conversation = "conversation"
    last_turn = "last-turn"


EXIT_NO_VERDICT = 2

PolicyOption = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        help="Policy text file: numbered rules, one per line ('1. ...'); with --batch, for lines without one.",
    ),
]
ConversationOption = Annotated[
    Path | None,
    typer.Option(
        "--conversation",
        help="'Turn N - User/Chatbot: ...' text, or a .json list of {role, content} chat messages; "
        "- reads standard input.",
    ),
]
BatchOption = Annotated[
    Path | None,
    typer.Option(
        "--batch",
        help="JSON lines, one check per line ({policy, messages or conversation, id, framework}): "
        "one verdict per line, in order.",
    ),
]
OutOption = Annotated[
    Path | None, typer.Option("--out", help="With --batch: write the verdicts here, not to stdout.")
]
ConcurrencyOption = Annotated[
    int, typer.Option("--concurrency", min=1, help="With --batch: conversations checked at once.")
]
ProgramOption = Annotated[
    str,
    typer.Option(
        "--program",
        help="A compiled artifact directory, official, dspy, dspy-cot or a guard model's own format "
        "(llama-guard, granite-guardian, shieldgemma, dynaguard, gpt-oss-safeguard).",
    ),
]
ProtocolOption = Annotated[
    str | None,
    typer.Option("--protocol", help="per-policy or per-rule (default: per-policy, or the artifact's)."),
]
ParserOption = Annotated[
    str, typer.Option("--parser", help="Official baseline's parser: strict (the reference's) or robust.")
]
FrameworkOption = Annotated[
    Path | None, typer.Option("--framework", help="Regulatory framework text shown to per-rule judges.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")]
ScopeOption = Annotated[
    Scope,
    typer.Option(
        "--scope",
        help="Judge the whole conversation, or only its last message in the context of the earlier "
        "ones (last-turn: not with official or a guard model's format, which send their own prompt).",
    ),
]


def register(app: typer.Typer) -> None:
    app.command("check")(check_command)


@opt.with_flag_groups
def check_command(
    policy: PolicyOption = None,
    conversation: ConversationOption = None,
    batch: BatchOption = None,
    out: OutOption = None,
    concurrency: ConcurrencyOption = 16,
    program: ProgramOption = "official",
    protocol: ProtocolOption = None,
    parser: ParserOption = "strict",
    framework: FrameworkOption = None,
    json_output: JsonOption = False,
    scope: ScopeOption = Scope.conversation,
    lm: lmo.Lm = None,
    config: lmo.ModelsConfig = None,
    lm_flags: lmo.LmFlags = lmo.LmFlags(),
) -> None:
    """Check one conversation against a policy with a guard and print the violated rules.

    With --batch, many conversations (JSON lines), checked concurrently: one verdict per line.
    Exit status: 0 no rule violated, 1 some rule violated, 2 no verdict or bad input
    (with --batch: the worst line's); 130 Ctrl-C, 143 SIGTERM.
    """
    check = CheckConfig(
        policy=policy, conversation=conversation, batch=batch, framework=framework, program=program,
        protocol=protocol, parser=parser, scope=scope.value, concurrency=concurrency,
    )  # fmt: skip
    inputs = read_check_input(check)  # before a local server or an LM starts: bad input costs nothing
    (lm_config,) = lmo.lm_configs(lm, None, config, default=lmo.LOCAL, **lm_flags.overrides())
    configure_cache(enabled=not lm_flags.no_cache, warn=warn)
    if lmo.is_local(lm_config):
        check = check.model_copy(update={"concurrency": min(concurrency, lmo.LOCAL_CONCURRENCY)})
    with lmo.lm_session(lm_config) as live:
        guard = load_check_guard(check, live)
        if batch is None:
            verdict = run_check(check, inputs=inputs, guard=guard).verdict
        else:
            output = _BatchOutput(out)
            try:
                run_check(check, inputs=inputs, guard=guard, emit=output.emit)
            finally:
                output.close()
    if batch is not None:
        _fix_line(output.error_class, live)
        raise typer.Exit(output.code)
    assert verdict is not None
    if json_output:
        typer.echo(verdict.model_dump_json(indent=2))
    else:
        _print_verdict(verdict, inputs.rules)
    _fix_line(verdict.error_class, live)
    raise typer.Exit(exit_code(verdict.status, verdict.violated_rules))


def exit_code(status: str, violated_rules: list[int] | None) -> int:
    """``check``'s documented exit status for one verdict: 0 compliant, 1 violated, 2 no verdict."""
    if status in NO_ANSWER or violated_rules is None:
        return EXIT_NO_VERDICT
    return EXIT_VIOLATED if violated_rules else 0


def _fix_line(error_class: str | None, live: LMConfig) -> None:
    """The one ``fix:`` line for a failure that retrying does not cure (a key, a model name)."""
    if error_class is not None and is_lasting(error_class):
        err_console.print(f"fix: {fix_for(error_class, live)}", markup=False, highlight=False, soft_wrap=True)


class _BatchOutput:
    """Where ``--batch`` answers go (stdout or ``--out``), one JSON line each as they come in order;
    it keeps the worst line's exit status, the first lasting failure, and a count per outcome."""

    def __init__(self, out: Path | None) -> None:
        self.sink: TextIO | None = _open_out(out) if out is not None else None
        self.code = 0
        self.error_class: str | None = None
        self.counts: dict[str, int] = {}

    def emit(self, answer: LineAnswer) -> None:
        line = json.dumps(answer, ensure_ascii=False)
        if self.sink is None:
            typer.echo(line)
        else:
            self.sink.write(line + "\n")
            self.sink.flush()
        if "status" not in answer:  # a bad line: its FILE:LINE error
            err_console.print(f"error: {answer['error']}", markup=False, highlight=False, soft_wrap=True)
            outcome, code = "bad input", EXIT_NO_VERDICT
        else:
            code = exit_code(answer["status"], answer["violated_rules"])
            outcome = ("compliant", "violated", "no verdict")[code]
            self.error_class = self.error_class or answer.get("error_class")
        self.code = max(self.code, code)
        self.counts[outcome] = self.counts.get(outcome, 0) + 1

    def close(self) -> None:
        if self.sink is not None:
            self.sink.close()
        summary = ", ".join(f"{n} {outcome}" for outcome, n in self.counts.items())
        err_console.print(f"{sum(self.counts.values())} lines: {summary}", markup=False, highlight=False)


def _open_out(path: Path) -> TextIO:
    try:
        return path.open("w", encoding="utf-8")
    except OSError as exc:
        raise OutputError(f"--out {path}: cannot write ({exc.strerror or type(exc).__name__})") from None


#: How the model's answer was read, in words no guard user takes for "no violation" (the
#: record's ``status`` field keeps the short names).
ANSWER_READ = {
    "clean": "answer read as the protocol asks",
    "recovered": "answer read by the lenient parser (not in the protocol's format)",
    "failed": "answer unreadable",
    "refused": "the model refused to answer",
    "error": "the call failed",
}


def answer_read(status: str) -> str:
    return ANSWER_READ.get(status, f"answer status {status}")


def _print_verdict(verdict: Verdict, rule_texts: dict[int, str]) -> None:
    if verdict.violated_rules is None:
        console.print(f"[bold red]No verdict[/bold red] ({escape(visible(answer_read(verdict.status)))})")
        if verdict.error:
            console.print(f"error: {visible(verdict.error)}", markup=False, highlight=False)
    elif not verdict.violated_rules:
        console.print(
            f"[bold green]No rule violated[/bold green] ({len(verdict.rules_checked)} rules checked)"
        )
    else:
        table = Table(title=f"Violated rules ({len(verdict.violated_rules)} of {len(verdict.rules_checked)})")
        table.add_column("Rule", justify="right")
        table.add_column("Text")
        for rule in verdict.violated_rules:
            table.add_row(str(rule), escape(visible(rule_texts.get(rule, "(not a rule of this policy)"))))
        console.print(table)
    if verdict.dropped_rules:
        dropped = ", ".join(str(rule) for rule in verdict.dropped_rules)
        console.print(f"[dim]dropped (not rules of this policy):[/dim] {escape(dropped)}", highlight=False)
    if verdict.reasoning:
        console.print(f"[dim]reasoning:[/dim] {escape(visible(verdict.reasoning))}", highlight=False)
    tokens = verdict.usage.total_tokens
    usd = verdict.usage.cost
    cost = "" if usd is None else f", ${usd:.4f}"
    console.print(
        f"[dim]{escape(visible(verdict.program))} ({verdict.protocol}) on {escape(visible(verdict.model))}; "
        f"{escape(visible(answer_read(verdict.status)))}; "
        f"{tokens} tokens{cost}[/dim]",
        highlight=False,
    )
