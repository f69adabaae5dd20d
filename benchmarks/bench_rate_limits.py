"""A provider's rate limits: sp-dspy against a rate-limited loopback server, beside a plain client.

The server is the tests' ``StubServer`` (200 ms per answer) with ``tests._rate_limits.RateLimits``:
a request bucket (``--rps``, burst ``--burst``) and a token bucket (``--tps``; a request counts its
bytes / 4 plus 20), answering an over-limit request at once with 429, ``Retry-After`` (whole
seconds) and, in the ``retry-after-ms`` rows, ``retry-after-ms`` (exact, as Azure OpenAI sends
it); every answer carries OpenAI's ``x-ratelimit-*`` headers. Each row gets a fresh server (full
buckets) and a fresh client process. Rows (issue 33's table):

- sp-dspy ``eval`` of the official per-policy baseline at the default concurrency 16 and at
  ``--concurrency 64``, with and without ``retry-after-ms``;
- the same at 64 for per-rule (``--per-rule-cases`` cases) and for a compile's dev scoring
  (``evaluate_cases``, what compile's evaluations run) of a DSPy program;
- a plain client: the OpenAI SDK (its default 2 retries, honouring ``Retry-After``) in a pool of
  64 threads, as the reference harness's ``--batch-size 64`` sends.

Columns: wall seconds of the calls (loading and scoring excluded), the limit-bound ideal
(requests / rps or tokens / tps, whichever is longer, plus one answer's 200 ms), answered and
error records, and the server's 429s. ``--sp-dspy-root`` runs another checkout's sp-dspy (e.g.
the code before issue 33) for the sp-dspy rows.

    python benchmarks/make_synthetic.py --out benchmarks/_data/synthetic.json
    python benchmarks/bench_rate_limits.py
    python benchmarks/bench_rate_limits.py --sp-dspy-root /path/to/older/checkout --rows eval

Not a test: timings depend on the machine and on its load. Figures are in ``docs/evaluate/rate-limits.md``.
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
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATASET = ROOT / "benchmarks" / "_data" / "synthetic.json"
LATENCY_S = 0.2


def serve(limits: dict[str, Any], ports: Any, stop: Any, counts: Any) -> None:
    """Child process: the rate-limited stub until ``stop``; then its admitted and rejected counts."""
    sys.path.insert(0, str(ROOT))
    from bench_runner import stub_answer  # this directory

    from tests._rate_limits import RateLimits
    from tests._stub_server import StubServer

    responder = None if limits.get("fake") else stub_answer
    settings = {k: v for k, v in limits.items() if k != "fake"}
    buckets = RateLimits(**settings)
    with StubServer(latency_s=LATENCY_S, responder=responder, limits=buckets) as server:
        ports.put(server.port)
        stop.wait()
        counts.put({"admitted": buckets.admitted, "rejected": buckets.rejected})


def sp_dspy_client(settings: dict[str, Any], results: Any) -> None:
    """Child process: ``run_eval`` (or compile's ``evaluate_cases``) against the server."""
    sys.path.insert(0, settings["root"])
    from sp_dspy import run_eval
    from sp_dspy._lm import LMConfig, configure_cache
    from sp_dspy._runner import EvalConfig

    configure_cache(enabled=False)
    lm_config = LMConfig(model="openai/stub", api_base=settings["api_base"], cache=False)
    if settings["kind"] == "compile":
        results.put(_compile_scoring(settings, lm_config))
        return
    config = EvalConfig.model_validate(
        {
            "data": {"dataset": settings["dataset"], "limit": settings["cases"]},
            "protocol": settings["protocol"],
            "concurrency": settings["concurrency"],
            "output_dir": settings["output_dir"],
            "run_id": settings["run_id"],
        }
    )
    started = time.perf_counter()
    outcome = run_eval(config, lm_config, show_progress=False)
    wall = time.perf_counter() - started
    manifest = json.loads(outcome.paths.manifest.read_text())
    run = manifest["runs"][lm_config.display_name()]
    results.put(
        {
            "wall_s": wall,
            "units": outcome.totals.records,
            "errors": outcome.totals.errors,
            "manifest_rate_limited": run.get("rate_limited"),
            "manifest_wait_s": run.get("rate_limit_wait_s"),
        }
    )


def _compile_scoring(settings: dict[str, Any], lm_config: Any) -> dict[str, Any]:
    """What a compile's dev scoring runs: a DSPy program over the cases through ``evaluate_cases``."""
    from sp_dspy import load_benchmark
    from sp_dspy._lm import make_lm
    from sp_dspy._runner._eval import evaluate_cases
    from sp_dspy.programs import resolve_program

    cases = load_benchmark(settings["dataset"]).cases[: settings["cases"]]
    program, _ = resolve_program("dspy", "per-policy")
    lm = make_lm(lm_config)
    started = time.perf_counter()
    records = evaluate_cases(program, cases, lm, concurrency=settings["concurrency"])
    wall = time.perf_counter() - started
    errors = sum(1 for record in records if record.error_class is not None)
    return {"wall_s": wall, "units": len(records), "errors": errors}


def plain_client(settings: dict[str, Any], results: Any) -> None:
    """Child process: the OpenAI SDK (default retries) in a pool of ``concurrency`` threads."""
    sys.path.insert(0, str(ROOT))
    import httpx
    from openai import OpenAI

    from sp_dspy import load_benchmark
    from sp_dspy._protocol import per_policy_messages

    cases = load_benchmark(settings["dataset"]).cases[: settings["cases"]]
    http = httpx.Client(limits=httpx.Limits(max_connections=100), timeout=httpx.Timeout(600, connect=10.0))
    client = OpenAI(api_key="EMPTY", base_url=settings["api_base"], http_client=http)

    def call(messages: list[dict[str, str]]) -> bool:
        try:
            client.chat.completions.create(model="stub", messages=messages)  # type: ignore[arg-type]
        except Exception:
            return False
        return True

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=settings["concurrency"]) as pool:
        answered = list(pool.map(call, [per_policy_messages(case) for case in cases]))
    results.put(
        {"wall_s": time.perf_counter() - started, "units": len(cases), "errors": answered.count(False)}
    )


def request_tokens(dataset: Path, cases: int, protocol: str) -> tuple[int, float]:
    """The requests ``cases`` make and the tokens they count against the server's limit."""
    sys.path.insert(0, str(ROOT))
    from sp_dspy import load_benchmark
    from sp_dspy._protocol import build_targets, per_policy_messages, per_rule_messages
    from tests._rate_limits import estimated_tokens

    loaded = load_benchmark(str(dataset)).cases[:cases]
    if protocol == "per-rule":
        bodies = [per_rule_messages(case, t) for case in loaded for t in build_targets(case)]
    else:
        bodies = [per_policy_messages(case) for case in loaded]
    sizes = [estimated_tokens(json.dumps({"model": "stub", "messages": m}).encode()) for m in bodies]
    return len(sizes), sum(sizes)


def run_row(context: Any, target: Any, settings: dict[str, Any], limits: dict[str, Any]) -> dict[str, Any]:
    ports, stop, counts = context.Queue(), context.Event(), context.Queue()
    server = context.Process(target=serve, args=(limits, ports, stop, counts), daemon=True)
    server.start()
    settings = {**settings, "api_base": f"http://127.0.0.1:{ports.get(timeout=60)}/v1"}
    results = context.Queue()
    client = context.Process(target=target, args=(settings, results))
    client.start()
    row: dict[str, Any] = results.get(timeout=1800)
    client.join()
    stop.set()
    row.update(counts.get(timeout=30))
    server.join(timeout=10)
    return row


def rows(args: argparse.Namespace) -> list[tuple[str, str, int, bool, int]]:
    """(client, kind, concurrency, retry-after-ms, cases) of each row asked for."""
    eval_rows = [
        ("sp-dspy", "per-policy", concurrency, ms, args.cases)
        for ms in (False, True)
        for concurrency in (16, 64)
    ]
    table = {
        "eval": eval_rows,
        "per-rule": [("sp-dspy", "per-rule", 64, ms, args.per_rule_cases) for ms in (False, True)],
        "compile": [("sp-dspy", "compile", 64, ms, args.cases) for ms in (False, True)],
        "plain": [("plain", "per-policy", 64, ms, args.cases) for ms in (False, True)],
    }
    return [row for name in args.rows.split(",") for row in table[name.strip()]]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--cases", type=int, default=300, help="Per-policy (and compile) cases per row.")
    parser.add_argument("--per-rule-cases", type=int, default=15, help="Cases of the per-rule rows.")
    parser.add_argument("--rps", type=float, default=50.0, help="The server's requests per second.")
    parser.add_argument("--burst", type=float, default=10.0, help="Requests the server admits at once.")
    parser.add_argument(
        "--token-slack", type=float, default=1.1,
        help="The token limit: this many times the rows' mean request tokens at --rps.",
    )  # fmt: skip
    parser.add_argument("--rows", default="eval,per-rule,compile,plain")
    parser.add_argument("--sp-dspy-root", type=Path, default=ROOT, help="The checkout whose sp-dspy runs.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    args = parser.parse_args()
    if not args.dataset.exists():
        sys.exit(f"{args.dataset}: missing; run python benchmarks/make_synthetic.py --out {args.dataset}")
    context = mp.get_context("spawn")
    figures: list[dict[str, Any]] = []
    print(f"server: {args.rps:g} requests/s, burst {args.burst:g}, {LATENCY_S * 1000:.0f} ms per answer")
    print(
        f"{'client':<9}{'kind':<12}{'conc':>5}{'ms':>4}{'calls':>7}{'ideal s':>9}{'wall s':>8}{'x ideal':>8}"
        f"{'answered':>9}{'errors':>7}{'429s':>6}{'429 %':>7}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-rate-") as tmp:
        from bench_runner import write_slice  # this directory

        dataset = write_slice(args.dataset, max(args.cases, args.per_rule_cases), Path(tmp))
        for client, kind, concurrency, ms, cases in rows(args):
            protocol = "per-rule" if kind == "per-rule" else "per-policy"
            calls, tokens = request_tokens(dataset, cases, protocol)
            limits: dict[str, Any] = {"requests_per_s": args.rps, "burst": args.burst, "retry_after_ms": ms}
            if kind == "compile":  # a DSPy program's prompts: the request limit alone
                limits["fake"] = True
            else:
                limits["tokens_per_s"] = args.token_slack * tokens / calls * args.rps
            ideal = max(calls / args.rps, tokens / limits.get("tokens_per_s", float("inf"))) + LATENCY_S
            settings = {
                "root": str(args.sp_dspy_root), "dataset": str(dataset), "cases": cases,
                "protocol": protocol, "kind": kind, "concurrency": concurrency,
                "output_dir": str(Path(tmp) / "out"), "run_id": f"{client}-{kind}-{concurrency}-{ms}",
            }  # fmt: skip
            target = sp_dspy_client if client == "sp-dspy" else plain_client
            row = run_row(context, target, settings, limits)
            row.update(client=client, kind=kind, concurrency=concurrency, retry_after_ms=ms, calls=calls,
                       ideal_s=ideal)  # fmt: skip
            figures.append(row)
            share = row["rejected"] / max(1, row["admitted"] + row["rejected"])
            print(
                f"{client:<9}{kind:<12}{concurrency:>5}{'yes' if ms else 'no':>4}{calls:>7}{ideal:>9.2f}"
                f"{row['wall_s']:>8.2f}{row['wall_s'] / ideal:>8.2f}{row['units'] - row['errors']:>9}"
                f"{row['errors']:>7}{row['rejected']:>6}{100 * share:>6.1f}%",
                flush=True,
            )
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
