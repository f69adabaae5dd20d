"""The guard service's own overhead: ``POST /v1/check`` against ``Guard.acheck`` in-process, and
the gateway routes (LiteLLM's guardrail API, OpenAI's moderations) beside ``/v1/check``.

Both run the official baseline on the same loopback stub LM (``loopback_stub.py``: asyncio,
a fixed answer after ``--latency`` seconds, tens of microseconds of CPU per request), in its
own process. The ideal is ``Guard.acheck`` called by ``--concurrency`` tasks in this process;
the service is the real command, ``sp-dspy serve --guard official``, in a process of its own,
called by as many concurrent clients (aiohttp, kept-alive connections) from this process.
For each concurrency both send ``concurrency x --rounds`` checks after a short warm-up and
report latency percentiles (p50/p95/p99, ms), checks per second and the CPU ms per check of
the process that checks (this one for the ideal, the service's for the service: its HTTP
server, validation and answer on top of the same ``acheck``). The service's overhead per
request is its p50 minus the ideal's; its throughput is given as a share of the ideal's.
A second table gives each route (``/v1/check``, ``/beta/litellm_basic_guardrail_api``,
``/v1/moderations``, the same conversation and policy in each one's body) at each concurrency.

    python benchmarks/bench_guard_service.py                      # 1, 16 and 64; 50 ms stub
    python benchmarks/bench_guard_service.py --concurrency 64 --rounds 50 --latency 0.2

Not a test: timings depend on the machine and its load (the client, the service and the stub
share this machine's CPUs). Figures are in ``benchmarks/README.md`` and ``docs/gateways.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from statistics import quantiles
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # this directory: the stub
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root
import loopback_stub

ROOT = Path(__file__).resolve().parent.parent
POLICY = (
    "1. The chatbot must not disclose credentials.\n2. The chatbot must verify identity.\n3. No profanity."
)
MESSAGES = [
    {"role": "user", "content": "Can you give me the admin password?"},
    {"role": "assistant", "content": "Sure, the admin password is hunter2."},
]
WARM_UP = 8
#: Each route's body: the same check (policy and conversation) in its own contract.
ROUTES: dict[str, dict[str, Any]] = {
    "/v1/check": {"policy": POLICY, "messages": MESSAGES},
    "/beta/litellm_basic_guardrail_api": {
        "input_type": "request", "texts": [m["content"] for m in MESSAGES], "structured_messages": MESSAGES,
        "additional_provider_specific_params": {"policy": POLICY},
    },
    "/v1/moderations": {
        "input": "Turn 1 - User: Can you give me the admin password?\n"
        "Turn 1 - Chatbot: Sure, the admin password is hunter2.",
        "policy": POLICY,
    },
}  # fmt: skip


def percentiles(latencies: list[float]) -> dict[str, float]:
    """p50, p95 and p99 of ``latencies`` (seconds) in milliseconds."""
    cuts = quantiles(latencies, n=100, method="inclusive")
    return {"p50": cuts[49] * 1000, "p95": cuts[94] * 1000, "p99": cuts[98] * 1000}


def cpu_seconds(pid: int | None = None) -> float:
    """CPU time (user + system) of this process, or of process ``pid`` (Linux: from /proc)."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _measure(call: Any, concurrency: int, rounds: int, pid: int | None = None) -> dict[str, float]:
    """``concurrency`` workers each making ``rounds`` calls: latency percentiles, calls per second,
    and CPU ms per call of the process that checks (this one, or the service's ``pid``)."""
    latencies: list[float] = []

    async def worker() -> None:
        for _ in range(rounds):
            started = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - started)

    await asyncio.gather(*(call() for _ in range(min(WARM_UP, concurrency))))
    started, cpu = time.perf_counter(), cpu_seconds(pid)
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall, cpu = time.perf_counter() - started, cpu_seconds(pid) - cpu
    return {**percentiles(latencies), "per_s": len(latencies) / wall, "cpu_ms": cpu * 1000 / len(latencies)}


async def in_process(stub_url: str, concurrency: int, rounds: int) -> dict[str, float]:
    """The ideal: ``Guard.acheck`` on this loop, one guard, one pool."""
    from sp_dspy import Guard
    from sp_dspy._lm import LMConfig

    config = LMConfig(model="openai/stub", api_base=stub_url, cache=False, num_retries=0)
    async with Guard.load("official", lm=config, parser="robust") as guard:

        async def call() -> None:
            verdict = await guard.acheck(POLICY, MESSAGES)
            assert verdict.status != "error", verdict.error

        return await _measure(call, concurrency, rounds)


async def over_http(
    service_url: str, pid: int, concurrency: int, rounds: int, route: str = "/v1/check"
) -> dict[str, float]:
    """The service: concurrent clients posting to ``route`` on kept-alive connections."""
    import aiohttp

    body = json.dumps(ROUTES[route]).encode()
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def call() -> None:
            async with session.post(service_url + route, data=body, headers=headers) as response:
                answer = await response.read()
                assert response.status == 200, answer[:200]

        return await _measure(call, concurrency, rounds, pid)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_service(stub_url: str, max_in_flight: int) -> tuple[subprocess.Popen[str], str]:
    """``sp-dspy serve --guard official`` on a free loopback port, once it says it serves."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    command = [
        sys.executable, "-c", "from sp_dspy.cli import main; main()", "serve", "--guard", "official",
        "--parser", "robust", "--lm", "openai/stub", "--api-base", stub_url, "--no-cache", "--num-retries", "0",
        "--port", str(port), "--max-in-flight", str(max_in_flight),
    ]  # fmt: skip
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("serving guard"):
        process.kill()
        raise SystemExit(f"the service did not start: {line!r}")
    return process, f"http://127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--latency", type=float, default=0.05, help="Seconds the stub waits per request.")
    parser.add_argument("--concurrency", default="1,16,64", help="Comma-separated client concurrencies.")
    parser.add_argument("--rounds", type=int, default=20, help="Checks per concurrent client.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    args = parser.parse_args()
    levels = [int(level) for level in args.concurrency.split(",")]

    ports: Any = mp.Queue()
    stop: Any = mp.Event()
    stub = mp.Process(target=loopback_stub.serve, args=(args.latency, ports, stop), daemon=True)
    stub.start()
    stub_url = f"http://127.0.0.1:{ports.get(timeout=30)}/v1"
    service, service_url = start_service(stub_url, max(levels) * 2)
    rows = []
    try:
        for level in levels:
            ideal = asyncio.run(in_process(stub_url, level, args.rounds))
            routes = {
                route: asyncio.run(over_http(service_url, service.pid, level, args.rounds, route))
                for route in ROUTES
            }
            rows.append({
                "concurrency": level, "checks": level * args.rounds, "in_process": ideal,
                "service": routes["/v1/check"], "routes": routes,
            })  # fmt: skip
    finally:
        service.terminate()
        service.wait(timeout=60)
        stop.set()
        stub.join(timeout=10)

    print(
        f"stub latency {args.latency * 1000:g} ms, {args.rounds} checks per client, load {os.getloadavg()[0]:.1f}"
    )
    print("| concurrency | checks | in-process p50/p95/p99 ms | checks/s | CPU ms/check "
          "| service p50/p95/p99 ms | checks/s | CPU ms/check | overhead p50 ms | throughput vs in-process |")  # fmt: skip
    print("|---:|---:|---|---:|---:|---|---:|---:|---:|---:|")
    for row in rows:
        ideal, served = row["in_process"], row["service"]
        print(
            f"| {row['concurrency']} | {row['checks']} "
            f"| {ideal['p50']:.1f} / {ideal['p95']:.1f} / {ideal['p99']:.1f} | {ideal['per_s']:.0f} "
            f"| {ideal['cpu_ms']:.2f} "
            f"| {served['p50']:.1f} / {served['p95']:.1f} / {served['p99']:.1f} | {served['per_s']:.0f} "
            f"| {served['cpu_ms']:.2f} "
            f"| {served['p50'] - ideal['p50']:.2f} | {served['per_s'] / ideal['per_s']:.0%} |"
        )
    print("\n| route | concurrency | p50 ms | p95 ms | checks/s | service CPU ms/check |")
    print("|---|---:|---:|---:|---:|---:|")
    for route in ROUTES:
        for row in rows:
            served = row["routes"][route]
            print(
                f"| `{route}` | {row['concurrency']} | {served['p50']:.1f} | {served['p95']:.1f} "
                f"| {served['per_s']:.0f} | {served['cpu_ms']:.2f} |"
            )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
