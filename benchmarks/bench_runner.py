"""Runner throughput and client CPU against a loopback stub server with fixed latency.

What it measures (issue 3's benchmark): the official baseline run by ``run_eval``
exactly as ``sp-dspy eval`` runs it (real HTTP through DSPy's execution and the engine
``eval`` picks: sp-dspy's HTTP engine for a single OpenAI-compatible endpoint, or DSPy's
own with ``--transport dspy``; durable JSONL writes, no response cache, no progress bar)
against an OpenAI-compatible stub that answers every request after ``--latency``
seconds. Each measurement sends ``concurrency x --rounds`` calls (50 rounds by
default), per-policy capped at the 3,000 cases of the full-size file. For each protocol and
concurrency it reports

- throughput in calls per second and as a fraction of the ideal
  ``concurrency / latency`` (zero client overhead, infinitely fast server);
- client CPU per call: CPU time (user + system, all threads) of the process that
  runs the client, over the engine phase only (dataset loading, scoring and the
  manifest are excluded: they do not grow with the number of calls).

The stub runs in its own process so its CPU is not counted, and each measurement
runs in a fresh client process after a short warm-up run (imports, DSPy's engine
set-up), so it is the steady state. The stub answers with a fixed valid answer; the
runner still parses every answer with the official parser. By default it is
``loopback_stub.py`` (asyncio, tens of microseconds of CPU per request), so the
client keeps the machine's CPUs as it would against a real server on other
hardware; ``--stub threaded`` uses the package's ``StubServer`` (``http.server``,
about 0.5 ms of CPU per request, competing with the client for the same CPUs).

``--clients`` adds ``reference-style``: the same requests sent the way the
reference harness's API guard sends them (OpenAI SDK over httpx, one thread per
concurrent request, max_connections=100), parsed with the same strict parser and
kept in memory (the reference writes results after the batch). It is a model of
the reference harness's transport, not the harness itself.

It also reports, for both per-rule layouts, the share of prompt characters that a
case's per-rule calls share as a common prefix (``shared_prefix_ratio``: characters,
not tokens): what a server's prefix cache could reuse.

    python benchmarks/make_synthetic.py --out benchmarks/_data/synthetic.json
    python benchmarks/bench_runner.py                       # the README table
    python benchmarks/bench_runner.py --concurrency 64 --protocols per-policy
    python benchmarks/bench_runner.py --latency 0.2 --concurrency 64 --protocols per-policy \
        --clients sp-dspy,reference-style                   # issue 22's figure: 3,000 cases
    python benchmarks/bench_runner.py --transport dspy      # DSPy's engine instead
    python benchmarks/bench_runner.py --stub threaded       # the tests' StubServer

Not a test: timings depend on the machine and on its load. Figures are in
``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import mean, median
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import loopback_stub  # this directory: the default stub
from loopback_stub import POLICY_ANSWER, VERDICT_ANSWER

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATASET = ROOT / "benchmarks" / "_data" / "synthetic.json"
WARM_UP_UNITS = 8


def stub_answer(body: dict[str, Any]) -> str:
    """The stub's reply: a valid answer of whichever protocol the request is."""
    system = str((body.get("messages") or [{}])[0].get("content", ""))
    return POLICY_ANSWER if "## Policy" in system else VERDICT_ANSWER


def serve_threaded(latency_s: float, ports: Any, stop: Any) -> None:
    """Child process: run the tests' ``StubServer`` until ``stop`` is set (``--stub threaded``)."""
    sys.path.insert(0, str(ROOT))
    from tests import _stub_server
    from tests._stub_server import StubServer

    # http.server writes a response's headers and body in two packets; with Nagle's
    # algorithm on, the second waits for the client's delayed ACK (40 ms on Linux),
    # which real servers (uvicorn/vLLM, llama.cpp) do not do. Off, so the latency is
    # the configured one.
    _stub_server._Handler.disable_nagle_algorithm = True
    with StubServer(latency_s=latency_s, responder=stub_answer) as server:
        ports.put(server.port)
        stop.wait()


def sp_dspy_client(settings: dict[str, Any], results: Any) -> None:
    """Child process: ``run_eval`` against the stub, timing the engine phase only."""
    sys.path.insert(0, str(ROOT))
    from sp_dspy import run_eval
    from sp_dspy._lm import LMConfig, configure_cache
    from sp_dspy._runner import EvalConfig, _invocation
    from sp_dspy._runner._engine import UnitEngine

    timings: dict[str, float] = {}

    class TimedEngine(UnitEngine[Any, Any]):
        async def run(self, units: Any) -> Any:
            timings["units"] = len(units)
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return await super().run(units)
            finally:
                timings["wall_s"] = time.perf_counter() - wall
                timings["cpu_s"] = time.process_time() - cpu

    _invocation.UnitEngine = TimedEngine  # type: ignore[misc]  # time the engine phase only
    configure_cache(enabled=False)
    lm_config = LMConfig(
        model="openai/stub",
        api_base=settings["api_base"],
        cache=False,
        num_retries=0,
        transport=settings["transport"],
    )

    def config(run_id: str, cases: int, concurrency: int) -> EvalConfig:
        return EvalConfig.model_validate(
            {
                "data": {"dataset": settings["dataset"], "limit": cases},
                "protocol": settings["protocol"],
                "concurrency": concurrency,
                "output_dir": settings["output_dir"],
                "run_id": run_id,
            }
        )

    warm_cases = WARM_UP_UNITS if settings["protocol"] == "per-policy" else 1
    run_eval(config(f"{settings['run_id']}-warm", warm_cases, 4), lm_config, show_progress=False)
    timings.clear()
    outcome = run_eval(
        config(settings["run_id"], settings["cases"], settings["concurrency"]), lm_config, show_progress=False
    )
    excluded = outcome.report.cells["ALL"]["excluded"] if outcome.report is not None else None
    results.put({**timings, "excluded_cases": excluded})


def reference_style_client(settings: dict[str, Any], results: Any) -> None:
    """Child process: the same requests through the OpenAI SDK in a thread pool."""
    sys.path.insert(0, str(ROOT))
    import httpx
    from openai import OpenAI

    from sp_dspy import load_benchmark
    from sp_dspy._protocol import (
        build_targets,
        parse_policy_output,
        parse_verdict_output,
        per_policy_messages,
        per_rule_messages,
    )

    cases = load_benchmark(settings["dataset"]).cases[: settings["cases"]]
    if settings["protocol"] == "per-policy":
        requests = [per_policy_messages(case) for case in cases]
        parse: Any = parse_policy_output
    else:
        requests = [per_rule_messages(case, target) for case in cases for target in build_targets(case)]
        parse = parse_verdict_output
    http = httpx.Client(
        limits=httpx.Limits(max_connections=100, max_keepalive_connections=60, keepalive_expiry=30.0),
        timeout=httpx.Timeout(600, connect=10.0),
    )
    client = OpenAI(api_key="EMPTY", base_url=settings["api_base"], max_retries=0, http_client=http)

    def call(messages: list[dict[str, str]]) -> Any:
        response = client.chat.completions.create(model="stub", messages=messages)  # type: ignore[arg-type]
        return parse(response.choices[0].message.content, mode="strict"), response.usage

    with ThreadPoolExecutor(max_workers=settings["concurrency"]) as pool:
        list(pool.map(call, requests[:WARM_UP_UNITS]))
        wall, cpu = time.perf_counter(), time.process_time()
        answers = list(pool.map(call, requests))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    failed = sum(1 for parsed, _ in answers if parsed.parse_failed)
    results.put({"units": len(requests), "wall_s": wall, "cpu_s": cpu, "excluded_cases": failed})


def write_slice(dataset: Path, cases: int, directory: Path) -> Path:
    """The first ``cases`` cases as their own file, so each client loads only those."""
    document = json.loads(dataset.read_text(encoding="utf-8"))
    data = document["data"] if isinstance(document, dict) else document
    path = directory / f"slice_{cases}.json"
    path.write_text(json.dumps({"metadata": {"version": "bench"}, "data": data[:cases]}), encoding="utf-8")
    return path


def targets_per_case(dataset: Path) -> list[int]:
    from sp_dspy import load_benchmark
    from sp_dspy._protocol import build_targets

    return [len(build_targets(case)) for case in load_benchmark(str(dataset)).cases]


def prefix_shares(dataset: Path, cases: int) -> dict[str, dict[str, float]]:
    """Mean and median ``shared_prefix_ratio`` over the first ``cases`` cases, per layout."""
    from sp_dspy import load_benchmark
    from sp_dspy._protocol import build_targets, per_rule_messages, shared_prefix_ratio

    loaded = load_benchmark(str(dataset)).cases[:cases]
    shares: dict[str, dict[str, float]] = {}
    for layout in ("official", "prefix"):
        ratios = [
            shared_prefix_ratio([per_rule_messages(case, t, layout=layout) for t in build_targets(case)])
            for case in loaded
        ]
        shares[layout] = {"mean": mean(ratios), "median": median(ratios), "cases": len(ratios)}
    return shares


def cases_for(protocol: str, wanted_calls: int, per_case: list[int]) -> int:
    """How many cases make about ``wanted_calls`` calls (per-rule: ~16-33 calls a case)."""
    if protocol == "per-policy":
        return wanted_calls
    total, cases = 0, 0
    while total < wanted_calls and cases < len(per_case):
        total += per_case[cases]
        cases += 1
    return cases


def measure(context: Any, target: Any, settings: dict[str, Any]) -> dict[str, Any]:
    results = context.Queue()
    process = context.Process(target=target, args=(settings, results))
    process.start()
    row: dict[str, Any] = results.get(timeout=1800)
    process.join()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--latency", type=float, default=0.05, help="Stub latency per request (s).")
    parser.add_argument("--concurrency", default="1,16,64", help="Comma-separated concurrency levels.")
    parser.add_argument("--protocols", default="per-policy,per-rule")
    parser.add_argument("--clients", default="sp-dspy", help="sp-dspy and/or reference-style.")
    parser.add_argument(
        "--rounds",
        type=int,
        default=50,
        help="Calls per concurrent slot (steady state), capped at the dataset.",
    )
    parser.add_argument(
        "--transport", default="auto", help="sp-dspy client's --transport: auto, direct, dspy."
    )
    parser.add_argument(
        "--stub",
        choices=("asyncio", "threaded"),
        default="asyncio",
        help="asyncio: loopback_stub.py (tens of microseconds of CPU per request); threaded: the "
        "package's StubServer (http.server, about 0.5 ms per request, on the same CPUs).",
    )
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    args = parser.parse_args()
    if not args.dataset.exists():
        sys.exit(f"{args.dataset}: missing; run python benchmarks/make_synthetic.py --out {args.dataset}")
    sys.path.insert(0, str(ROOT))
    levels = [int(c) for c in args.concurrency.split(",")]
    protocols = [p.strip() for p in args.protocols.split(",")]
    targets = {"sp-dspy": sp_dspy_client, "reference-style": reference_style_client}
    clients = [c.strip() for c in args.clients.split(",")]
    context = mp.get_context("spawn")
    figures: dict[str, Any] = {
        "latency_s": args.latency,
        "cpus": os.cpu_count(),
        "transport": args.transport,
        "stub": args.stub,
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
        work = Path(tmp)
        slice_file = write_slice(args.dataset, max(max(levels) * args.rounds, 100) + WARM_UP_UNITS, work)
        per_case = targets_per_case(slice_file)
        ports, stop = context.Queue(), context.Event()
        stub = loopback_stub.serve if args.stub == "asyncio" else serve_threaded
        server = context.Process(target=stub, args=(args.latency, ports, stop), daemon=True)
        server.start()
        api_base = f"http://127.0.0.1:{ports.get(timeout=60)}/v1"
        print(f"{args.stub} stub at {api_base}, latency {args.latency * 1000:.0f} ms, {os.cpu_count()} CPUs")
        print(
            f"{'client':<16}{'protocol':<11}{'conc':>5}{'calls':>7}{'wall s':>8}{'calls/s':>9}"
            f"{'ideal':>7}{'% ideal':>9}{'CPU ms/call':>13}"
        )
        try:
            for protocol in protocols:
                for concurrency in levels:
                    cases = cases_for(protocol, concurrency * args.rounds, per_case)
                    for name in clients:
                        settings = {
                            "dataset": str(slice_file),
                            "cases": cases,
                            "protocol": protocol,
                            "concurrency": concurrency,
                            "output_dir": str(work / "out"),
                            "run_id": f"{name}-{protocol}-{concurrency}",
                            "api_base": api_base,
                            "transport": args.transport,
                        }
                        row = measure(context, targets[name], settings)
                        rate, ideal = row["units"] / row["wall_s"], concurrency / args.latency
                        row.update(
                            client=name,
                            protocol=protocol,
                            concurrency=concurrency,
                            cases=cases,
                            calls_per_s=rate,
                            fraction_of_ideal=rate / ideal,
                            cpu_ms_per_call=1000 * row["cpu_s"] / row["units"],
                        )
                        figures["runs"].append(row)
                        print(
                            f"{name:<16}{protocol:<11}{concurrency:>5}{row['units']:>7}{row['wall_s']:>8.2f}"
                            f"{rate:>9.1f}{ideal:>7.0f}{100 * rate / ideal:>8.1f}%{row['cpu_ms_per_call']:>13.2f}"
                        )
        finally:
            stop.set()
            server.join(timeout=10)
        if "per-rule" in protocols:
            figures["shared_prefix"] = prefix_shares(slice_file, 100)
            for layout, share in figures["shared_prefix"].items():
                print(
                    f"per-rule layout {layout!r}: a case's calls share {100 * share['mean']:.1f}% of "
                    f"their prompt characters as a common prefix (mean of {share['cases']} cases; "
                    f"median {100 * share['median']:.1f}%)"
                )
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
