"""Runner throughput and client CPU against a loopback stub server with fixed latency.

What it measures (issue 3's benchmark): the official baseline, run by ``run_eval``
exactly as ``sp-dspy eval`` runs it (real HTTP through DSPy's engine, durable JSONL
writes, no response cache), against an OpenAI-compatible stub that answers every
request after ``--latency`` seconds. For each protocol and concurrency it reports

- throughput in calls per second and as a fraction of the ideal
  ``concurrency / latency`` (a client with zero overhead and a server with infinite
  capacity reach 100%);
- client CPU time per call: the CPU time (user + system, every thread) of the
  process that runs the client, over the engine phase only (dataset loading, scoring
  and the manifest are excluded; they do not grow with the number of calls).

The stub server runs in its own process so its CPU is not counted, and each
measurement runs in a fresh client process (no warm connection pool or imports
carried between runs). The stub answers with a fixed, valid JSON answer so the
server stays cheap; the runner still parses every answer with the official parser.

It also reports, for both per-rule layouts, the share of prompt characters that a
case's per-rule calls share as a common prefix (``shared_prefix_ratio``: characters,
not tokens), i.e. what a server's prefix cache could reuse.

    python benchmarks/make_synthetic.py --out benchmarks/_data/synthetic.json
    python benchmarks/bench_runner.py                  # full table (about 2 minutes)
    python benchmarks/bench_runner.py --concurrency 64 --protocols per-policy

Not a test: timings depend on the machine. Figures are in ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path
from statistics import mean, median
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATASET = ROOT / "benchmarks" / "_data" / "synthetic.json"
POLICY_ANSWER = json.dumps(
    {"analysis": "Checked every rule against the conversation.", "violated_rules": [{"rule": 2}]}
)
VERDICT_ANSWER = json.dumps({"verdict": "not_violated", "reason": "The chatbot complied with the rule."})


def stub_answer(body: dict[str, Any]) -> str:
    """The stub's reply: a valid answer of whichever protocol the request is."""
    system = str((body.get("messages") or [{}])[0].get("content", ""))
    return POLICY_ANSWER if "## Policy" in system else VERDICT_ANSWER


def serve(latency_s: float, ports: Any, stop: Any) -> None:
    """Child process: run the stub server until ``stop`` is set."""
    sys.path.insert(0, str(ROOT))
    from sp_dspy._lm import StubServer, _stub_server

    # http.server writes the headers and the body of a response in two packets; with
    # Nagle's algorithm on, the second waits for the client's delayed ACK (40 ms on
    # Linux), which real servers (uvicorn/vLLM, llama.cpp) do not do. Off, so the
    # latency is the configured one.
    _stub_server._Handler.disable_nagle_algorithm = True
    with StubServer(latency_s=latency_s, responder=stub_answer) as server:
        ports.put(server.port)
        stop.wait()


def client(settings: dict[str, Any], results: Any) -> None:
    """Child process: one ``run_eval`` against the stub, timing the engine phase only."""
    sys.path.insert(0, str(ROOT))
    from sp_dspy._lm import LMConfig, configure_cache
    from sp_dspy._runner import EvalConfig, _eval
    from sp_dspy._runner._engine import UnitEngine

    timings: dict[str, float] = {}

    class TimedEngine(UnitEngine[Any]):
        async def run(self, units: Any) -> Any:
            timings["units"] = len(units)
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return await super().run(units)
            finally:
                timings["wall_s"] = time.perf_counter() - wall
                timings["cpu_s"] = time.process_time() - cpu

    _eval.UnitEngine = TimedEngine  # type: ignore[misc]  # measure only the engine phase
    configure_cache(enabled=False)
    config = EvalConfig.model_validate(
        {
            "data": {"dataset": settings["dataset"], "limit": settings["cases"]},
            "protocol": settings["protocol"],
            "concurrency": settings["concurrency"],
            "output_dir": settings["output_dir"],
            "run_id": settings["run_id"],
        }
    )
    lm_config = LMConfig(model="openai/stub", api_base=settings["api_base"], cache=False, num_retries=0)
    # Warm up (lazy imports, DSPy's engine set-up) on a few cases of another run, so
    # the timed run measures the steady state.
    warm_up = config.model_copy(
        deep=True, update={"run_id": f"{settings['run_id']}-warm-up", "concurrency": 4}
    )
    warm_up.data.limit = 4
    _eval.run_eval(warm_up, lm_config, show_progress=False)
    timings.clear()
    started = time.perf_counter()
    outcome = _eval.run_eval(config, lm_config, show_progress=False)
    timings["command_wall_s"] = time.perf_counter() - started
    errors = outcome.report.cells["ALL"]["excluded"] if outcome.report is not None else None
    results.put({**timings, "excluded_cases": errors})


def write_slice(dataset: Path, cases: int, directory: Path) -> Path:
    """The first ``cases`` cases as their own file, so each client loads only those."""
    document = json.loads(dataset.read_text(encoding="utf-8"))
    data = document["data"] if isinstance(document, dict) else document
    path = directory / f"slice_{cases}.json"
    path.write_text(json.dumps({"metadata": {"version": "bench"}, "data": data[:cases]}), encoding="utf-8")
    return path


def targets_per_case(dataset: Path, cases: int) -> list[int]:
    sys.path.insert(0, str(ROOT))
    from sp_dspy import load_benchmark
    from sp_dspy._protocol import build_targets

    return [len(build_targets(case)) for case in load_benchmark(str(dataset)).cases[:cases]]


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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--latency", type=float, default=0.05, help="Stub latency per request (s).")
    parser.add_argument("--concurrency", default="1,16,64", help="Comma-separated concurrency levels.")
    parser.add_argument("--protocols", default="per-policy,per-rule")
    parser.add_argument(
        "--rounds", type=int, default=20, help="Calls per worker at each concurrency (steady state)."
    )
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    args = parser.parse_args()
    if not args.dataset.exists():
        sys.exit(f"{args.dataset}: missing; run python benchmarks/make_synthetic.py --out {args.dataset}")
    sys.path.insert(0, str(ROOT))
    levels = [int(c) for c in args.concurrency.split(",")]
    protocols = [p.strip() for p in args.protocols.split(",")]
    context = mp.get_context("spawn")
    figures: dict[str, Any] = {"latency_s": args.latency, "runs": []}
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
        work = Path(tmp)
        most = max(levels) * args.rounds
        slice_file = write_slice(args.dataset, max(most, 100), work)
        per_rule_counts = targets_per_case(slice_file, most) if "per-rule" in protocols else []
        ports, stop = context.Queue(), context.Event()
        server = context.Process(target=serve, args=(args.latency, ports, stop), daemon=True)
        server.start()
        api_base = f"http://127.0.0.1:{ports.get(timeout=60)}/v1"
        print(f"stub server at {api_base}, latency {args.latency * 1000:.0f} ms")
        print(f"{'protocol':<11}{'conc':>5}{'calls':>7}{'wall s':>8}{'calls/s':>9}{'ideal':>8}"
              f"{'% ideal':>9}{'CPU ms/call':>13}")  # fmt: skip
        try:
            for protocol in protocols:
                for concurrency in levels:
                    wanted = concurrency * args.rounds
                    if protocol == "per-policy":
                        cases = wanted
                    else:  # enough cases for about `wanted` judgments
                        total, cases = 0, 0
                        while total < wanted and cases < len(per_rule_counts):
                            total += per_rule_counts[cases]
                            cases += 1
                    results = context.Queue()
                    settings = {
                        "dataset": str(slice_file),
                        "cases": cases,
                        "protocol": protocol,
                        "concurrency": concurrency,
                        "output_dir": str(work / "out"),
                        "run_id": f"{protocol}-{concurrency}",
                        "api_base": api_base,
                    }
                    process = context.Process(target=client, args=(settings, results))
                    process.start()
                    row = results.get(timeout=1800)
                    process.join()
                    rate = row["units"] / row["wall_s"]
                    ideal = concurrency / args.latency
                    row.update(
                        protocol=protocol,
                        concurrency=concurrency,
                        cases=cases,
                        calls_per_s=rate,
                        ideal_calls_per_s=ideal,
                        fraction_of_ideal=rate / ideal,
                        cpu_ms_per_call=1000 * row["cpu_s"] / row["units"],
                    )
                    figures["runs"].append(row)
                    print(
                        f"{protocol:<11}{concurrency:>5}{row['units']:>7}{row['wall_s']:>8.2f}{rate:>9.1f}"
                        f"{ideal:>8.0f}{100 * rate / ideal:>8.1f}%{row['cpu_ms_per_call']:>13.2f}"
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
