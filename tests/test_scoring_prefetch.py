"""``prefetch_scoring_cases``: the forked worker gives exactly what ``load_scoring_cases`` gives.

A worker is forked only by a single-threaded process, which pytest's is not always;
so the fork path is exercised in a fresh interpreter (``_in_fresh_process``), and
in-process tests cover the paths without a worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sp_dspy._data import _scoring_prefetch, load_scoring_cases, prefetch_scoring_cases, sample_path
from sp_dspy._data._scoring import ScoringCase
from sp_dspy._data._scoring_cache import entry_body
from sp_dspy._data._scoring_load import load_views
from sp_dspy._data._scoring_store import CacheKey, scoring_cache_dir
from sp_dspy._data._scoring_worker import ViewsWorker
from sp_dspy._errors import DataError
from tests._factories import raw_case, write_dataset

CAN_FORK = sys.platform.startswith("linux") and len(os.sched_getaffinity(0)) > 1
needs_fork = pytest.mark.skipif(not CAN_FORK, reason="a worker is forked on Linux with two CPUs or more")

# Loads a dataset with prefetch_scoring_cases in a fresh process and prints what it
# got. argv: dataset, lenient flag, cache flag, and "crash" to make the worker fail.
_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import msgspec
    from sp_dspy._data import _scoring_prefetch, _scoring_slim
    from sp_dspy._errors import DataError

    dataset, lenient, cache, mode = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1", sys.argv[4]
    parent, parent_slim_reads, real = os.getpid(), [], _scoring_slim.slim_views_of

    def slim_views_of(path):
        if os.getpid() == parent:
            parent_slim_reads.append(path)
        elif mode == "crash":
            raise MemoryError("worker out of memory")
        return real(path)

    _scoring_slim.slim_views_of = slim_views_of
    pending = _scoring_prefetch.prefetch_scoring_cases(dataset, lenient=lenient, cache=cache)
    out = {"forked": pending.forked}
    with pending:
        if mode == "abandon":
            pid = pending._worker._pid
        else:
            try:
                loaded = pending.result()
                out["load"] = msgspec.to_builtins(loaded)
                out["from_cache"] = out["load"].pop("from_cache")
            except DataError as error:
                out["error"] = str(error)
            out["parent_slim_reads"] = len(parent_slim_reads)
    if mode == "abandon":
        try:
            os.waitpid(pid, os.WNOHANG)
            out["reaped"] = False
        except ChildProcessError:
            out["reaped"] = True
    print(json.dumps(out))
    """
)


def _in_fresh_process(dataset: Path, *, lenient: bool = False, cache: bool = False, mode: str = "") -> Any:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(dataset), str(int(lenient)), str(int(cache)), mode or "-"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _in_process(dataset: Path, *, lenient: bool = False) -> Any:
    try:
        loaded = load_scoring_cases(dataset, lenient=lenient, cache=False)
    except DataError as error:
        return {"error": str(error)}
    load = msgspec.to_builtins(loaded)
    load.pop("from_cache")
    return json.loads(json.dumps({"load": load}))  # as the fresh process prints it


@needs_fork
def test_the_worker_gives_the_views_load_scoring_cases_gives() -> None:
    got = _in_fresh_process(sample_path())
    assert got.pop("forked") is True
    assert got.pop("from_cache") is False
    assert got.pop("parent_slim_reads") == 0  # the worker read the file
    assert got == _in_process(sample_path())
    assert len(got["load"]["cases"]) > 10


@needs_fork
@pytest.mark.parametrize("lenient", [False, True])
def test_a_file_the_slim_path_declines_is_loaded_by_the_full_loader(tmp_path: Path, lenient: bool) -> None:
    # A legacy spelling (normalised) and a bad case (skipped with --lenient, else an error).
    legacy = raw_case("legacy-1-l0")
    legacy["failure_mode_metadata"]["conditional_violations"] = legacy["failure_mode_metadata"].pop(
        "contradicted_rules"
    )
    bad = raw_case("bad-1-l0", gt=[9])
    path = write_dataset(tmp_path / "d.json", [raw_case("good-1-l0"), legacy, bad])
    got = _in_fresh_process(path, lenient=lenient)
    assert got.pop("forked") is True
    got.pop("from_cache", None)
    assert got.pop("parent_slim_reads") == 0  # straight to the full loader, no second slim read
    assert got == _in_process(path, lenient=lenient)
    assert ("error" in got) is not lenient


@needs_fork
@pytest.mark.parametrize("last_case_bad", [False, True])
def test_a_late_bad_case_sends_the_whole_file_to_the_full_loader(tmp_path: Path, last_case_bad: bool) -> None:
    # 1,050 cases: a bad last case is found after 1,049 good ones.
    cases = [raw_case(f"k-{i}-l{i % 3}", level=f"L{i % 3}", gt=[1 + i % 3]) for i in range(1050)]
    if last_case_bad:
        cases[-1]["ground_truth_violations"] = [9]
    path = write_dataset(tmp_path / "d.json", cases)
    got = _in_fresh_process(path)
    assert got.pop("forked") is True
    got.pop("from_cache", None)
    assert got.pop("parent_slim_reads") == 0
    assert got == _in_process(path)
    assert ("error" in got) is last_case_bad


@needs_fork
def test_a_failing_worker_leaves_the_load_to_the_parent() -> None:
    got = _in_fresh_process(sample_path(), mode="crash")
    assert got.pop("forked") is True
    got.pop("from_cache")
    assert got.pop("parent_slim_reads") == 1  # the worker failed; the parent read the file
    assert got == _in_process(sample_path())


@needs_fork
def test_an_abandoned_load_stops_and_reaps_its_worker() -> None:
    got = _in_fresh_process(sample_path(), mode="abandon")
    assert got == {"forked": True, "reaped": True}


@needs_fork
def test_the_worker_fills_the_cache_and_a_hit_needs_no_worker(tmp_path: Path) -> None:
    odd = raw_case('c-"é"\\-1-l0', domain="domaine\u2028à\x01")  # escapes JSON writers may differ on
    path = write_dataset(tmp_path / "d.json", [odd, raw_case("c-2-l1", level="L1")])
    first = _in_fresh_process(path, cache=True)
    assert (first["forked"], first["from_cache"]) == (True, False)
    (entry,) = scoring_cache_dir().iterdir()
    # The worker wrote the very bytes the parent would have written.
    key = CacheKey.of(path, lenient=False)
    assert entry.read_bytes() == key.line() + entry_body(load_views(path, lenient=False))
    second = _in_fresh_process(path, cache=True)
    assert (second["forked"], second["from_cache"], second["parent_slim_reads"]) == (False, True, 0)
    assert second["load"] == first["load"]


def test_without_a_worker_the_load_happens_at_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_scoring_prefetch, "worker_allowed", lambda: False)
    path = write_dataset(tmp_path / "d.json", [raw_case("a-1-l0"), raw_case("a-2-l0", gt=[7])])
    with prefetch_scoring_cases(path, cache=False) as pending:  # bad data: no error yet
        assert not pending.forked
        with pytest.raises(DataError, match="a-2-l0"):
            pending.result()
    with prefetch_scoring_cases(path, lenient=True, cache=False) as pending:
        loaded = pending.result()
    assert [case.id for case in loaded.cases] == ["a-1-l0"] and loaded.skipped == 1


def _received(message: bytes) -> Any:
    """What ``ViewsWorker.receive`` makes of ``message`` written whole to its pipe, then closed."""
    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "wb") as pipe:  # small enough for the pipe's buffer
        pipe.write(message)
    child = subprocess.Popen(["true"])  # a real child for the reaper to collect
    got = ViewsWorker(sample_path(), child.pid, read_end, key=None).receive()
    child.wait(timeout=30)
    return got


def test_receive_takes_only_a_whole_well_formed_message() -> None:
    views = [
        ScoringCase(
            id="a-1-l0", domain="d", level="L0", ground_truth_violations=[1], rule_types={1: "decisive"}
        )
    ]
    body = msgspec.msgpack.encode(views)
    whole = b"v" + len(body).to_bytes(8, "little") + body
    assert _received(whole) == views
    assert _received(b"x" + bytes(8)) == "declined"
    assert _received(whole[:-1]) is None  # the worker died while writing
    assert _received(whole[:5]) is None  # ... while writing the header
    assert _received(b"") is None  # ... before writing anything
    assert _received(b"?" + whole[1:]) is None  # an unknown kind
    bad = msgspec.msgpack.encode([{"id": 1}])  # decodes, but not into views
    assert _received(b"v" + len(bad).to_bytes(8, "little") + bad) is None


def test_a_missing_dataset_is_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"nowhere\.json"):
        prefetch_scoring_cases(tmp_path / "nowhere.json")


@needs_fork
def test_sp_dspy_score_with_a_worker_reports_what_it_reports_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from sp_dspy.cli import app

    cases = [raw_case(f"e-{i}-l{i % 3}", level=f"L{i % 3}", gt=[1 + i % 3]) for i in range(9)]
    dataset = write_dataset(tmp_path / "d.json", cases)
    results = tmp_path / "r.jsonl"
    results.write_text(
        "".join(
            json.dumps({"id": c["id"], "violated_rules": [1 + i % 2]}) + "\n" for i, c in enumerate(cases)
        ),
        encoding="utf-8",
    )
    arguments = ["score", str(results), "--dataset", str(dataset), "--no-data-cache", "--n-boot", "200"]
    # The console entry point in a fresh (single-threaded) process: the worker path.
    main = "import sys; from sp_dspy.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", main, *arguments, "--json", str(tmp_path / "forked.json")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    )
    assert done.returncode == 0, done.stderr
    monkeypatch.setattr(_scoring_prefetch, "worker_allowed", lambda: False)
    in_process = CliRunner().invoke(app, [*arguments, "--json", str(tmp_path / "alone.json")])
    assert in_process.exit_code == 0, in_process.output
    forked = json.loads((tmp_path / "forked.json").read_text(encoding="utf-8"))
    assert forked == json.loads((tmp_path / "alone.json").read_text(encoding="utf-8"))
    assert forked["ALL"]["total"] == 9 and forked["ci"]


# Runs the real command line in a fresh process and reports the workers it forked:
# whether pydantic was imported yet at each fork, and whether each ended (views
# received, or stopped) by the time the command returned.
_CLI_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from sp_dspy._data import _scoring_worker

    workers, forks, start = [], [], _scoring_worker.ViewsWorker.start.__func__

    def recording_start(cls, path, **options):
        forks.append("pydantic" in sys.modules)
        worker = start(cls, path, **options)
        workers.append(worker)
        return worker

    _scoring_worker.ViewsWorker.start = classmethod(recording_start)
    from sp_dspy.cli import app
    from sp_dspy._errors import SpDspyError

    if sys.argv[1] == "--interrupt-while-parsing":  # Ctrl-C while typer converts arguments
        import typer.core

        def interrupted(self, ctx, args):
            raise KeyboardInterrupt

        typer.core.TyperGroup.parse_args = interrupted
        del sys.argv[1]
    try:
        code = app(sys.argv[1:], standalone_mode=False)  # typer returns 130 on Ctrl-C
        outcome = f"exit {code}" if isinstance(code, int) and code else "ok"
    except SpDspyError as error:
        outcome = "error: " + str(error)
    except Exception as error:
        outcome = type(error).__name__
    print(json.dumps({"forks": forks, "running": [w.running for w in workers], "outcome": outcome}))
    """
)


def _cli_in_fresh_process(*arguments: str | Path) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", _CLI_SCRIPT, *map(str, arguments)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@needs_fork
def test_score_starts_its_worker_before_pydantic_is_imported(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.json", [raw_case("w-1-l0"), raw_case("w-2-l1", level="L1")])
    results = tmp_path / "r.jsonl"
    results.write_text('{"id": "w-1-l0", "violated_rules": [1]}\n', encoding="utf-8")
    common = ["score", results, "--dataset", dataset, "--json", tmp_path / "out.json"]
    first = _cli_in_fresh_process(*common)
    assert first == {"forks": [False], "running": [False], "outcome": "ok"}
    assert json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))["ALL"]["total"] == 2
    # The views are in the parse cache now: nothing to decode, no worker.
    assert _cli_in_fresh_process(*common) == {"forks": [], "running": [], "outcome": "ok"}


@needs_fork
def test_a_worker_started_before_an_interrupted_parse_is_stopped(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.json", [raw_case("i-1-l0")])
    results = tmp_path / "r.jsonl"
    results.write_text('{"id": "i-1-l0", "violated_rules": [1]}\n', encoding="utf-8")
    got = _cli_in_fresh_process("--interrupt-while-parsing", "score", results, "--dataset", dataset)
    assert got == {"forks": [False], "running": [False], "outcome": "exit 130"}


@needs_fork
@pytest.mark.parametrize(
    ("extra", "outcome"),
    [
        (["--n-boot", "-1"], "error: --n-boot: must be >= 0, got -1"),  # fails after the worker started
        (["--no-such-option"], "NoSuchOption"),  # the raw split fails: no worker
        (["--help"], "ok"),
        (["--benchmark", "pku-saferlhf"], "error"),  # not a SafePyramid file: no worker
    ],
)
def test_a_worker_nobody_adopts_is_stopped_or_never_started(
    tmp_path: Path, extra: list[str], outcome: str
) -> None:
    dataset = write_dataset(tmp_path / "d.json", [raw_case("s-1-l0")])
    results = tmp_path / "r.jsonl"
    results.write_text('{"id": "s-1-l0", "violated_rules": [1]}\n', encoding="utf-8")
    got = _cli_in_fresh_process("score", results, "--dataset", dataset, "--no-data-cache", *extra)
    assert got["outcome"].startswith(outcome)
    assert got["forks"] == ([False] if extra[0] == "--n-boot" else [])
    assert got["running"] == [False] * len(got["forks"])
