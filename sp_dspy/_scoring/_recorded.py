"""The data result files are scored on: the dataset (the flags, else the run's manifest) and the
cases the runs selected (their manifests, else the selection flags, else every case).

Every command that reads recorded results (``score``, ``compare``, ``report``, ``view``, ``show``,
``export``) loads them here, so they score the same run on the same cases.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from pydantic import ConfigDict

from .._benchmarks import DEFAULT_BENCHMARK, dataset_kind, load_benchmark
from .._data import CaseSelection, RecordedData, check_results_belong, filter_cases, recorded_data
from .._errors import DataError
from .._metrics import read_result_files

if TYPE_CHECKING:
    from .._data import Benchmark, Case
    from .._metrics import ResultSet
    from .._run_manifest import RunManifest


class RecordedSelection(CaseSelection):
    """The data recorded results are scored on: ``dataset`` and ``benchmark`` (None: the ones the run's
    manifest records, else the bundled sample and SafePyramid), how the dataset loads, and which cases
    (``CaseSelection``: a split, slice or shard replaces the runs' own selections, level and domain
    alone narrow them). The settings of the ``--dataset ... --with-evidence`` flags of ``score``,
    ``compare``, ``report``, ``view`` and ``export``."""

    model_config = ConfigDict(extra="forbid")

    dataset: str | None = None
    benchmark: str | None = None
    lenient: bool = False
    with_evidence: bool = False


class Note(NamedTuple):
    """A line said while the data loads, as shown: ``detail`` (which dataset a manifest named) is
    informational, ``warning`` says what a score leaves out (``warning: ...``, the malformed result
    lines an export skipped), else a caveat (``note: ...``)."""

    text: str
    detail: bool = False
    warning: bool = False


#: Where the notes go as they come (the CLI: stderr), so one said before an error is not lost.
Notify = Callable[[Note], None]


@dataclass(frozen=True)
class ScoredData:
    """``loaded``: the whole dataset (ids outside the selection are not unknown); ``cases``: the
    cases the results are scored on, in dataset order; ``described``: which cases, in words;
    ``note``: what the runs selected and which set is scored, when their selections differ."""

    loaded: Benchmark
    cases: list[Case]
    described: str
    note: str | None = None


def read_results(
    paths: Sequence[Path | str], *, skip_bad_lines: bool = False, allow_empty: bool = True
) -> ResultSet:
    """``read_result_files``, but a dataset given where results belong is named as one
    (``X is a SafePyramid dataset, not a results file``) instead of failing at its first line
    or, for a custom dataset whose rows carry ids and rules, being scored as answers."""
    for raw in paths:
        path = Path(raw)
        if path.name == "manifest.json":
            raise DataError(
                f"{path}: is a run manifest, not a results file: give the results_*.jsonl beside it"
            )
        kind = dataset_kind(path)
        if kind is not None:
            raise DataError(
                f"{path}: is a {kind.title} dataset, not a results file: give it as --dataset, "
                "and as RESULTS the results_*.jsonl a run wrote"
            )
    return read_result_files(paths, skip_bad_lines=skip_bad_lines, allow_empty=allow_empty)


def load_for_results(
    sides: Sequence[Sequence[Path]],
    results: Sequence[ResultSet],
    *,
    data: RecordedSelection,
    check: bool = True,
    announce: bool = True,
    notify: Notify | None = None,
) -> ScoredData:
    """Load the dataset and the cases the result files of ``sides`` (one per variant) are scored on.

    Without ``--dataset``, the manifest of the run that wrote the files names the dataset and its
    benchmark (a detail note says so), unless ``--benchmark`` names another; without any
    manifest, a note names the dataset used. The cases are those the runs selected, read from
    their manifests: a run is scored on its own cases, never on cases it never meant to answer
    (missing records among them still count as excluded). Files of one side are parts of one
    variant (shards, resumed runs): the union of their selections; several sides are compared
    on the cases every side selected; a note says which set when the runs' selections differ.
    A file without a manifest selected every case. ``data`` (the command's flags): ``--split``,
    ``--start-idx``, ``--limit`` or ``--shard`` replace the recorded selections; ``--level`` and
    ``--domain`` alone narrow them. With ``check``, results none of whose ids is a case are
    refused, not scored as 100% excluded. ``announce``: say the note on differing selections
    (``report`` keeps it with its summary's notes instead). ``notify`` gets each note as it is said.
    """
    say = notify or _silent
    files = [file for side in sides for file in side]
    beside: dict[Path, list[tuple[Path, RunManifest]]] = {}
    recorded = {file: found for file in files if (found := recorded_data(file, beside)) is not None}
    loaded, recorded = _load_recorded(files, recorded, data, say)
    if check:
        ids = {case.id for case in loaded.cases}
        for result_set in results:
            where = ", ".join(result_set.files) or "the results"
            check_results_belong(result_set.result_ids(), ids, where=where, source=loaded.source)
    if data.takes_part:
        return ScoredData(loaded, data.apply(loaded), f"the cases {data.describe()} selects")
    cases, described, note = _selected(loaded, sides, recorded)
    if data.level or data.domain:
        cases = filter_cases(cases, level=data.level, domain=data.domain)
    if note is not None and announce:
        say(Note(f"note: {note}"))
    return ScoredData(loaded, cases, described, note)


def _silent(note: Note) -> None:
    """No one to tell: a Python caller reads ``ScoredData.note`` (or passes ``notify``)."""


def _load_recorded(
    files: list[Path], recorded: dict[Path, RecordedData], data: RecordedSelection, say: Notify
) -> tuple[Benchmark, dict[Path, RecordedData]]:
    """The dataset the runs recorded (unless ``--dataset``, or a ``--benchmark`` other than theirs,
    names another), and the recorded data still in use (none when the user chose another)."""
    dataset, benchmark = data.dataset, data.benchmark
    chosen = None if dataset is not None else next(iter(recorded.values()), None)
    if chosen is not None and benchmark is not None and chosen.benchmark not in (None, benchmark):
        recorded, chosen = {}, None  # the user asked for another benchmark: its default data, not the runs'
    name = benchmark or (chosen.benchmark if chosen else None) or DEFAULT_BENCHMARK
    try:
        loaded = load_benchmark(
            chosen.source if chosen else dataset, benchmark=name, with_evidence=data.with_evidence,
            lenient=data.lenient,
        )  # fmt: skip
    except DataError as exc:
        if chosen is None:
            raise
        raise DataError(
            f"{chosen.manifest}: the run's dataset does not load ({exc}); pass --dataset"
        ) from None
    if chosen is not None:
        say(Note(f"dataset from {chosen.manifest}: {loaded.source} ({name})", detail=True))
    elif dataset is None:
        say(Note(
            f"note: no run manifest beside {files[0]} names its dataset: scored on {loaded.source} "
            f"({name}); pass --dataset to score on another"
        ))  # fmt: skip
    return loaded, recorded


def _selected(
    loaded: Benchmark, sides: Sequence[Sequence[Path]], recorded: dict[Path, RecordedData]
) -> tuple[list[Case], str, str | None]:
    """The cases the runs of ``sides`` selected, which set that is in words, and a note when the
    runs' selections differ (see ``load_for_results``)."""
    picked: dict[Path, tuple[str, set[str]]] = {}  # per manifest: its selection in words, its case ids
    per_file: dict[Path, tuple[str, set[str]] | None] = {}
    for file in {file for side in sides for file in side}:
        data = recorded.get(file)
        if data is None or data.selection is None:
            per_file[file] = None  # no manifest (or one before selections were recorded): every case
            continue
        if data.manifest not in picked:
            try:
                ids = {case.id for case in data.selection.apply(loaded)}
            except DataError as exc:
                raise DataError(
                    f"{data.manifest}: the run's selection ({data.selection.describe()}) does not apply to "
                    f"{loaded.source} ({exc}); pass the run's --dataset, or --split/--limit for the cases"
                ) from None
            picked[data.manifest] = (data.selection.describe(), ids)
        per_file[file] = picked[data.manifest]
    side_ids: list[set[str] | None] = []
    for side in sides:
        parts = [per_file[file] for file in side]
        side_ids.append(
            None if any(part is None for part in parts) else set().union(*(p[1] for p in parts if p))
        )
    known = [ids for ids in side_ids if ids is not None]
    wanted = set.intersection(*known) if known else None
    cases = list(loaded.cases) if wanted is None else [case for case in loaded.cases if case.id in wanted]
    distinct = {part[0] for part in per_file.values() if part is not None}
    if not distinct:
        return cases, "every case", None
    if len(distinct) == 1 and all(part is not None for part in per_file.values()):
        return cases, f"the run's selection: {distinct.pop()}", None
    listed = "; ".join(
        f"{file.name}: {part[0] if part else 'every case'} ({len(part[1]) if part else len(loaded.cases)})"
        for file, part in sorted(per_file.items())
    )
    which = "every side" if len(sides) > 1 else "any of them"
    words = f"the {len(cases)} case(s) {which} selected"
    return cases, words, f"the runs selected different cases ({listed}): scored on {words}"
