"""Deterministic train/dev/test splits grouped by conversation (so none leaks), stratified by domain."""

from __future__ import annotations

import itertools
import json
import random
import shlex
from collections import defaultdict
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from .._errors import DataError, OutputError, validation_problem
from ._scan import read_json_file
from ._schema import Case, conversation_id

SplitPart = Literal["train", "dev", "test"]
PARTS: tuple[SplitPart, ...] = ("train", "dev", "test")


class Split(BaseModel):
    """The split file: case ids per part plus what produced them."""

    train: list[str]
    dev: list[str]
    test: list[str]
    seed: int
    ratios: tuple[float, float, float]
    dataset_hash: str
    #: The ``--benchmark`` and ``--dataset`` (absolute when a local file; None: the kind's default
    #: data) the split was made on, so a mismatch can name the flags that select that data again.
    benchmark: str | None = None
    dataset: str | None = None

    def part(self, name: str) -> list[str]:
        if name not in PARTS:
            raise DataError(f"split part must be one of train, dev, test (got {name!r})")
        return list(getattr(self, name))

    def check_disjoint(self, where: str = "split") -> None:
        """Refuse overlapping parts: a case in train and test would leak."""
        for first, second in itertools.combinations(PARTS, 2):
            common = sorted(set(self.part(first)) & set(self.part(second)))
            if common:
                raise DataError(f"{where}: parts {first} and {second} overlap ({', '.join(common[:3])})")
        groups: dict[str, str] = {}
        for name in PARTS:
            for case_id in self.part(name):
                other = groups.setdefault(conversation_id(case_id), name)
                if other != name:
                    raise DataError(
                        f"{where}: conversation {conversation_id(case_id)} is in both {other} and {name}"
                    )

    def check_dataset(self, dataset_hash: str, where: str = "split") -> None:
        """Refuse a split made for other data (an edited file's ids would still select cases)."""
        if self.dataset_hash != dataset_hash:
            raise DataError(
                f"{where}: field dataset_hash: {self.dataset_hash[:12]} is not the hash of the dataset "
                f"({dataset_hash[:12]}); {self.made_for()}"
            )

    def made_for(self) -> str:
        """What data the split was made on, as the flags that select it again (when it says)."""
        if self.benchmark is None:
            return "the split was made for other data: pass the --benchmark and --dataset it was made on"
        flags = f"--benchmark {self.benchmark}"
        flags += (
            f" --dataset {shlex.quote(self.dataset)}" if self.dataset else " (its default data, no --dataset)"
        )
        return f"the split was made on {flags}: pass those flags, or make a split of this data with sp-dspy split"

    def save(self, path: Path) -> None:
        """Write the split as JSON (parent directories made); a path that cannot be written is one line."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(self.model_dump(), indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise OutputError(f"{path}: cannot write the split ({exc.strerror or exc})") from None


def parse_ratios(text: str) -> tuple[float, float, float]:
    """``"0.1,0.1,0.8"`` -> train, dev, test ratios (they must sum to 1)."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise DataError(f"--ratios: expected three numbers like 0.1,0.1,0.8, got {text!r}") from None
    if len(values) != 3 or any(v < 0 for v in values) or abs(sum(values) - 1.0) > 1e-6:
        raise DataError(f"--ratios: expected three non-negative numbers summing to 1, got {text!r}")
    return values[0], values[1], values[2]


def make_split(
    cases: list[Case],
    *,
    seed: int = 0,
    ratios: tuple[float, float, float] = (0.1, 0.1, 0.8),
    dataset_hash: str,
    benchmark: str | None = None,
    dataset: str | None = None,
) -> Split:
    """Split conversations (not cases) into train/dev/test, interleaving domains."""
    by_domain: dict[str, list[str]] = defaultdict(list)
    members: dict[str, list[str]] = defaultdict(list)
    for case in cases:
        group = case.conversation_id
        if group not in members:
            by_domain[case.domain].append(group)
        members[group].append(case.id)
    rng = random.Random(seed)
    domains = sorted(by_domain)
    rng.shuffle(domains)
    queues = []
    for domain in domains:
        groups = sorted(by_domain[domain])
        rng.shuffle(groups)
        queues.append(groups)
    order = [queue[i] for i in range(max(map(len, queues), default=0)) for queue in queues if i < len(queue)]
    counts = _part_sizes(len(order), ratios)
    assigned: dict[str, list[str]] = {name: [] for name in PARTS}
    start = 0
    for name, count in zip(PARTS, counts, strict=True):
        for group in order[start : start + count]:
            assigned[name].extend(members[group])
        start += count
    return Split(
        **assigned, seed=seed, ratios=ratios, dataset_hash=dataset_hash, benchmark=benchmark, dataset=dataset
    )


def _part_sizes(total: int, ratios: tuple[float, float, float]) -> list[int]:
    """Round train and dev, give test the rest; a part with a positive ratio gets >= 1."""
    sizes = [round(total * ratio) for ratio in ratios[:2]]
    sizes = [
        max(size, 1) if ratio > 0 and total >= 3 else size for size, ratio in zip(sizes, ratios, strict=False)
    ]
    while sum(sizes) > total:
        sizes[sizes.index(max(sizes))] -= 1
    return [*sizes, total - sum(sizes)]


def load_split(path: Path) -> Split:
    """Read and validate a split file, refusing overlapping parts."""
    document = read_json_file(path, "split file")
    try:
        split = Split.model_validate(document)
    except ValidationError as exc:
        field, message = validation_problem(exc)
        raise DataError(f"{path}: field {field}: {message}") from None
    split.check_disjoint(str(path))
    return split


def select_split(cases: list[Case], spec: str, *, dataset_hash: str) -> list[Case]:
    """Apply ``--split FILE:PART`` to ``cases``; a split of another dataset or unknown ids are errors."""
    file_part, _, part = spec.rpartition(":")
    if not file_part or part not in PARTS:
        raise DataError(f"--split: expected FILE:PART with PART train, dev or test, got {spec!r}")
    split = load_split(Path(file_part))
    split.check_dataset(dataset_hash, file_part)
    wanted = split.part(part)
    if not wanted:
        raise DataError(f"--split {spec}: the {part} part is empty (the split's ratios are {split.ratios})")
    by_id = {case.id: case for case in cases}
    unknown = [case_id for case_id in wanted if case_id not in by_id]
    if unknown:
        raise DataError(f"{file_part}: {len(unknown)} {part} id(s) not in the dataset (first: {unknown[0]})")
    return [by_id[case_id] for case_id in wanted]
