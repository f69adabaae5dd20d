"""The faults x wires matrix of ``eval --batch`` (issue 34): units lost, requests paid twice, keys
found, tracebacks, on a loopback provider that misbehaves in each way (``tests/_batch_faults.py``).

Every scenario runs the CLI of a checkout in child processes (a kill scenario SIGKILLs one), then
``--resume`` on the healed provider; the figures are counted over the whole scenario.

    python benchmarks/bench_batch_faults.py                         # this checkout, both wires
    python benchmarks/bench_batch_faults.py --code /path/to/other/checkout --wires openai

A measurement, not a test (``tests/test_batch_faults.py`` asserts the figures of this checkout).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests._batch_faults import FAULTS, KILLS, child_runner, run_scenario  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--code", type=Path, default=ROOT, help="the checkout whose CLI runs (default: this one)"
    )
    parser.add_argument("--wires", default="openai,anthropic")
    parser.add_argument("--scenarios", default=",".join(FAULTS + KILLS))
    args = parser.parse_args()
    run = child_runner(args.code.resolve())
    totals = {"lost": 0, "paid_twice": 0, "keys": 0, "tracebacks": 0}
    for scenario in args.scenarios.split(","):
        for wire in args.wires.split(","):
            if scenario == "kill-upload" and wire == "anthropic":
                continue  # no upload on this wire: the create call carries the requests
            with tempfile.TemporaryDirectory() as tmp:
                outcome = run_scenario(scenario, wire, Path(tmp), run, args.code.resolve())
            print(outcome.row(), flush=True)
            totals["lost"] += outcome.units_lost
            totals["paid_twice"] += outcome.paid_twice
            totals["keys"] += len(outcome.keys_found)
            totals["tracebacks"] += outcome.tracebacks
    print("totals:", totals)


if __name__ == "__main__":
    main()
