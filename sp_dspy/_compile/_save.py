"""Write the artifact directory of a finished (or budget-stopped) compile.

Files are written program first and manifest last, each atomically: a directory
with a ``manifest.json`` is a complete artifact.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sp_dspy._compile._artifact import prompt_markdown, write_json, write_program
from sp_dspy._compile._budget import Budget, Tally
from sp_dspy._compile._manifest import (
    BudgetRecord,
    CandidateRecord,
    CompileManifest,
    DevRecord,
    OptimizerRecord,
    SplitRecord,
)
from sp_dspy._compile._recorder import state_key
from sp_dspy._errors import ConfigError

if TYPE_CHECKING:
    from sp_dspy._compile._run import Contender, Selection, _Setup

PROMPT_FILE = "prompt.md"
SPLITS_FILE = "splits.json"
MANIFEST_FILE = "manifest.json"


def claim_out(out: Path, *, force: bool) -> None:
    """Make ``out`` a writable directory for a new artifact, before any LM call.

    Raises:
        ConfigError: ``out`` already holds an artifact (its ``manifest.json``) and
            ``force`` is not set, is not a directory, or cannot be created or written.
    """
    if (out / MANIFEST_FILE).exists() and not force:
        raise ConfigError(
            f"--out {out}: already holds a compiled artifact ({MANIFEST_FILE}); "
            "pass --force to replace it, or choose another --out"
        )
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot create the directory ({exc.strerror or exc})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {out}: the directory is not writable")


def _usage(budget: Budget) -> dict[str, Any]:
    total = Tally()
    roles = {}
    for role, tally in sorted(budget.roles.items()):
        roles[role] = tally.as_dict()
        total.add(tally)
    return {**total.as_dict(), "by_lm": roles}


def _header(setup: _Setup, start: Contender, selection: Selection, budget_limited: bool) -> list[str]:
    config = setup.config
    before, after = start.dev, selection.chosen.dev
    lines = [
        f"# Compiled guard: {setup.student.name} {config.protocol}, optimizer {setup.recipe.name}",
        "",
        f"Task LM: `{setup.configs['task'].model}`; seed {config.seed}; "
        f"train {len(setup.data.train)} / dev {len(setup.data.dev)} cases.",
    ]
    if before is not None and after is not None:
        lines.append(
            f"Dev score (mean case RMR, excluded = wrong): {before.describe()} -> {after.describe()}."
        )
        lines.append(f"{selection.reason[0].upper()}{selection.reason[1:]}.")
    if budget_limited:
        lines.append("Budget-limited: a cap stopped the compile; this is the best program found before it.")
    lines.append(
        f"Run it: `sp-dspy eval --program {config.out} --lm MODEL --split {config.out}/{SPLITS_FILE}:test`"
    )
    return lines


def save_artifact(
    setup: _Setup,
    budget: Budget,
    *,
    start: Contender,
    contenders: list[Contender],
    selection: Selection,
    recorded: int,
    started: datetime,
    wall_s: float,
    warnings: list[str],
) -> CompileManifest:
    """Write ``program.json``, ``splits.json``, ``prompt.md`` and ``manifest.json``; return the manifest."""
    from sp_dspy._runner._manifest import git_commit, package_versions, redacted_argv

    config, data, recipe = setup.config, setup.data, setup.recipe
    out = config.out
    chosen = selection.chosen
    guard = setup.student.guard(chosen.state)
    write_program(out / "program.json", chosen.state)
    data.split.save(out / SPLITS_FILE)
    budget_limited = budget.exhausted
    markdown = prompt_markdown(
        guard, start.state, chosen.state, _header(setup, start, selection, budget_limited)
    )
    (out / PROMPT_FILE).write_text(markdown, encoding="utf-8")
    assert start.dev is not None and chosen.dev is not None  # both scored by compile_guard
    manifest = CompileManifest(
        program=setup.student.name,
        protocol=config.protocol,
        optimizer=OptimizerRecord(
            name=recipe.name,
            dspy_class=recipe.dspy_class,
            parameters=setup.settings.model_dump(),
            settings_file=str(config.optimizer_config) if config.optimizer_config else None,
            overrides=config.overrides,
            seed_note=recipe.seed_note,
            sampling_note=recipe.sampling_note,
        ),
        seed=config.seed,
        lms={role: cfg.public_dict() for role, cfg in setup.configs.items()},
        temperatures={
            **{role: cfg.temperature for role, cfg in setup.configs.items()},
            "optimizer": recipe.sampling_note,
        },
        dataset={
            "source": data.dataset_source,
            "hash": data.dataset_hash,
            "benchmark": data.benchmark,
        },
        split=SplitRecord(
            source=data.split_source,
            seed=data.split.seed,
            ratios=data.split.ratios,
            train=[case.id for case in data.train],
            dev=[case.id for case in data.dev],
            test_count=data.test_count,
            test_hash=data.test_hash,
            split_dataset_hash=data.split.dataset_hash,
        ),
        dev=DevRecord(
            before=start.dev,
            after=chosen.dev,
            selected=chosen.origin,
            reason=selection.reason,
            candidates=[
                CandidateRecord(origin=c.origin, state_hash=state_key(c.state), dev=c.dev)
                for c in contenders
                if c.dev is not None
            ],
            recorded_candidates=recorded,
        ),
        usage=_usage(budget),
        budget=BudgetRecord(
            max_calls=config.caps.max_calls,
            max_tokens=config.caps.max_tokens,
            max_usd=config.caps.max_usd,
            refusals=budget.refusals,
            refused_by=budget.refused_by,
        ),
        budget_limited=budget_limited,
        started_at=started.isoformat(),
        finished_at=datetime.now(UTC).isoformat(),
        wall_s=round(wall_s, 3),
        versions=package_versions(),
        git_commit=git_commit(),
        command=redacted_argv(),
        warnings=warnings,
    )
    write_json(out / MANIFEST_FILE, manifest.model_dump(mode="json"))
    return manifest
