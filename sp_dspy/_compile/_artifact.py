"""The compiled artifact: ``program.json``, ``manifest.json``, ``prompt.md``, ``splits.json``.

``program.json`` is DSPy's JSON state without LM settings and with demos cut to the signature's
fields. The files are written all or none, manifest last: with a manifest, an artifact is complete.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sp_dspy._budget import Ledger
from sp_dspy._compile._data import ids_hash
from sp_dspy._compile._types import (
    BudgetRecord,
    CandidateRecord,
    CompileConfig,
    CompileManifest,
    CompileSetup,
    Contender,
    DevRecord,
    OptimizerRecord,
    Selection,
    SplitRecord,
)
from sp_dspy._data import resolved_path
from sp_dspy._errors import ConfigError, OutputError
from sp_dspy._lm import LMConfig
from sp_dspy._provenance import git_commit, package_versions, redacted_argv
from sp_dspy._writer_lock import WriterLock

DEMO_FIELD_CHARS = 1500
PROGRAM_FILE = "program.json"
PROMPT_FILE = "prompt.md"
SPLITS_FILE = "splits.json"
MANIFEST_FILE = "manifest.json"
#: Held while a compile writes the directory (removed when it ends).
LOCK_FILE = "compile.lock"


def program_state(program: Any) -> dict[str, Any]:
    """``program.dump_state()`` without LM settings and with demos cut to signature fields."""
    state: dict[str, Any] = program.dump_state()
    for name, predictor in program.named_predictors():
        entry = dict(state[name])
        fields = set(predictor.signature.fields)
        entry["lm"] = None
        entry["demos"] = [
            {key: value for key, value in demo.items() if key in fields or key == "augmented"}
            for demo in entry.get("demos", [])
        ]
        state[name] = entry
    return state


def state_key(state: dict[str, Any]) -> str:
    """A short stable hash of a program state (what makes two candidates the same)."""
    text = json.dumps(state, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def json_text(document: Any) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def write_files(files: dict[Path, str]) -> None:
    """Write ``files`` (path -> text) all or none: each goes to ``NAME.tmp`` first, and only once
    all are written are they renamed into place (a killed compile never leaves half a file).

    The last file marks the set complete (a manifest): the one already there is removed before
    the others are renamed, and the new one is renamed last, so it never sits beside files of
    another set. A failed write (a full disk) removes the temporary files, leaves the files
    already there unchanged, and raises one ``OutputError`` line: ``DIRECTORY: cannot write NAME (why)``.
    """
    staged: list[tuple[Path, Path]] = []
    current = next(iter(files))
    try:
        for current, text in files.items():
            current.parent.mkdir(parents=True, exist_ok=True)
            staged.append((current.with_name(current.name + ".tmp"), current))
            with open(staged[-1][0], "w", encoding="utf-8") as file:
                file.write(text)
        if len(staged) > 1:  # one file alone is simply replaced
            staged[-1][1].unlink(missing_ok=True)
        for tmp, current in staged:
            os.replace(tmp, current)
    except OSError as exc:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        raise OutputError(f"{current.parent}: cannot write {current.name} ({exc.strerror or exc})") from None


def write_json(path: Path, document: Any) -> None:
    """Write JSON atomically; a failure is one ``OutputError`` line naming ``path``."""
    write_files({path: json_text(document)})


def program_json(state: dict[str, Any]) -> str:
    """``program.json``'s text: the state, and the versions DSPy records in what it saves."""
    from dspy.utils.saving import get_dependency_versions

    return json_text({**state, "metadata": {"dependency_versions": get_dependency_versions()}})


def _fence(text: str, language: str = "text") -> str:
    fence = "````" if "```" in text else "```"
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


def _clip(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) > DEMO_FIELD_CHARS:
        return text[:DEMO_FIELD_CHARS] + f"\n[... {len(text) - DEMO_FIELD_CHARS} more characters]"
    return text


def _instructions_diff(before: str, after: str) -> str:
    old, new = before.splitlines(), after.splitlines()
    lines = list(
        difflib.unified_diff(old, new, "starting instructions", "compiled instructions", lineterm="")
    )
    if lines:
        return _fence("\n".join(lines), "diff")
    return "No change." if before == after else "Whitespace changes only."


def _prefix_changes(names: list[str], before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    old = before["signature"]["fields"]
    new = after["signature"]["fields"]
    return [
        f"- `{name}`: `{a['prefix']}` -> `{b['prefix']}`"
        for name, a, b in zip(names, old, new, strict=False)
        if a["prefix"] != b["prefix"]
    ]


def _demos(names: list[str], demos: list[dict[str, Any]]) -> list[str]:
    lines = [f"### Demonstrations ({len(demos)})", ""]
    if not demos:
        return [*lines, "None.", ""]
    for number, demo in enumerate(demos, 1):
        kind = "bootstrapped from the model's own correct answer" if demo.get("augmented") else "labelled"
        lines += [f"#### Demo {number} ({kind})", ""]
        for name in names:
            if name in demo:
                lines += [f"**{name}**", "", _fence(_clip(demo[name])), ""]
    return lines


def prompt_markdown(program: Any, start: dict[str, Any], final: dict[str, Any], header: list[str]) -> str:
    """``prompt.md``: ``header`` lines, then per predictor instructions, diff and demos."""
    lines = [*header, ""]
    for name, predictor in program.named_predictors():
        names = list(predictor.signature.fields)
        before, after = start[name], final[name]
        lines += [f"## Predictor `{name}`", "", "### Instructions", ""]
        lines += [_fence(after["signature"]["instructions"]), ""]
        diff = _instructions_diff(before["signature"]["instructions"], after["signature"]["instructions"])
        lines += ["### Changes from the starting instructions", "", diff, ""]
        changed = _prefix_changes(names, before, after)
        if changed:
            lines += ["### Changed field prefixes", "", *changed, ""]
        lines += _demos(names, after.get("demos", []))
    return "\n".join(lines).rstrip() + "\n"


def claim_out(out: Path, *, force: bool) -> WriterLock:
    """Make ``out`` a writable directory for a new artifact and take it: the lock returned is held.

    One compile writes an ``--out`` at a time (two would interleave their files); an
    artifact already there needs ``force``.
    """
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    if (out / MANIFEST_FILE).exists() and not force:
        raise ConfigError(
            f"--out {out}: already holds a compiled artifact ({MANIFEST_FILE}); "
            "pass --force to replace it, or choose another --out"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot create the directory ({exc.strerror or exc})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {out}: the directory is not writable")
    return WriterLock(
        out / LOCK_FILE,
        f"--out {out}",
        "one compile writes an --out at a time; wait for it to end (or stop it), or choose another --out",
    ).acquire()


def _header(setup: CompileSetup, start: Contender, selection: Selection, budget_limited: bool) -> list[str]:
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
    lines.append(f"Run it: `{eval_command(config, setup.configs['task'])}`")
    return lines


def eval_command(config: CompileConfig, task: LMConfig) -> str:
    """The command that scores an artifact on its test part with the LM it was compiled for, on the
    data it was compiled on (its ``--benchmark`` and ``--dataset``), runnable as printed."""
    out = shlex.quote(str(config.out.expanduser().resolve()))
    data = f"--benchmark {config.benchmark}"
    if config.dataset is not None:
        data += f" --dataset {shlex.quote(resolved_path(config.dataset))}"
    if config.lenient:
        data += " --lenient"
    return f"sp-dspy eval --program {out} {data} {task.command_flags()} --split {out}/{SPLITS_FILE}:test"


def save_artifact(
    setup: CompileSetup,
    budget: Ledger,
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

    config, data, recipe, chosen = setup.config, setup.data, setup.recipe, selection.chosen
    out, budget_limited = config.out, budget.exhausted
    header = _header(setup, start, selection, budget_limited)
    markdown = prompt_markdown(setup.student.guard(chosen.state), start.state, chosen.state, header)
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
        dataset={"source": data.dataset_source, "hash": data.dataset_hash, "benchmark": data.benchmark},
        split=SplitRecord(
            source=data.split_source,
            seed=data.split.seed,
            ratios=data.split.ratios,
            train=[case.id for case in data.train],
            dev=[case.id for case in data.dev],
            test_count=len(data.split.test),
            test_hash=ids_hash(data.split.test),
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
        usage={
            **budget.total().as_dict(),
            "by_lm": {role: spend.as_dict() for role, spend in sorted(budget.roles.items())},
        },
        budget=BudgetRecord(
            **config.caps.model_dump(), refusals=budget.refusals, refused_by=budget.refused_by
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
    files = {
        out / PROGRAM_FILE: program_json(chosen.state),
        out / SPLITS_FILE: json_text(data.split.model_dump()),
        out / PROMPT_FILE: markdown,
        out / MANIFEST_FILE: json_text(manifest.model_dump(mode="json")),
    }
    try:
        write_files(files)
    except OutputError as exc:
        raise OutputError(
            f"--out {exc}; the artifact was not saved (what was there is unchanged): free space (or fix "
            "the cause), then rerun the same command (finished calls come from the response cache)"
        ) from None
    return manifest
