"""The ``--help`` panels: one table says which panel each flag belongs to, for every command.

A flag means the same on every command (``--lm``, ``--dataset``, ``--max-tokens``), so
it sits in the same panel everywhere. Commands declare their options without panels;
:func:`assign_panels` sorts a built command's options into typer's ``rich_help_panel``
groups, in the order of :data:`PANEL_ORDER`. An option that declares its own panel
keeps it.
"""

from __future__ import annotations

from typing import Any

DATA = "Data"
GUARD = "Guard"
MODEL = "Model"
OPTIMIZER = "Optimizer"
BUDGET = "Budget"
SCORING = "Scoring"
RUN = "Run and output"
SERVER = "Server"

#: Panels in the order ``--help`` shows them.
PANEL_ORDER = (DATA, GUARD, MODEL, OPTIMIZER, BUDGET, SCORING, RUN, SERVER)

_FLAGS: dict[str, tuple[str, ...]] = {
    DATA: (
        "--dataset", "--benchmark", "--level", "--domain", "--split", "--splits", "--ratios", "--limit",
        "--start-idx", "--shard", "--lenient", "--with-evidence", "--allow-overlap", "--policy", "--conversation",
        "--framework", "--id", "--failed",
    ),
    GUARD: ("--program", "--protocol", "--parser", "--per-rule-layout", "--variants"),
    MODEL: (
        "--lm", "--models", "--config", "--api-base", "--api-key-env", "--temperature", "--max-tokens",
        "--reasoning-effort", "--timeout", "--num-retries", "--no-cache", "--json-schema", "--transport",
        "--show-request",
    ),
    OPTIMIZER: (
        "--optimizer", "--optimizer-config", "--set", "--top-k", "--prompt-lm", "--prompt-api-base",
        "--prompt-api-key-env", "--reflection-lm", "--reflection-api-base", "--reflection-api-key-env",
    ),
    BUDGET: ("--max-calls", "--max-total-tokens", "--max-usd", "--dry-run"),
    SCORING: (
        "--cap-aware", "--per-rule", "--skip-bad-lines", "--no-data-cache", "--n-boot", "--seed", "--baseline",
        "--label",
    ),
    RUN: (
        "--out", "--force", "--output-dir", "--json", "--run-id", "--resume", "--retry-errors", "--run-config", "--plan",
        "--concurrency", "--quiet", "--verbose",
    ),
    SERVER: (
        "--backend", "--model", "--port", "--n-ctx", "--n-parallel", "--threads", "--max-model-len",
        "--gpu-memory-utilization", "--tensor-parallel-size",
    ),
}  # fmt: skip

#: Flag -> panel, for every command.
PANELS: dict[str, str] = {flag: panel for panel, flags in _FLAGS.items() for flag in flags}

#: Where a flag's panel depends on the command: ``compile --seed`` seeds the split and the optimizer.
COMMAND_PANELS: dict[tuple[str, str], str] = {("compile", "--seed"): OPTIMIZER}


def panel_of(command: str, flag: str) -> str | None:
    """The panel of ``flag`` on ``command``, or ``None`` for typer's default "Options" panel."""
    return COMMAND_PANELS.get((command, flag)) or PANELS.get(flag)


def assign_panels(command_name: str, command: Any) -> None:
    """Put each option of a built click ``command`` in its panel and order them panel by panel."""
    for param in command.params:
        long_flags = [opt for opt in getattr(param, "opts", ()) if opt.startswith("--")]
        if not long_flags or getattr(param, "rich_help_panel", None):
            continue
        param.rich_help_panel = panel_of(command_name, long_flags[0])

    def rank(param: Any) -> int:
        panel = getattr(param, "rich_help_panel", None)
        return PANEL_ORDER.index(panel) if panel in PANEL_ORDER else len(PANEL_ORDER)

    command.params.sort(key=rank)  # stable: a panel keeps the command's own order
