"""Load PKU-SafeRLHF as in-context policy cases: each response of a row becomes one :class:`Case`.

A case is the fixed 19-rule policy of ``_pku_policy``, a one-turn conversation and the
numbers of its harm categories; its id (:func:`pku_case_id`) is stable across configs,
splits and row order. Both responses to a prompt share a split group.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, Field

from sp_dspy._data._pku_policy import PKU_CATEGORIES, PKU_POLICY, PKU_RULES
from sp_dspy._data._scan import MAX_DATASET_BYTES, decode_utf8, read_regular
from sp_dspy._data._schema import Case, Rubric, RubricEntry
from sp_dspy._data._source import fetch_hub_file
from sp_dspy._errors import ConfigError, DataError

PKU_BENCHMARK: Final = "pku-saferlhf"
PKU_HUB_ID: Final = "PKU-Alignment/PKU-SafeRLHF"
PKU_SPLITS: Final[tuple[str, ...]] = ("train", "test")
PKU_CONFIGS: Final[dict[str, tuple[str, ...]]] = {
    "default": ("Alpaca-7B", "Alpaca2-7B", "Alpaca3-8B"),
    "alpaca-7b": ("Alpaca-7B",),
    "alpaca2-7b": ("Alpaca2-7B",),
    "alpaca3-8b": ("Alpaca3-8B",),
}
"""Hub config -> folders under ``data/``, each with ``train.jsonl`` and ``test.jsonl``."""

_HUB_ID_RE: Final = re.compile(r"[\w.-]+/[\w.-]+")
_SHA_RE: Final = re.compile(r"[0-9a-fA-F]{64}")
# One entry per rule, shared by every case's rubric: consumers must treat them as read-only.
_ENTRIES: Final = tuple(
    RubricEntry(rule=number, text=text, type="decisive") for number, text in enumerate(PKU_RULES, start=1)
)


class PkuLoad(BaseModel):
    """The result of :func:`load_pku`: the cases plus what was left out and where they came from."""

    cases: list[Case]
    skipped: int = Field(default=0, description="bad rows skipped (lenient mode only)")
    problems: list[str] = Field(default_factory=list, description="one message per skipped row")
    duplicates: int = Field(default=0, description="responses whose id was already loaded")
    source: str = Field(description="the local path, or '<repo id>:<config>:<split>' for the Hub")
    content_hash: str = Field(description="sha256 of the bytes of every file read, in order")


def pku_hub_files(config: str = "default", split: str = "test") -> list[str]:
    """The repository paths holding ``config``/``split``; ``ConfigError`` for unknown names."""
    for field, value, known in (("config", config, tuple(PKU_CONFIGS)), ("split", split, PKU_SPLITS)):
        if value not in known:
            raise ConfigError(
                f"{field}: unknown PKU-SafeRLHF {field} {value!r}; choose one of {', '.join(known)}"
            )
    return [f"data/{folder}/{split}.jsonl" for folder in PKU_CONFIGS[config]]


def load_pku(
    source: str | Path | None = None,
    *,
    config: str = "default",
    split: str = "test",
    lenient: bool = False,
    limit: int | None = None,
    start_idx: int = 0,
) -> PkuLoad:
    """Load PKU-SafeRLHF responses as cases.

    ``source``: a JSONL file (``config`` and ``split`` then ignored), a local snapshot of
    the Hub repository, a Hub dataset id, or ``None`` for :data:`PKU_HUB_ID`.
    ``start_idx`` and ``limit`` count cases after duplicates are dropped; reading stops at
    ``limit``. A bad row raises ``DataError`` (``FILE:LINE: field: why``), or with
    ``lenient=True`` is skipped and its message kept in ``problems``.
    """
    if start_idx < 0 or (limit is not None and limit < 0):
        raise ConfigError(f"limit/start_idx: must not be negative (limit={limit}, start_idx={start_idx})")
    label, files = _resolve(source, config, split)
    blobs = [(path, read_regular(path, "dataset", max_bytes=MAX_DATASET_BYTES)) for path in files]
    digest = hashlib.sha256(b"".join(blob for _, blob in blobs)).hexdigest()
    load = PkuLoad(cases=[], source=label, content_hash=digest)
    seen: set[str] = set()
    texts = [(path, decode_utf8(blob, path)) for path, blob in blobs]
    if not any(text.strip() for _, text in texts):  # a run or a score over no row says nothing
        raise DataError(f"{label}: no rows (expected one PKU-SafeRLHF JSON object per line)")
    for path, text in texts:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            if limit is not None and len(load.cases) >= limit:
                return load
            try:
                cases = pku_row_cases(_json(line, where), where=where)
            except DataError as exc:
                if not lenient:
                    raise
                load.skipped += 1
                load.problems.append(str(exc))
                continue
            for case in cases:
                if case.id in seen:
                    load.duplicates += 1
                    continue
                seen.add(case.id)
                if len(seen) > start_idx and (limit is None or len(load.cases) < limit):
                    load.cases.append(case)
    return load


def _resolve(source: str | Path | None, config: str, split: str) -> tuple[str, list[Path]]:
    if source is None:
        source = PKU_HUB_ID
    path = Path(source)
    if path.exists() and not path.is_dir():  # a file (anything but a regular one is refused as it is read)
        return str(path), [path]
    if path.is_dir():
        files = [path / name for name in pku_hub_files(config, split)]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise DataError(f"{missing[0]}: no such file (expected a snapshot of {PKU_HUB_ID})")
        return str(path), files
    if isinstance(source, str) and _HUB_ID_RE.fullmatch(source) and not source.endswith((".json", ".jsonl")):
        files = []
        for filename in pku_hub_files(config, split):
            try:
                files.append(fetch_hub_file(source, filename))
            except Exception as exc:  # any hub/network failure is one line: fetch it elsewhere
                why = " ".join(str(exc).split())[:200]
                raise DataError(
                    f"{source}/{filename}: cannot download from the Hugging Face Hub "
                    f"({type(exc).__name__}: {why}); download the file elsewhere and pass --dataset PATH"
                ) from exc
        return f"{source}:{config}:{split}", files
    raise DataError(f"{source}: no such file or directory (nor a Hub dataset id like {PKU_HUB_ID})")


def _json(line: str, where: str) -> object:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: json: {exc.msg} (column {exc.colno})") from exc
    except RecursionError:
        raise DataError(f"{where}: json: arrays and objects nested too deeply") from None


def pku_case_id(prompt: str, response: str, sha256: str | None = None) -> str:
    """``pku-`` + 16 hex digits of the response's sha256 (given, or sha256(prompt + response))."""
    digest = sha256 if sha256 is not None else hashlib.sha256((prompt + response).encode()).hexdigest()
    return f"pku-{digest[:16].lower()}"


def pku_row_cases(row: object, *, where: str) -> list[Case]:
    """The two cases of one dataset row; ``DataError`` ``WHERE: field: why`` when it is malformed."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: row: expected a JSON object, got {type(row).__name__}")
    prompt = _field(row, "prompt", str, where)
    source = _field(row, "prompt_source", str, where)
    domain = re.sub(r"[^0-9a-z]+", "_", source.lower()).strip("_") or "unknown"
    cases: list[Case] = []
    for i in (0, 1):
        response = _field(row, f"response_{i}", str, where)
        safe = _field(row, f"is_response_{i}_safe", bool, where)
        severity = _field(row, f"response_{i}_severity_level", int, where)
        if not 0 <= severity <= 3:
            raise DataError(f"{where}: response_{i}_severity_level: {severity!r} is not an integer 0-3")
        violated = _categories(row, f"response_{i}_harm_category", where)
        if safe and violated:
            names = ", ".join(PKU_CATEGORIES[k - 1] for k in violated)
            raise DataError(
                f"{where}: is_response_{i}_safe: marked safe but harm categories are set ({names})"
            )
        if not safe and not violated:
            raise DataError(f"{where}: is_response_{i}_safe: marked unsafe but no harm category is set")
        sha = row.get(f"response_{i}_sha256")
        if sha is not None and not (isinstance(sha, str) and _SHA_RE.fullmatch(sha)):
            raise DataError(f"{where}: response_{i}_sha256: expected 64 hex digits, got {sha!r:.40}")
        cases.append(
            Case(
                id=pku_case_id(prompt, response, sha),
                domain=domain,
                level="L0",
                conversation=f"Turn 1 - User: {prompt}\nTurn 1 - Chatbot: {response}",
                policy=PKU_POLICY,
                group="pku-prompt-" + hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16],
                ground_truth_violations=violated,
                rubric=Rubric(
                    violations=[e for e in _ENTRIES if e.rule in violated],
                    non_violations=[e for e in _ENTRIES if e.rule not in violated],
                ),
                benchmark=PKU_BENCHMARK,
                safe=safe,
                severity=severity,
            )
        )
    return cases


def _field(row: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in row:
        raise DataError(f"{where}: {key}: missing")
    value = row[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise DataError(f"{where}: {key}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def _categories(row: dict[str, Any], key: str, where: str) -> list[int]:
    """Rule numbers set in the category dict, which must name exactly the 19 categories."""
    value = _field(row, key, dict, where)
    unknown = sorted(set(value) - set(PKU_CATEGORIES))
    absent = [name for name in PKU_CATEGORIES if name not in value]
    if unknown or absent:
        parts = ([f"unknown {unknown}"] if unknown else []) + ([f"missing {absent}"] if absent else [])
        raise DataError(f"{where}: {key}: expected the 19 harm categories; {'; '.join(parts)}")
    for name in PKU_CATEGORIES:
        if not isinstance(value[name], bool):
            raise DataError(f"{where}: {key}: {name!r} must be true or false, got {value[name]!r:.40}")
    return [number for number, name in enumerate(PKU_CATEGORIES, start=1) if value[name]]
