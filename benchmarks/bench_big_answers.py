"""Peak memory of ``eval`` and ``score`` when the model returns huge answers (issue 24).

A per-rule ``eval`` against a loopback stub whose every verdict carries a reason of
``--answer-mb`` megabytes, and ``score`` over a results file of such judgments, each in a
fresh process whose peak resident set size (RSS) the kernel reports (``wait4``). A record
keeps at most ``MAX_ANSWER_CHARS`` of each model text (a prefix, with the full length and
hash in ``clipped``), so the peak stays flat however long the answers are.

    python benchmarks/bench_big_answers.py                       # 10 MB reasons, 1 and 4 cases
    python benchmarks/bench_big_answers.py --answer-mb 10 --cases 1,4 --score-lines 64

Figures depend on the machine; this is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sp_dspy import load_benchmark  # noqa: E402
from tests._stub_server import StubServer, chat_completion  # noqa: E402

CLI = [sys.executable, "-c", "from sp_dspy.cli import main; main()"]


#: Runs a command and prints its peak RSS (KiB) last on stderr. A process forked from this one
#: would report this one's RSS as its own peak (``ru_maxrss`` survives ``exec``), so a small,
#: fresh process starts each command and reads its peak.
MEASURE = (
    "import os, subprocess, sys\n"
    "child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "_, status, usage = os.wait4(child.pid, 0)\n"
    "print(usage.ru_maxrss, file=sys.stderr)\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def peak_rss_mb(command: list[str], cwd: Path) -> tuple[float, int]:
    """Run ``command``; its peak RSS in MB (the kernel's ``ru_maxrss``) and its exit status."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env["SP_DSPY_CACHE_DIR"] = str(cwd / "cache")  # --cache: a cache of its own, removed with it
    done = subprocess.run([sys.executable, "-c", MEASURE, *command], cwd=cwd, env=env, capture_output=True)
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    if done.returncode not in (0, 3):
        sys.stderr.write("\n".join(lines[:-1]) + "\n")
    return int(lines[-1]) / 1024, done.returncode


def huge_verdicts(size: int) -> Any:
    """A responder: every verdict is ``not_violated``, with a reason of ``size`` characters."""
    content = json.dumps({"verdict": "not_violated", "reason": "r" * size})

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        return chat_completion(content, model="stub", prompt_tokens=100, completion_tokens=10)

    return reply


def judgment_lines(count: int, size: int) -> list[str]:
    """``count`` judgment lines of the bundled sample's cases, each with a reason of ``size`` characters."""
    lines = []
    cases = load_benchmark().cases
    for case in cases:
        rules = [*case.rubric.violations, *case.rubric.non_violations] if case.rubric else []
        for entry in rules:
            if len(lines) == count:
                return lines
            gold = entry.rule in case.ground_truth_violations
            judgment = {"kind": "judgment", "cid": case.id, "rule": entry.rule, "gt": gold, "pred": False}
            lines.append(json.dumps({**judgment, "reason": "r" * size}))
    return lines


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--answer-mb", type=float, default=10.0, help="Megabytes of each verdict's reason.")
    parser.add_argument("--cases", default="1,4", help="Case counts of the per-rule evals (comma-separated).")
    parser.add_argument("--score-lines", default="16,64", help="Judgment counts of the scored files.")
    parser.add_argument("--cache", action="store_true", help="Run eval with a (temporary) response cache on.")
    args = parser.parse_args()
    size = int(args.answer_mb * 1024 * 1024)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env_cache = ["--no-cache"] if not args.cache else []
        with StubServer(responder=huge_verdicts(size)) as stub:
            for cases in [int(n) for n in args.cases.split(",")]:
                out = work / f"eval{cases}"
                flags = f"--protocol per-rule --lm openai/stub --api-base {stub.url} --limit {cases} -q --run-id r"
                command = [*CLI, "eval", *flags.split(), "--output-dir", str(out), *env_cache]
                rss, code = peak_rss_mb(command, work)
                results = out / "per_rule_r_stub.jsonl"
                units = sum(1 for _ in results.open()) if results.exists() else 0
                written = results.stat().st_size / 1e6 if results.exists() else 0.0
                print(f"eval per-rule: {units} judgments of {args.answer_mb:g} MB reasons: peak RSS {rss:,.0f} MB "
                      f"(exit {code}; results file {written:,.1f} MB)")  # fmt: skip
        for count in [int(n) for n in args.score_lines.split(",")]:
            path = work / f"judgments{count}.jsonl"
            with path.open("w", encoding="utf-8") as file:
                for line in judgment_lines(count, size):
                    file.write(line + "\n")
            rss, code = peak_rss_mb([*CLI, "score", str(path)], work)
            print(f"score: {count} judgments of {args.answer_mb:g} MB reasons "
                  f"({path.stat().st_size / 1e6:,.0f} MB file): peak RSS {rss:,.0f} MB (exit {code})")  # fmt: skip


if __name__ == "__main__":
    main()
