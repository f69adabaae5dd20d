"""Core benchmark of issue 2: load+validate, ``sp-dspy score`` end to end, memory.

What it measures on the full-size synthetic benchmark (3,000 cases, ~78k rules,
~75 MB; ``make_synthetic.py``, generated when missing):

- **load+validate**: ``sp_dspy.load_benchmark`` (JSON parse, legacy normalisation,
  pydantic validation, consistency checks, content hash) in a fresh process, timed
  around the call; the import time is reported separately. **scoring views** is the
  same for ``load_scoring_cases`` (what ``score`` reads) without its parse cache.
- **score**: ``sp-dspy score PRED --dataset SYN --json OUT`` from process start to
  exit, exactly as a user runs it (1,000 bootstrap resamples for the 95% CIs, the
  default), and the same on a per-rule judgment file with ``--per-rule``. *warm*
  runs find the dataset's scoring views in the parse cache (the untimed warm-up run
  stored them; the cache lives in a temporary ``SP_DSPY_CACHE_DIR``), *cold* runs
  pass ``--no-data-cache`` and validate the 75 MB file every time.
- **CPU and peak memory**: user+system CPU seconds and the maximum resident set size
  of each child process (``os.wait4`` rusage, so each figure belongs to one process).
  CPU time varies less than wall time when other jobs share the machine.
- **context**: ``sp-dspy --help`` (the CLI's start-up floor) and ``score --n-boot 0``
  (the same without confidence intervals).
- **baseline**: with ``--baseline-src DIR`` (a directory holding another version's
  ``sp_dspy`` package, e.g. ``git archive REV sp_dspy | tar -x -C DIR``), that
  version's ``score`` on the same files, for before/after comparisons.
- **reference**: with ``--reference-src DIR`` (a checkout of the reference harness,
  ``git clone https://github.com/jiacheng-z01/SafePyramid DIR``; it needs ``pyyaml``
  in the interpreter), the reference's own ``score`` on the same files, interleaved
  with ours so machine load hits both alike. Without it that comparison is skipped.

The predictions and judgments are random but seeded, in the reference harness's
record format (contract section 4): exact, partial, empty, refused, parse-failed,
errored, output-capped and missing cases. Every figure is the min / median / max of
``--repeat`` fresh processes after one untimed warm-up run (page cache, ``.pyc``).
Children run with ``PYTHONDONTWRITEBYTECODE`` removed from their environment, so
they use compiled bytecode as an installed package does (every command alike,
the reference's included); otherwise each run would recompile the sources.

    python benchmarks/bench_core.py
    python benchmarks/bench_core.py --reference-src ../SafePyramid --repeat 7
    python benchmarks/bench_core.py --baseline-src /tmp/before

Not a test: timings depend on the machine. Figures are in ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "_data"
DEFAULT_DATASET = DATA / "synthetic.json"
PYTHON = sys.executable
SP_DSPY = str(Path(PYTHON).with_name("sp-dspy"))
CLONE_HINT = "git clone https://github.com/jiacheng-z01/SafePyramid /path/to/SafePyramid"

#: Share of cases per outcome in the generated predictions (the rest are partial).
OUTCOMES = (("exact", 0.30), ("empty", 0.05), ("refused", 0.06), ("parse_failed", 0.05))
OUTCOMES_RARE = (("error", 0.02), ("capped", 0.02), ("missing", 0.03))
WORDS = [
    "rule",
    "conversation",
    "chatbot",
    "user",
    "disclosed",
    "consent",
    "policy",
    "verified",
    "turn",
    "request",
    "data",
]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _outcome(rng: random.Random) -> str:
    roll = rng.random()
    for name, share in (*OUTCOMES, *OUTCOMES_RARE):
        if roll < share:
            return name
        roll -= share
    return "partial"


def _rules(case: dict[str, Any]) -> list[dict[str, Any]]:
    rubric = case.get("rubric") or {}
    return [*rubric.get("violations", []), *rubric.get("non_violations", [])]


def _prediction(rng: random.Random, case: dict[str, Any], outcome: str) -> list[int]:
    gt = sorted(case["ground_truth_violations"])
    if outcome == "exact":
        return gt
    if outcome == "empty":
        return []
    kept = [r for r in gt if rng.random() > 0.3]
    others = [e["rule"] for e in _rules(case) if e["rule"] not in gt]
    extra = rng.sample(others, k=min(len(others), rng.choice((0, 0, 1, 1, 2, 3))))
    return sorted({*kept, *extra})


def policy_record(rng: random.Random, case: dict[str, Any], index: int, outcome: str) -> dict[str, Any]:
    """One per-policy result line as the reference harness writes it (contract section 4)."""
    pred = _prediction(rng, case, outcome)
    analysis = _text(rng, rng.randint(60, 220))
    refused, parse_failed = outcome == "refused", outcome == "parse_failed"
    completion = 65_000 if outcome == "capped" else rng.randint(200, 4_000)
    gt = set(case["ground_truth_violations"])
    record: dict[str, Any] = {
        "id": case["id"],
        "index": index,
        "predicted_label": "unsafe" if pred or refused else "safe",
        "confidence": None,
        "analysis": "" if refused else analysis,
        "final": "I cannot evaluate this conversation." if refused else json.dumps({"analysis": analysis}),
        "refused": refused,
        "parse_failed": parse_failed,
        "model_name": "synthetic-guard",
        "timestamp": f"2026-01-01T00:{index // 60 % 60:02d}:{index % 60:02d}",
    }
    if not refused and (not parse_failed or rng.random() < 0.5):
        record["violated_rules"] = pred
        record["applicable_exceptions"] = []
    if outcome == "error":
        record["error"] = "APITimeoutError: request timed out"
    prompt = len(case["policy"]) // 4 + len(case["conversation"]) // 4
    record["usage"] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    record["policy_length"] = len(case["policy"])
    record["structured_scores"] = {
        "rule_match": set(pred) == gt,
        "false_positives": sorted(set(pred) - gt),
        "false_negatives": sorted(gt - set(pred)),
        "n_union": len(set(pred) | gt),
        "n_disagreement": len(set(pred) ^ gt),
        "refused": refused,
        "parse_failed": parse_failed,
    }
    return record


def judgment_lines(rng: random.Random, case: dict[str, Any], outcome: str) -> list[dict[str, Any]]:
    """Per-rule judgments of one case as the reference writes them (``kind: judgment``)."""
    rules = _rules(case)
    modifiers: dict[int, int] = {}
    for entry in rules:
        if entry["type"] in ("exception", "conditional"):
            for base in entry.get("paired_with") or []:
                modifiers[base] = modifiers.get(base, 0) + 1
    gt = set(case["ground_truth_violations"])
    lines = []
    for entry in rules:
        if entry["type"] == "conditional":
            continue
        refused = outcome == "refused" or rng.random() < 0.03
        pred = (entry["rule"] in gt) != (rng.random() < 0.12)
        lines.append(
            {
                "kind": "judgment",
                "cid": case["id"],
                "level": case["level"],
                "rule": entry["rule"],
                "rule_type": entry["type"],
                "n_bundled": len(entry.get("paired_with") or [])
                if entry["type"] == "exception"
                else modifiers.get(entry["rule"], 0),
                "gt": entry["rule"] in gt,
                "pred": False if refused else pred,
                "refused": refused,
                "raw_label": None if refused else ("unsafe" if pred else "safe"),
                "source": "refused" if refused else "label",
            }
        )
    return lines


def write_results(cases: Sequence[dict[str, Any]], out_dir: Path, seed: int = 0) -> tuple[Path, Path]:
    """Write ``predictions.jsonl`` and ``judgments.jsonl`` for ``cases`` (seeded)."""
    rng = random.Random(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    predictions, judgments = out_dir / "predictions.jsonl", out_dir / "judgments.jsonl"
    with (
        predictions.open("w", encoding="utf-8") as pred_file,
        judgments.open("w", encoding="utf-8") as judg_file,
    ):
        for index, case in enumerate(cases, start=1):
            outcome = _outcome(rng)
            if outcome == "missing":
                continue
            pred_file.write(json.dumps(policy_record(rng, case, index, outcome), ensure_ascii=False) + "\n")
            for line in judgment_lines(rng, case, outcome):
                judg_file.write(json.dumps(line) + "\n")
        for level in ("L0", "L1", "L2"):
            judg_file.write(
                json.dumps({"kind": "summary", "level": level, "model": "synthetic-guard"}) + "\n"
            )
    return predictions, judgments


@dataclass
class Series:
    """Repeated measurements of one command: wall and CPU seconds, peak RSS (MiB)."""

    name: str
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)

    def add(self, wall: float, cpu: float, rss: float | None) -> None:
        self.seconds.append(wall)
        self.cpu.append(cpu)
        if rss is not None:
            self.rss_mib.append(rss)

    def row(self) -> str:
        s = sorted(self.seconds)
        rss = f"{max(self.rss_mib):.0f}" if self.rss_mib else "-"
        return (
            f"| {self.name} | {s[0]:.2f} | {median(s):.2f} | {s[-1]:.2f} | "
            f"{min(self.cpu):.2f} | {median(self.cpu):.2f} | {rss} |"
        )


def run_timed(cmd: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, float, float, str]:
    """Run ``cmd`` to completion: (wall s, CPU s, peak RSS MiB of that child, stdout)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}\n{err.read().decode()[-2000:]}")
        return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.read().decode()


LOAD_SNIPPET = """
import json, resource, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from sp_dspy import load_benchmark
t1, c1 = time.perf_counter(), time.process_time()
bench = load_benchmark(sys.argv[1])
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"import": [t1 - t0, c1 - c0], "load": [t2 - t1, c2 - c1], "cases": len(bench.cases),
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
VIEWS_SNIPPET = """
import json, resource, sys, time
from sp_dspy._data import load_scoring_cases
t0, c0 = time.perf_counter(), time.process_time()
views = load_scoring_cases(sys.argv[1], cache=False)
t1, c1 = time.perf_counter(), time.process_time()
print(json.dumps({"load": [t1 - t0, c1 - c0], "cases": len(views.cases),
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def reference_env(src: Path) -> tuple[dict[str, str], str] | None:
    """PYTHONPATH for a reference checkout (repository root or its ``src``), or None."""
    for root in (src / "src", src):
        if (root / "safepyramid" / "cli.py").exists():
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env["PYTHONPATH"] = str(root)
            probe = subprocess.run([PYTHON, "-c", "import yaml"], env=env, capture_output=True)
            if probe.returncode != 0:
                print(f"reference skipped: {PYTHON} cannot import yaml (pip install pyyaml)")
                return None
            return env, str(root)
    print(f"reference skipped: no safepyramid/cli.py under {src} or {src / 'src'}")
    return None


def measure(args: argparse.Namespace) -> list[Series]:
    dataset: Path = args.dataset
    if not dataset.exists():
        subprocess.run(
            [PYTHON, str(ROOT / "benchmarks" / "make_synthetic.py"), "--out", str(dataset)], check=True
        )
    # Written by a child process: a parent holding the parsed 75 MB dataset would show
    # in every child's peak RSS (Linux hands a forked child its parent's high-water mark).
    prepare = [PYTHON, __file__, "--prepare-only", "--dataset", str(dataset), "--seed", str(args.seed)]
    n_cases = json.loads(subprocess.run(prepare, check=True, capture_output=True, text=True).stdout)["cases"]
    predictions, judgments = DATA / "predictions.jsonl", DATA / "judgments.jsonl"
    size = lambda p: f"{p.stat().st_size / 1e6:.1f} MB"  # noqa: E731
    print(
        f"dataset {dataset} ({n_cases} cases, {size(dataset)}); {predictions} ({size(predictions)}); "
        f"{judgments} ({size(judgments)})"
    )
    cache_dir = tempfile.mkdtemp(prefix="bench-core-cache-")
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env = dict(base_env, LITELLM_LOCAL_MODEL_COST_MAP="True", SP_DSPY_CACHE_DIR=cache_dir)
    json_out = str(DATA / "score.json")
    score = [SP_DSPY, "score", "--dataset", str(dataset), "--json", json_out]
    cold = [*score, "--no-data-cache"]
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "sp-dspy --help": ([SP_DSPY, "--help"], env),
        "sp-dspy score (CIs), warm": ([*score, str(predictions)], env),
        "sp-dspy score (CIs), cold": ([*cold, str(predictions)], env),
        "sp-dspy score --n-boot 0 (no CIs), warm": ([*score, str(predictions), "--n-boot", "0"], env),
        "sp-dspy score --per-rule (CIs), warm": ([*score, str(judgments), "--per-rule"], env),
        "sp-dspy score --per-rule (CIs), cold": ([*cold, str(judgments), "--per-rule"], env),
    }
    if args.reference_src is None:
        print(f"reference comparison skipped: pass --reference-src DIR, a checkout made with `{CLONE_HINT}`")
    elif (found := reference_env(args.reference_src)) is not None:
        ref_env, where = found
        print(f"reference: {where}")
        ref = [PYTHON, "-P", "-m", "safepyramid.cli", "score"]
        commands["reference score"] = ([*ref, str(predictions), "--dataset", str(dataset)], ref_env)
        commands["reference score --per-rule"] = (
            [*ref, str(judgments), "--dataset", str(dataset), "--per-rule"],
            ref_env,
        )
    if args.baseline_src is not None:
        if not (args.baseline_src / "sp_dspy" / "cli" / "__init__.py").exists():
            raise SystemExit(f"--baseline-src: no sp_dspy/cli/__init__.py under {args.baseline_src}")
        baseline_env = dict(env, PYTHONPATH=str(args.baseline_src))
        # -P: no script directory or cwd in front of PYTHONPATH (it would import this tree).
        base = [
            PYTHON,
            "-P",
            "-c",
            "from sp_dspy.cli import main; main()",
            "score",
            "--dataset",
            str(dataset),
        ]
        base += ["--json", json_out]
        commands["baseline score (CIs)"] = ([*base, str(predictions)], baseline_env)
        commands["baseline score --per-rule (CIs)"] = ([*base, str(judgments), "--per-rule"], baseline_env)
    load, imports = "load+validate (in process)", "import sp_dspy (in process)"
    views = "scoring views, no cache (in process)"
    series = {name: Series(name) for name in [load, views, imports, *commands]}
    load_cmd = [PYTHON, "-c", LOAD_SNIPPET, str(dataset)]
    views_cmd = [PYTHON, "-c", VIEWS_SNIPPET, str(dataset)]
    try:
        for attempt in range(args.repeat + 1):  # attempt 0 is the untimed warm-up
            *_, out = run_timed(load_cmd, env)
            figures = json.loads(out)
            *_, out = run_timed(views_cmd, env)
            view_figures = json.loads(out)
            for name, (cmd, cmd_env) in commands.items():
                wall, cpu, rss, _ = run_timed(cmd, cmd_env)
                if attempt:
                    series[name].add(wall, cpu, rss)
            if attempt:
                series[load].add(figures["load"][0], figures["load"][1], figures["rss_mib"])
                series[views].add(view_figures["load"][0], view_figures["load"][1], view_figures["rss_mib"])
                series[imports].add(figures["import"][0], figures["import"][1], None)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    return list(series.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--reference-src", type=Path, default=None, help="checkout of the reference harness")
    parser.add_argument("--baseline-src", type=Path, default=None, help="directory with another sp_dspy")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per command (after one warm-up)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the raw figures here")
    parser.add_argument("--prepare-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.prepare_only:
        cases = json.loads(args.dataset.read_text(encoding="utf-8"))["data"]
        write_results(cases, DATA, seed=args.seed)
        print(json.dumps({"cases": len(cases)}))
        return
    series = measure(args)
    load_avg = os.getloadavg()[0]
    print(f"\n{os.cpu_count()} CPUs, load average {load_avg:.2f} at the end; {args.repeat} runs each\n")
    print(
        "| measurement | wall min s | wall median s | wall max s | CPU min s | CPU median s | peak RSS MiB |"
    )
    print("|---|---|---|---|---|---|---|")
    for item in series:
        print(item.row())
    if args.json is not None:
        args.json.write_text(json.dumps([vars(s) for s in series], indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
