"""Library log lines are redacted like everything else sp-dspy writes.

``install_log_redaction`` (the CLI calls it at start-up) puts one ``logging.Filter`` in
front of every handler, the ones created later included; end to end, a compile
against a server that echoes the key in its errors prints DSPy's parallelizer error
lines with the key masked.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pydantic
import pytest

from sp_dspy._redact import (
    MASK,
    MIN_FRAGMENT_LENGTH,
    RedactingFilter,
    install_log_redaction,
    redact,
    register_secret,
)

SECRET = "sk-echoed-0123456789"


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("SP_TEST_API_KEY", SECRET)
    return SECRET


def capture(name: str) -> tuple[logging.Logger, io.StringIO, logging.Handler]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    logger.propagate = False
    return logger, stream, handler


def test_a_handler_that_exists_at_install_masks_message_args_and_traceback(secret_env: str) -> None:
    logger, stream, handler = capture("sp_test.before")
    try:
        install_log_redaction()
        assert any(isinstance(f, RedactingFilter) for f in handler.filters)
        try:
            raise RuntimeError(f"server said: Bearer {secret_env}")
        except RuntimeError:
            logger.exception("call failed for key %s", secret_env)
        written = stream.getvalue()
        assert secret_env not in written
        assert (
            f"call failed for key {MASK}" in written
            and f"RuntimeError: server said: Bearer {MASK}" in written
        )
    finally:
        logger.removeHandler(handler)


def test_loggers_and_handlers_created_after_install_are_covered(secret_env: str) -> None:
    install_log_redaction()
    logger, stream, handler = capture("sp_test.after")  # as LiteLLM's, made on its first import
    try:
        logger.error("Error for %s: %s", {"id": "c1"}, f"invalid api key Bearer {secret_env}")
        logger.warning("nothing secret here: %d calls", 3)
        assert stream.getvalue() == (
            f"ERROR sp_test.after: Error for {{'id': 'c1'}}: invalid api key Bearer {MASK}\n"
            "WARNING sp_test.after: nothing secret here: 3 calls\n"
        )
    finally:
        logger.removeHandler(handler)


def test_a_bad_format_string_is_left_to_logging_not_raised_at_the_call(secret_env: str) -> None:
    install_log_redaction()
    record = logging.getLogRecordFactory()("x", logging.ERROR, __file__, 1, "%d items", ("many",), None)
    assert record.msg == "%d items" and record.args == (
        "many",
    )  # logging reports it when a handler formats it


def test_a_key_sent_is_masked_where_a_message_cut_it_short() -> None:
    """pydantic cuts a long input in its messages: the key's head stays, its tail is gone, and
    exact matching would miss it. Ordinary words and short parts of the key are left alone."""
    key = "sk-registered-9d2f61c0b7a8e4c3b2a1f0e9d8"
    register_secret(key)
    try:
        pydantic.TypeAdapter(list[int]).validate_python(f"Bearer {key} and that is all it said today")
    except pydantic.ValidationError as exc:
        message = str(exc)
    assert "input_value='Bearer sk-registered-9d2...at is all" in message  # cut: no whole key left
    install_log_redaction()
    logger, stream, handler = capture("sp_test.cut")
    try:
        logger.error("parse failed: %s", message)
    finally:
        logger.removeHandler(handler)
    assert f"input_value='Bearer {MASK}...at is all" in stream.getvalue()
    assert redact(f"tail ...{key[-MIN_FRAGMENT_LENGTH:]}; short {key[:11]}; a conversation") == (
        f"tail ...{MASK}; short {key[:11]}; a conversation"
    )


class EchoKeyHandler(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that rejects every call and echoes the Authorization header."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _reply(self, status: int, payload: object) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._reply(200, {"data": [{"id": "echo"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        message = f"invalid api key {self.headers.get('Authorization')}"
        # A 500, not a 400: three rejected requests in a row would stop the compile (eval's rule)
        # before DSPy's optimizer ran and logged the failed examples this test reads.
        self._reply(500, {"error": {"message": message, "type": "server_error"}})


@pytest.fixture
def echo_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoKeyHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.network
@pytest.mark.timeout(180)
def test_compile_against_a_server_echoing_the_key_never_prints_it(echo_server: str, tmp_path: Path) -> None:
    command = [sys.executable, "-c", "from sp_dspy.cli import main; main()", "compile"]
    command += ["--lm", "openai/echo", "--api-base", echo_server, "--api-key-env", "SP_TEST_API_KEY"]
    command += ["--num-retries", "0", "--optimizer", "bootstrap", "--set", "max_labeled_demos=1"]
    command += ["--set", "num_candidate_programs=1", "--out", str(tmp_path / "art"), "--no-cache"]
    env = {**os.environ, "SP_TEST_API_KEY": SECRET, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=170)
    log_file = tmp_path / "art" / "compile.log"  # where compile sends the optimizers' logs
    written = done.stdout + done.stderr + (log_file.read_text(encoding="utf-8") if log_file.exists() else "")
    assert "dspy.utils.parallelizer" in written, written[-2000:]  # DSPy logged the failed examples
    assert f"invalid api key Bearer {MASK}" in written
    assert SECRET not in written


def test_the_cli_error_line_is_redacted_too(tmp_path: Path) -> None:
    code = (
        "import os; from sp_dspy.cli import app, main\n"
        "from sp_dspy._errors import ConfigError\n"
        "@app.command('boom')\n"
        "def boom() -> None:\n"
        "    raise ConfigError('server said: bad key ' + os.environ['SP_TEST_API_KEY'])\n"
        "main()\n"
    )
    env = {**os.environ, "SP_TEST_API_KEY": SECRET, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code, "boom"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stderr.strip() == f"error: server said: bad key {MASK}"


def test_compile_log_masks_printed_text_log_lines_and_the_stopping_traceback(tmp_path: Path) -> None:
    """``compile.log`` takes the optimizers' prints and progress bars past any log filter, and
    library log lines also where the command line did not install redaction."""
    from sp_dspy._compile._log import library_log

    key = "sk-compile-log-3e8b0f6a1c9d2e7b"
    register_secret(key)
    path = tmp_path / "compile.log"
    with pytest.raises(RuntimeError), library_log(path):
        print(f"proposed instruction: use Bearer {key}")
        sys.stderr.write(f"progress {key[:20]}...\n")
        logging.getLogger("dspy").warning("cut: %s...", key[:14])
        raise RuntimeError(f"server said {key}")
    written = path.read_text(encoding="utf-8")
    assert f"proposed instruction: use Bearer {MASK}" in written and f"server said {MASK}" in written
    assert f"progress {MASK}..." in written and f"cut: {MASK}..." in written
    assert key[:MIN_FRAGMENT_LENGTH] not in written
