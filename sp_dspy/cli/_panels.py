"""The ``--help`` panels: one table says which panel each flag belongs to, for every command.

A flag means the same on every command, so it sits in the same panel everywhere; commands
declare options without panels and :func:`assign_panels` sorts them in.
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

PANELS: dict[str, str] = {flag: panel for panel, flags in _FLAGS.items() for flag in flags}
#: Where a flag's panel depends on the command: ``compile --seed`` seeds the split and the optimizer.
COMMAND_PANELS: dict[tuple[str, str], str] = {("compile", "--seed"): OPTIMIZER}


def assign_panels(command_name: str, command: Any) -> None:
    """Put each option of a built click ``command`` in its panel (one it declares wins), panel by panel."""
    for param in command.params:
        long_flags = [opt for opt in getattr(param, "opts", ()) if opt.startswith("--")]
        if long_flags and not getattr(param, "rich_help_panel", None):
            flag = long_flags[0]
            param.rich_help_panel = COMMAND_PANELS.get((command_name, flag)) or PANELS.get(flag)

    def rank(param: Any) -> int:
        panel = getattr(param, "rich_help_panel", None)
        return PANEL_ORDER.index(panel) if panel in PANEL_ORDER else len(PANEL_ORDER)

    command.params.sort(key=rank)  # stable: a panel keeps the command's own order
