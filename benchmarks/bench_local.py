"""The embedded model on llama.cpp: per-rule layouts compared, and the main job's speed.

Two measurements (issue 6's benchmark), both on the embedded SmolLM2-135M served by
llama.cpp with its prompt cache on (``cache_prompt``, one slot, so the slot's KV
cache carries over from one request to the next):

1. **Per-rule layout.** The official per-rule baseline over the same cases, once with
   the official layout and once with ``--per-rule-layout prefix``, through
   ``run_eval`` exactly as ``sp-dspy eval --lm local --protocol per-rule`` runs it
   (JSON-schema constrained, concurrency 16, no response cache). Each run gets a
   freshly started server, so neither inherits the other's cache. Reported: wall
   time of the run, the ratio official / prefix, and from llama.cpp's own
   ``timings`` per request the prompt tokens it had to process versus those it
   served from the cache, and the tokens it generated: the reason for the ratio.
   A recording pass-through server between client and llama.cpp collects those
   timings (it adds well under a millisecond per request).

2. **The README's main job.** ``sp-dspy eval`` with no arguments (official
   per-policy baseline, bundled sample, first 3 cases, embedded model) run as a user
   runs it, from the repository root, with an empty response cache; only
   ``--output-dir`` is added so nothing is written into the checkout. Reported: wall
   time of the whole command (start-up, model load and scoring included) and cases
   per minute.

    python benchmarks/bench_local.py                    # both, twice each
    python benchmarks/bench_local.py --only layouts --cases 2 --repeat 1

Not a test: timings depend on the machine and on what else runs on it (on a shared
2-core machine, a lot). Figures are in ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Literal

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class TimingRecorder:
    """Forward chat requests to llama.cpp and keep its ``timings`` for each answer."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.timings: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        from sp_dspy._serve._process import post_json

        answer = dict(post_json(f"{self.target}/chat/completions", body, timeout=900))
        with self._lock:
            self.timings.append(dict(answer.get("timings") or {}))
        return answer

    def totals(self) -> dict[str, Any]:
        def total(key: str) -> int:
            return int(sum(t.get(key) or 0 for t in self.timings))

        return {
            "requests": len(self.timings),
            "prompt_tokens_processed": total("prompt_n"),
            "prompt_tokens_from_cache": total("cache_n"),
            "generated_tokens": total("predicted_n"),
            "prompt_s": round(sum(t.get("prompt_ms") or 0 for t in self.timings) / 1000, 1),
            "generation_s": round(sum(t.get("predicted_ms") or 0 for t in self.timings) / 1000, 1),
        }


def run_layout(
    layout: Literal["official", "prefix"], cases: int, threads: int | None, out: Path
) -> dict[str, Any]:
    """One per-rule run of ``layout`` on a fresh server; wall time and llama.cpp's timings."""
    from rich.console import Console

    from sp_dspy._executor import run_eval
    from sp_dspy._lm import LMConfig, configure_cache
    from sp_dspy._runner._config import DataSelection, EvalConfig
    from sp_dspy._serve import LlamaCppServer
    from sp_dspy.cli._lm_options import LOCAL_SETTINGS
    from tests._stub_server import StubServer

    configure_cache(enabled=False)
    config = EvalConfig(
        data=DataSelection(level="L0", limit=cases),
        protocol="per-rule",
        per_rule_layout=layout,
        output_dir=out,
        run_id=f"{layout}-{time.monotonic_ns()}",
    )
    with LlamaCppServer(threads=threads) as server:
        recorder = TimingRecorder(server.api_base)
        with StubServer(responder=recorder) as proxy:
            settings = {**LOCAL_SETTINGS, "cache": False}
            lm = LMConfig(model=f"openai/{server.model_name}", api_base=proxy.url, name="local", **settings)
            started = time.perf_counter()
            outcome = run_eval(config, lm, console=Console(quiet=True), show_progress=False)
            wall = time.perf_counter() - started
        threads_used = server.threads
    return {
        "layout": layout,
        "judgments": outcome.units_run,
        "wall_s": round(wall, 1),
        "s_per_judgment": round(wall / max(1, outcome.units_run), 2),
        "threads": threads_used,
        **recorder.totals(),
    }


def run_main_job(out: Path) -> dict[str, Any]:
    """``sp-dspy eval`` from the repository root, with an empty cache; wall time of the command."""
    env = {**os.environ, "SP_DSPY_CACHE_DIR": str(out / "cache")}
    command = [sys.executable, "-c", "from sp_dspy.cli import main; main()", "eval", "--output-dir", str(out)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"sp-dspy eval failed ({done.returncode}):\n{done.stderr[-2000:]}")
    (manifest,) = out.glob("manifest_*.json")
    (run,) = json.loads(manifest.read_text())["runs"].values()
    cases = int(run["units_total"])
    return {
        "cases": cases,
        "wall_s": round(wall, 1),
        "engine_wall_s": run["wall_s"],
        "cases_per_minute": round(cases / (wall / 60), 2),
        "errors": int(run["totals"].get("errors", 0)),
    }


def load_now() -> float:
    return round(os.getloadavg()[0], 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("layouts", "main-job"), help="Run one of the two measurements.")
    parser.add_argument("--cases", type=int, default=1, help="L0 cases for the layout comparison.")
    parser.add_argument("--repeat", type=int, default=2, help="Measure each thing this many times.")
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: sp-dspy's).")
    parser.add_argument("--json", type=Path, help="Also write the figures to this file.")
    args = parser.parse_args(argv)
    figures: dict[str, Any] = {"cpus": os.cpu_count(), "layouts": [], "main_job": []}
    with tempfile.TemporaryDirectory(prefix="bench-local-") as tmp:
        for attempt in range(args.repeat):
            if args.only in (None, "layouts"):
                pair: dict[str, dict[str, Any]] = {}
                layouts: tuple[Literal["official", "prefix"], ...] = ("official", "prefix")
                for layout in layouts:
                    load = load_now()
                    pair[layout] = {
                        **run_layout(layout, args.cases, args.threads, Path(tmp)),
                        "load_1min": load,
                    }
                    print(json.dumps(pair[layout]), flush=True)
                ratio = pair["official"]["wall_s"] / pair["prefix"]["wall_s"]
                figures["layouts"].append({**pair, "ratio_official_over_prefix": round(ratio, 2)})
                print(f"run {attempt + 1}: official / prefix wall time = {ratio:.2f}x", flush=True)
            if args.only in (None, "main-job"):
                load = load_now()
                job = {**run_main_job(Path(tmp) / f"main-{attempt}"), "load_1min": load}
                figures["main_job"].append(job)
                print(json.dumps(job), flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
