"""One writer per run, and output locations that fail early and clearly.

- A second ``eval`` on a run that a live process is writing refuses at once with one
  line naming that process; a lock left by a dead process is taken over.
- An output directory that is a file or cannot be written, an unreadable dataset and
  an unwritable cache stop the command before the first LM call, with one line; a cache
  whose writes fail mid-run says so once and the run goes on.
- A write that fails mid-run (``ENOSPC``, injected at the store's write) stops the run
  at once with one line; what was written stays, the manifest says ``failed``, and
  ``--resume`` finishes the run without sending or recording anything twice.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sp_dspy import load_benchmark
from sp_dspy._errors import ConfigError, DataError, OutputError
from sp_dspy._runner._paths import RunLock, RunLockedError, RunPaths
from sp_dspy._runner._store import JsonlStore
from sp_dspy._user_dirs import ensure_writable_dir
from sp_dspy.cli import app
from tests._lm_fixtures import oracle_stub
from tests._results import iter_records
from tests._stub_server import StubServer

pytestmark = [pytest.mark.usefixtures("isolated_run"), pytest.mark.timeout(180)]

SAMPLE = load_benchmark().cases
CLI = [sys.executable, "-c", "from sp_dspy.cli import main; main()"]


def invoke(out: Path, *args: str, lm: str = "fake") -> Result:
    return CliRunner().invoke(app, ["eval", "--lm", lm, "--output-dir", str(out), "-q", *args])


def one_line(result: Result, kind: type[Exception]) -> str:
    assert isinstance(result.exception, kind), (result.output, result.exception)
    message = str(result.exception)
    assert "\n" not in message
    return message


# --- one writer per run -------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[StubServer]:
    with oracle_stub(latency_s=0.3) as stub:  # the first run lasts seconds: long enough to meet it
        yield stub


@pytest.mark.network
def test_a_second_writer_on_a_running_run_refuses_at_once_naming_the_process(
    server: StubServer, tmp_path: Path
) -> None:
    args = ["eval", "--lm", "openai/stub", "--api-base", server.url, "--output-dir", str(tmp_path)]
    args += ["--no-cache", "-q", "--run-id", "busy", "--limit", "24", "--concurrency", "2"]
    first = subprocess.Popen(
        [*CLI, *args], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    results = tmp_path / "results_busy_stub.jsonl"
    try:
        deadline = time.monotonic() + 60
        while not results.exists() or not results.read_bytes().count(b"\n"):
            assert first.poll() is None and time.monotonic() < deadline, "the first run did not start"
            time.sleep(0.02)
        started = time.monotonic()
        second = CliRunner().invoke(app, [*args, "--resume"])
        message = one_line(second, RunLockedError)
        assert time.monotonic() - started < 10  # refused at once, not after waiting for the first
        assert f"process {first.pid}" in message and "run busy" in message and "--resume" in message
        assert first.poll() is None, "the first writer must have been running all along"
    finally:
        _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    recorded = [r["id"] for r in iter_records(results)]
    assert sorted(recorded) == sorted(c.id for c in SAMPLE)  # every case once
    assert len(server.chat_requests) == len(SAMPLE)  # and sent once
    assert not (tmp_path / "run_busy.lock").exists()  # released when the run ended
    runs = json.loads((tmp_path / "manifest_busy.json").read_text(encoding="utf-8"))["runs"]
    assert runs["stub"]["totals"]["records"] == len(SAMPLE)


def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    holder = [sys.executable, "-c", "import sys, time; from pathlib import Path; "
              "from sp_dspy._runner._paths import RunLock, RunPaths; "
              "RunLock(RunPaths(Path(sys.argv[1]), 'gone', 'fake')).acquire(); print('held', flush=True); "
              "time.sleep(60)", str(tmp_path)]  # fmt: skip
    process = subprocess.Popen(
        holder, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    paths = RunPaths(tmp_path, "gone", "fake")
    with pytest.raises(RunLockedError, match=f"process {process.pid}"):
        RunLock(paths).acquire()
    process.send_signal(signal.SIGKILL)  # no clean-up: the lock file stays behind
    process.wait(timeout=10)
    assert json.loads(paths.lock.read_text(encoding="utf-8"))["pid"] == process.pid
    with RunLock(paths):
        assert json.loads(paths.lock.read_text(encoding="utf-8"))["pid"] == os.getpid()
        with pytest.raises(RunLockedError, match=f"process {os.getpid()}"):
            RunLock(paths).acquire()  # another writer in this process is refused too
    assert not paths.lock.exists()
    assert invoke(tmp_path, "--run-id", "gone", "--limit", "1").exit_code == 0


# --- output locations checked before the first LM call -------------------------------


def test_an_output_dir_that_is_a_file_is_refused_before_any_call(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("", encoding="utf-8")
    for out, why in (
        ("taken", "is a file, not a directory"),
        ("taken/sub", "so taken/sub cannot be created"),
    ):
        message = one_line(invoke(Path(out), "--limit", "1"), OutputError)
        assert message.startswith("--output-dir: taken") and why in message


def test_an_unwritable_output_dir_is_refused_before_any_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "readonly"
    out.mkdir()
    if os.geteuid() == 0:  # root writes through permission bits: deny the probe's file instead
        import sp_dspy._user_dirs as user_dirs

        real_mkstemp = user_dirs.tempfile.mkstemp

        def denied(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("dir") == out:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
            return real_mkstemp(*args, **kwargs)

        monkeypatch.setattr(user_dirs.tempfile, "mkstemp", denied)
    else:
        out.chmod(0o555)
    message = one_line(invoke(out, "--limit", "1"), OutputError)
    assert message == f"--output-dir: cannot write in {out}: Permission denied"
    assert list(out.iterdir()) == []


def test_an_unwritable_cache_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache-file"
    cache.write_text("", encoding="utf-8")
    monkeypatch.setenv("SP_DSPY_CACHE_DIR", str(cache))
    message = one_line(invoke(tmp_path / "out", "--limit", "1"), OutputError)
    assert str(cache) in message and "response cache" in message and "--no-cache" in message
    assert invoke(tmp_path / "out", "--limit", "1", "--no-cache").exit_code == 0  # the way around it


def test_a_cache_the_disk_has_no_room_to_open_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Room for the directory check, none for the cache's database: one line, not sqlite's traceback."""
    cache = tmp_path / "cache"
    shard = cache / "responses" / "000"
    shard.mkdir(parents=True)
    (shard / "cache.db").symlink_to("/dev/full")  # every write there fails with ENOSPC
    monkeypatch.setenv("SP_DSPY_CACHE_DIR", str(cache))
    message = one_line(invoke(tmp_path / "out", "--limit", "1"), OutputError)
    assert message == (
        f"response cache: cannot open the cache in {cache / 'responses'} (database or disk is full); "
        "set SP_DSPY_CACHE_DIR to a writable directory or pass --no-cache"
    )


@pytest.mark.network
def test_a_cache_write_failing_mid_run_is_said_once_and_the_run_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import diskcache

    real_store = diskcache.Disk.store
    stores = Counter[str]()

    def disk_fills_after_two(self: Any, *args: Any, **kwargs: Any) -> Any:
        stores["n"] += 1
        if stores["n"] > 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_store(self, *args, **kwargs)

    monkeypatch.setattr(diskcache.Disk, "store", disk_fills_after_two)
    with oracle_stub() as stub:
        args = ["eval", "--lm", "openai/stub", "--api-base", stub.url, "--output-dir", str(tmp_path), "-q"]
        result = CliRunner().invoke(app, [*args, "--run-id", "c", "--limit", "6", "--concurrency", "1"])
    assert result.exit_code == 0, (result.output, result.exception)
    said = " ".join(result.output.split())
    assert said.count("warning: response cache: cannot write in") == 1, result.output
    assert "(No space left on device); the answers from here on are not cached" in said
    assert len(list(iter_records(tmp_path / "results_c_stub.jsonl"))) == 6
    assert stores["n"] == 3  # no write tried after the first that failed


def test_an_unreadable_dataset_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = tmp_path / "data.json"
    dataset.write_text(json.dumps({"data": []}), encoding="utf-8")
    if os.geteuid() == 0:  # root reads through permission bits: deny the open itself
        real_open = os.open

        def guarded(path: Any, *args: Any, **kwargs: Any) -> Any:
            if Path(path) == dataset:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(os, "open", guarded)
    else:
        dataset.chmod(0)
    message = one_line(invoke(tmp_path / "out", "--dataset", str(dataset)), DataError)
    assert message == f"{dataset}: cannot read dataset (Permission denied)"


def test_ensure_writable_dir_creates_missing_parents(tmp_path: Path) -> None:
    made = ensure_writable_dir(tmp_path / "a" / "b", what="--out")
    assert made.is_dir() and list(made.iterdir()) == []  # the probe leaves nothing behind


# --- a write failing mid-run ----------------------------------------------------------


def test_a_full_disk_stops_the_run_keeps_what_was_written_and_resume_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = JsonlStore._write
    writes = Counter[str]()

    def disk_fills_after_three(self: JsonlStore, data: bytes) -> None:
        writes["n"] += 1
        if writes["n"] > 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write(self, data)

    monkeypatch.setattr(JsonlStore, "_write", disk_fills_after_three)
    results = tmp_path / "results_full_fake.jsonl"
    full = invoke(tmp_path, "--run-id", "full", "--limit", "8", "--concurrency", "1")
    assert full.exit_code != 0
    message = one_line(full, OutputError)
    assert message.startswith(f"cannot write {results}: No space left on device")
    assert "everything written is kept" in message and "--resume --run-id full" in message
    assert [r["id"] for r in iter_records(results)] == [c.id for c in SAMPLE[:3]]
    assert writes["n"] == 4  # stopped at the failing write: no further case was run
    manifest = json.loads((tmp_path / "manifest_full.json").read_text(encoding="utf-8"))
    assert manifest["runs"]["fake"]["status"] == "failed"
    assert manifest["runs"]["fake"]["totals"]["records"] == 3
    assert not (tmp_path / "run_full.lock").exists()

    monkeypatch.setattr(JsonlStore, "_write", real_write)  # space freed
    resumed = invoke(tmp_path, "--run-id", "full", "--limit", "8", "--resume")
    assert resumed.exit_code == 0, (resumed.output, resumed.exception)
    assert [r["id"] for r in iter_records(results)] == [c.id for c in SAMPLE[:8]]
    manifest = json.loads((tmp_path / "manifest_full.json").read_text(encoding="utf-8"))
    assert manifest["runs"]["fake"]["status"] == "complete"


def test_a_failing_manifest_write_is_one_line_and_keeps_the_old_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert invoke(tmp_path, "--run-id", "m", "--limit", "1").exit_code == 0
    before = (tmp_path / "manifest_m.json").read_text(encoding="utf-8")
    real_write_text = Path.write_text

    def full(self: Path, *args: Any, **kwargs: Any) -> int:
        if self.name.endswith(".json.tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    message = one_line(invoke(tmp_path, "--run-id", "m", "--limit", "2", "--resume"), OutputError)
    assert message == f"cannot write the manifest {tmp_path / 'manifest_m.json'}: No space left on device"
    assert (tmp_path / "manifest_m.json").read_text(encoding="utf-8") == before
    # The manifest is written as the run starts: a failed write stops it before any call.
    assert len(list(iter_records(tmp_path / "results_m_fake.jsonl"))) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest_m.json", "results_m_fake.jsonl"]


def test_console_script_reports_a_busy_run_in_one_line_with_exit_2(tmp_path: Path) -> None:
    with RunLock(RunPaths(tmp_path, "held", "fake")):
        command = [*CLI, "eval", "--lm", "fake", "-q", "--output-dir", str(tmp_path), "--run-id", "held"]
        failed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert failed.returncode == 2, failed.stderr
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: run held in ") and str(os.getpid()) in lines[0]
    assert issubclass(RunLockedError, ConfigError)  # a usage error like any other (exit 2)


def test_ablate_checks_its_out_dir_before_any_call(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("", encoding="utf-8")
    result = CliRunner().invoke(app, ["ablate", "--lm", "fake", "--limit", "1", "--out", "taken", "-q"])
    assert one_line(result, OutputError) == "--out: taken is a file, not a directory"


def test_without_flock_the_holder_note_decides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl
    import socket

    def no_flock(*_: Any) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_flock)
    paths = RunPaths(tmp_path, "nfs", "fake")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        note = {"pid": sleeper.pid, "host": socket.gethostname(), "command": "sp-dspy eval"}
        paths.lock.write_text(json.dumps(note), encoding="utf-8")
        with pytest.raises(RunLockedError, match=f"process {sleeper.pid} \\(sp-dspy eval\\)"):
            RunLock(paths).acquire()
    finally:
        sleeper.kill()
        sleeper.wait(timeout=10)
    with RunLock(paths):  # its holder is gone: taken over
        assert json.loads(paths.lock.read_text(encoding="utf-8"))["pid"] == os.getpid()
    assert not paths.lock.exists()
