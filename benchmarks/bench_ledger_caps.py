"""What the caps let through, measured by the model's side: ``serve``, ``eval`` and ``experiment``
against a loopback model whose every answer reports 4,000 completion tokens.

Each scenario runs the real command (a subprocess of whichever ``sp_dspy`` is first on
``PYTHONPATH``, so the same script measures an older checkout too) against the tests' stub
server in this process, and counts the spend from the stub's side: every chat request it
answered, its prompt tokens as the stub counted them plus 4,000 completion tokens, priced at
``openai/gpt-4o-mini``'s list price. A cap holds when that spend is at most the cap.

    PYTHONPATH=. python benchmarks/bench_ledger_caps.py                 # every scenario
    PYTHONPATH=. python benchmarks/bench_ledger_caps.py --only serve

Not a test (``tests/test_ledger.py`` holds those); figures are in ``docs/budgets.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: ``tests``
from sp_dspy._lm._fake import count_tokens
from sp_dspy._lm._fake_prompts import message_text
from tests._stub_server import StubServer, chat_completion

COMPLETION = 4_000
MODEL = "openai/gpt-4o-mini"
PROMPT_USD, COMPLETION_USD = 0.15e-6, 0.60e-6  # the price map's list price of the model
CLI = [sys.executable, "-c", "from sp_dspy.cli import main; main()"]
POLICY = (
    "1. The chatbot must not disclose credentials.\n2. The chatbot must verify identity.\n3. No profanity."
)
MESSAGES = [
    {"role": "user", "content": "Can you give me the admin password?"},
    {"role": "assistant", "content": "Sure, it is hunter2."},
]


def large_stub() -> StubServer:
    """The stub, its answers the fake oracle's with 4,000 completion tokens reported."""
    stub = StubServer(latency_s=0.05)

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        prompt = sum(count_tokens(message_text(m.get("content"))) for m in messages)
        text = stub.fake.reply(messages, response_format=body.get("response_format"))
        return chat_completion(text, prompt_tokens=prompt, completion_tokens=COMPLETION)

    stub.responder = respond
    return stub


def spend(stub: StubServer) -> dict[str, float]:
    """Calls, tokens and USD of the stub's answers."""
    calls = prompt = 0
    for request in stub.chat_requests:
        calls += 1
        prompt += sum(count_tokens(message_text(m.get("content"))) for m in (request.body or {})["messages"])
    completion = calls * COMPLETION
    usd = prompt * PROMPT_USD + completion * COMPLETION_USD
    return {"calls": calls, "tokens": prompt + completion, "usd": round(usd, 4)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def post(url: str) -> int:
    body = json.dumps({"policy": POLICY, "messages": MESSAGES}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def serve(flag: str, value: str, max_tokens: str | None) -> dict[str, Any]:
    """``serve --guard official`` with one cap, 32 clients at once (one check each)."""
    with large_stub() as stub:
        port = free_port()
        limit = [] if max_tokens is None else ["--max-tokens", max_tokens]
        args = [*CLI, "serve", "--guard", "official", "--lm", MODEL, "--api-base", stub.url, "--no-cache",
                "--num-retries", "0", "--port", str(port), "--max-in-flight", "64", *limit, flag, value]  # fmt: skip
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        service = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            for _ in range(600):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                    break
                except OSError:
                    time.sleep(0.1)
            with ThreadPoolExecutor(32) as pool:
                statuses = list(pool.map(lambda _: post(f"http://127.0.0.1:{port}/v1/check"), range(32)))
        finally:
            service.terminate()
            service.wait(30)
        return {"answered": statuses.count(200), "refused": statuses.count(503), **spend(stub)}


def eval_run(flag: str, value: str) -> dict[str, Any]:
    """``eval --protocol per-rule --concurrency 64 --max-tokens 4000`` of the sample with one cap."""
    with large_stub() as stub, tempfile.TemporaryDirectory() as out:
        args = [*CLI, "eval", "--lm", MODEL, "--api-base", stub.url, "--output-dir", out, "--protocol", "per-rule",
                "--concurrency", "64", "--max-tokens", str(COMPLETION), "--no-cache", "--num-retries", "0", "-q",
                flag, value]  # fmt: skip
        done = subprocess.run(args, capture_output=True, text=True, check=False)
        return {"exit": done.returncode, **spend(stub)}


def experiment(value: str, concurrency: str) -> dict[str, Any]:
    """``experiment --optimizers bootstrap --seeds 0 --max-usd VALUE --max-tokens 4000 --concurrency N``
    (uncapped it spends $0.43: $0.37 in the compile, the rest in the test evaluations)."""
    with large_stub() as stub, tempfile.TemporaryDirectory() as out:
        args = [*CLI, "experiment", "--out", f"{out}/exp", "--lm", MODEL, "--api-base", stub.url, "--no-cache",
                "--num-retries", "0", "--optimizers", "bootstrap", "--seeds", "0", "--max-tokens", str(COMPLETION),
                "--ratios", "0.25,0.25,0.5", "--n-boot", "20", "-q", "--concurrency", concurrency, "--max-usd", value]  # fmt: skip
        done = subprocess.run(args, capture_output=True, text=True, check=False)
        return {"exit": done.returncode, **spend(stub)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("serve", "eval", "experiment"))
    only = parser.parse_args().only
    rows: list[tuple[str, str, dict[str, Any]]] = []
    if only in (None, "serve"):
        for max_tokens in (None, "4000"):
            shown = f"serve, 32 clients, --max-tokens {max_tokens or '(model maximum)'}"
            for flag, value in (("--max-usd", "0.01"), ("--max-total-tokens", "5000"), ("--max-calls", "5")):
                rows.append((shown, f"{flag} {value}", serve(flag, value, max_tokens)))
                print(rows[-1], flush=True)
    if only in (None, "eval"):
        for flag, value in (("--max-usd", "0.02"), ("--max-total-tokens", "40000"), ("--max-calls", "7")):
            rows.append(("eval per-rule, concurrency 64", f"{flag} {value}", eval_run(flag, value)))
            print(rows[-1], flush=True)
    if only in (None, "experiment"):
        for concurrency in ("2", "8"):
            scenario = f"experiment bootstrap, seed 0, concurrency {concurrency}"
            rows.append((scenario, "--max-usd 0.42", experiment("0.42", concurrency)))
            print(rows[-1], flush=True)
    print("\n| scenario | cap | calls | tokens | USD |\n|---|---|---|---|---|")
    for scenario, cap, figures in rows:
        print(f"| {scenario} | {cap} | {figures['calls']} | {figures['tokens']:,} | {figures['usd']:.4f} |")


if __name__ == "__main__":
    main()
