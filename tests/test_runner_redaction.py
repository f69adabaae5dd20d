"""An API key used by ``sp-dspy eval`` never appears in anything it writes or prints.

The server below rejects the first request with a 401 whose message echoes the key,
as some providers and gateways do, so the key reaches an exception message; it must
still not reach the results, the manifest, the error record or the terminal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests._stub_server import chat_completion

pytestmark = [pytest.mark.network, pytest.mark.timeout(120)]

SECRET = "sk-secret-123-do-not-print"
ANSWER = json.dumps({"analysis": "checked", "violated_rules": [{"rule": 1}]})


class EchoingAuthServer(ThreadingHTTPServer):
    daemon_threads = True
    authorizations: list[str]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: EchoingAuthServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silent."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        authorization = self.headers.get("Authorization", "")
        first = not self.server.authorizations
        self.server.authorizations.append(authorization)
        if first:
            status = 401
            payload: dict[str, Any] = {
                "error": {
                    "message": f"Incorrect API key provided: {authorization.removeprefix('Bearer ')}.",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            }
        else:
            status = 200
            payload = chat_completion(ANSWER, completion_id="ok", prompt_tokens=10, completion_tokens=5)
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server() -> Iterator[EchoingAuthServer]:
    httpd = EchoingAuthServer(("127.0.0.1", 0), Handler)
    httpd.authorizations = []
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_the_key_reaches_the_server_but_nothing_sp_dspy_writes_or_prints(
    server: EchoingAuthServer, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    env = {**os.environ, "MY_TEST_KEY": SECRET}
    result = subprocess.run(
        [
            sys.executable, "-c", "from sp_dspy.cli import main; main()", "eval", "--lm", "openai/stub",
            "--api-base", url, "--api-key-env", "MY_TEST_KEY", "--limit", "3", "--concurrency", "1",
            "--no-cache", "--run-id", "keys", "--output-dir", str(tmp_path), "-v",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    # A refused key stops the run at once (loud failure); its one-line error quotes the
    # provider's message, so it must be redacted too.
    assert result.returncode == 2, result.stderr[-2000:]
    assert "error: run stopped early: 1 unit(s) failed with auth" in result.stderr
    assert server.authorizations == [f"Bearer {SECRET}"]
    records = [json.loads(line) for line in (tmp_path / "results_keys_stub.jsonl").read_text().splitlines()]
    failed = [r for r in records if r.get("error_class")]
    assert len(records) == 1 and len(failed) == 1
    # The provider's message is kept (it says what went wrong), the key inside it is not.
    assert failed[0]["error_class"] == "auth" and "Incorrect API key provided: ***" in failed[0]["error"]
    manifest = (tmp_path / "manifest_keys.json").read_text(encoding="utf-8")
    assert json.loads(manifest)["runs"]["stub"]["lm"]["api_key_env"] == "MY_TEST_KEY"
    written = "".join(path.read_text(encoding="utf-8") for path in tmp_path.iterdir() if path.is_file())
    for where, text in {"files": written, "stdout": result.stdout, "stderr": result.stderr}.items():
        assert SECRET not in text, where
        assert "secret-123" not in text, where
