"""Core benchmark of issue 2: load+validate, ``sp-dspy score`` end to end, memory.

What it measures on the full-size synthetic benchmark (3,000 cases, ~78k rules,
~86 MB; ``make_synthetic.py``, generated when missing):

- **load+validate**: ``sp_dspy.load_benchmark`` (JSON parse, legacy normalisation,
  pydantic validation, consistency checks, content hash) in a fresh process, timed
  around the call; the import time is reported separately.
- **score**: ``sp-dspy score PRED --dataset SYN --json OUT`` from process start to
  exit, exactly as a user runs it (1,000 bootstrap resamples for the 95% CIs, the
  default), and the same on a per-rule judgment file with ``--per-rule``.
- **CPU and peak memory**: user+system CPU seconds and the maximum resident set size
  of each child process (``os.wait4`` rusage). CPU time varies less than wall time
  when other jobs share the machine.
- **context**: ``sp-dspy --help`` (the CLI's start-up floor) and ``score --n-boot 0``
  (the same without confidence intervals).
- **floor**: a process that only imports sp_dspy and validates the dataset into ``Case``
  models (``load_benchmark``), and one that only ``json.load``s it: what any ``score``
  built on the one pydantic schema pays before reading a result, against the reference.
- **baseline**: with ``--baseline-src DIR`` (a directory holding another version's
  ``sp_dspy`` package, e.g. ``git archive REV sp_dspy | tar -x -C DIR``), that
  version's ``score`` on the same files, for before/after comparisons.
- **reference**: with ``--reference-src DIR`` (a checkout of the reference harness,
  ``git clone https://github.com/jiacheng-z01/SafePyramid DIR``; it needs ``pyyaml``
  in the interpreter), the reference's own ``score`` on the same files, interleaved
  with ours so machine load hits both alike, and each sp-dspy ``score`` over the
  reference's in the same repetition (**paired ratio**: its median, and in how many
  repetitions sp-dspy was at least as fast). Without it that comparison is skipped.

The predictions and judgments (``synthetic_results.py``) are random but seeded, in
the reference harness's record format (contract section 4): exact, partial, empty,
refused, parse-failed, errored, output-capped and missing cases. Every figure is the
min / median / max of ``--repeat`` fresh processes after one untimed warm-up run
(page cache, ``.pyc``).
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
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from synthetic_results import write_results

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "_data"
DEFAULT_DATASET = DATA / "synthetic.json"
PYTHON = sys.executable
SP_DSPY = str(Path(PYTHON).with_name("sp-dspy"))
CLONE_HINT = "git clone https://github.com/jiacheng-z01/SafePyramid /path/to/SafePyramid"


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


FLOOR_SNIPPET = "import sys; from sp_dspy import load_benchmark; load_benchmark(sys.argv[1])"
JSON_SNIPPET = "import json, sys; json.load(open(sys.argv[1], encoding='utf-8'))"


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
    # Written by a child process: a parent holding the parsed 86 MB dataset would show
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
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "sp-dspy --help": ([SP_DSPY, "--help"], env),
        "sp-dspy score (CIs)": ([*score, str(predictions)], env),
        "sp-dspy score --n-boot 0 (no CIs)": ([*score, str(predictions), "--n-boot", "0"], env),
        "sp-dspy score --per-rule (CIs)": ([*score, str(judgments), "--per-rule"], env),
        # The floor of one pydantic schema decoded once: a process that only imports
        # sp_dspy and validates the file into ``Case`` models (no CLI, results or scoring),
        # beside one that only ``json.load``s it, as the reference does.
        "floor: load_benchmark alone": ([PYTHON, "-c", FLOOR_SNIPPET, str(dataset)], env),
        "floor: json.load alone": ([PYTHON, "-c", JSON_SNIPPET, str(dataset)], env),
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
    series = {name: Series(name) for name in [load, imports, *commands]}
    load_cmd = [PYTHON, "-c", LOAD_SNIPPET, str(dataset)]
    try:
        for attempt in range(args.repeat + 1):  # attempt 0 is the untimed warm-up
            *_, out = run_timed(load_cmd, env)
            figures = json.loads(out)
            for name, (cmd, cmd_env) in commands.items():
                wall, cpu, rss, _ = run_timed(cmd, cmd_env)
                if attempt:
                    series[name].add(wall, cpu, rss)
            if attempt:
                series[load].add(figures["load"][0], figures["load"][1], figures["rss_mib"])
                series[imports].add(figures["import"][0], figures["import"][1], None)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    return list(series.values())


def print_paired(series: Sequence[Series]) -> None:
    """sp-dspy's time over the reference's (or a --baseline-src version's), pairing the runs of one repetition.

    The commands are interleaved, so run i of each command ran in the same stretch of
    machine load; the ratio of run i to run i cancels most of that load.
    """
    by_name = {s.name: s for s in series}
    pairs = [
        ("sp-dspy score (CIs)", "reference score"),
        ("sp-dspy score --n-boot 0 (no CIs)", "reference score"),
        ("sp-dspy score --per-rule (CIs)", "reference score --per-rule"),
        ("floor: load_benchmark alone", "reference score"),
        ("floor: json.load alone", "reference score"),
        ("sp-dspy score (CIs)", "baseline score (CIs)"),
        ("sp-dspy score --per-rule (CIs)", "baseline score --per-rule (CIs)"),
    ]
    for ours, theirs in pairs:
        if ours not in by_name or theirs not in by_name:
            continue
        ratios = [a / b for a, b in zip(by_name[ours].seconds, by_name[theirs].seconds, strict=True)]
        faster = sum(ratio <= 1 for ratio in ratios)
        print(
            f"{ours} / {theirs}: median ratio {median(ratios):.2f} "
            f"(sp-dspy at least as fast in {faster} of {len(ratios)} paired runs)"
        )


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
    print_paired(series)
    if args.json is not None:
        args.json.write_text(json.dumps([vars(s) for s in series], indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
