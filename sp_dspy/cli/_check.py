"""``sp-dspy check``: one policy, one conversation, one verdict, with the ``sp_dspy.Guard`` an application uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from .._data import Source, guard_case
from .._errors import DataError
from .._guard import Guard
from .._lm import configure_cache, is_lasting
from .._runner._failures import fix_for
from . import _lm_options as lmo
from ._console import console, err_console

if TYPE_CHECKING:
    from .._guard import Verdict

NO_ANSWER = ("failed", "refused", "error")
EXIT_VIOLATED = 1
EXIT_NO_VERDICT = 2


def register(app: typer.Typer) -> None:
    app.command("check")(check_command)


@lmo.with_lm_flags
def check_command(
    policy: Annotated[
        Path, typer.Option("--policy", help="Policy text file: numbered rules, one per line ('1. ...').")
    ],
    conversation: Annotated[
        Path,
        typer.Option(
            "--conversation",
            help="'Turn N - User/Chatbot: ...' text, or a .json list of {role, content} chat messages.",
        ),
    ],
    program: Annotated[
        str, typer.Option("--program", help="A compiled artifact directory, official, dspy or dspy-cot.")
    ] = "official",
    protocol: Annotated[
        str | None,
        typer.Option("--protocol", help="per-policy or per-rule (default: per-policy, or the artifact's)."),
    ] = None,
    parser: Annotated[
        str, typer.Option("--parser", help="Official baseline's parser: strict (the reference's) or robust.")
    ] = "strict",
    framework: Annotated[
        Path | None, typer.Option("--framework", help="Regulatory framework text shown to per-rule judges.")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
    lm: lmo.Lm = None,
    config: lmo.ModelsConfig = None,
    lm_flags: lmo.LmFlags = lmo.LmFlags(),
) -> None:
    """Check one conversation against a policy with a guard and print the violated rules.

    Exit status: 0 no rule violated, 1 some rule violated, 2 no verdict or bad input.
    """
    policy_text = _read_text(policy, "--policy")
    raw_conversation = read_conversation(conversation)
    framework_text = _read_text(framework, "--framework") if framework is not None else ""
    # Checked before a local server or an LM starts: bad input costs nothing.
    case = guard_case(
        policy_text,
        raw_conversation,
        framework=framework_text,
        policy_source=Source("policy", str(policy)),
        conversation_source=Source("conversation", str(conversation)),
    )
    (lm_config,) = lmo.lm_configs(lm, None, config, default=lmo.LOCAL, **lm_flags.overrides())
    configure_cache(enabled=not lm_flags.no_cache)
    with lmo.lm_session(lm_config) as live:
        guard = Guard.load(program, lm=live, protocol=protocol, parser=parser)
        verdict = guard.check(policy_text, raw_conversation, framework=framework_text)
    if json_output:
        typer.echo(verdict.model_dump_json(indent=2))
    else:
        _print_verdict(verdict, {entry.rule: entry.text for entry in case.rubric.entries()})
    if verdict.error_class is not None and is_lasting(verdict.error_class):
        err_console.print(
            f"fix: {fix_for(verdict.error_class, live)}", markup=False, highlight=False, soft_wrap=True
        )
    if verdict.status in NO_ANSWER or verdict.violated_rules is None:
        raise typer.Exit(EXIT_NO_VERDICT)
    if verdict.violated_rules:
        raise typer.Exit(EXIT_VIOLATED)


def _read_text(path: Path, flag: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{flag} {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise DataError(f"{flag} {path}: cannot read ({reason})") from None


def read_conversation(path: Path) -> str | list[Any]:
    """A ``.json`` file's message list (a bare list or ``{"messages": [...]}``), else the text."""
    text = _read_text(path, "--conversation")
    if path.suffix.lower() != ".json":
        return text
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    if isinstance(document, dict) and "messages" in document:
        document = document["messages"]
    if not isinstance(document, list):
        raise DataError(
            f'{path}: expected a JSON list of {{role, content}} messages (or {{"messages": [...]}}), '
            f"got {type(document).__name__}"
        )
    return document


def _print_verdict(verdict: Verdict, rule_texts: dict[int, str]) -> None:
    if verdict.violated_rules is None:
        console.print(f"[bold red]No verdict[/bold red] (status: {verdict.status})")
        if verdict.error:
            console.print(f"error: {verdict.error}", markup=False, highlight=False)
    elif not verdict.violated_rules:
        console.print(
            f"[bold green]No rule violated[/bold green] ({len(verdict.rules_checked)} rules checked)"
        )
    else:
        table = Table(title=f"Violated rules ({len(verdict.violated_rules)} of {len(verdict.rules_checked)})")
        table.add_column("Rule", justify="right")
        table.add_column("Text")
        for rule in verdict.violated_rules:
            table.add_row(str(rule), escape(rule_texts.get(rule, "(not a rule of this policy)")))
        console.print(table)
    if verdict.dropped_rules:
        dropped = ", ".join(str(rule) for rule in verdict.dropped_rules)
        console.print(f"[dim]dropped (not rules of this policy):[/dim] {escape(dropped)}", highlight=False)
    if verdict.reasoning:
        console.print(f"[dim]reasoning:[/dim] {escape(verdict.reasoning)}", highlight=False)
    tokens = verdict.usage.total_tokens
    usd = verdict.usage.cost
    cost = "" if usd is None else f", ${usd:.4f}"
    console.print(
        f"[dim]{escape(verdict.program)} ({verdict.protocol}) on {escape(verdict.model)}; status {verdict.status}; "
        f"{tokens} tokens{cost}[/dim]",
        highlight=False,
    )
