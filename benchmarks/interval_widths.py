"""95% interval widths when the bootstrap draws cases (before) and the benchmark's units (now).

Three data sets: the bundled SafePyramid sample scored with a results file (default: the
recorded gpt-4o-mini per-policy run the tests use), the issue's synthetic case (40 conversations
whose three levels always share one outcome), and a 1,000-conversation synthetic set whose
levels agree with probability ``--agree`` (otherwise each level draws its own outcome).
"Before" is ``bootstrap_matrix(..., units=None)``: the same draws the case bootstrap made.

    python benchmarks/interval_widths.py [--results FILE] [--n-boot 2000]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from sp_dspy._benchmarks import load_benchmark
from sp_dspy._data._schema import Case
from sp_dspy._metrics import (
    PolicyRecord,
    case_outcomes,
    compare_cells,
    outcome_matrix,
    read_result_files,
    resolve_records,
)
from sp_dspy._metrics._bootstrap import bootstrap_matrix

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RESULTS = ROOT / "tests" / "fixtures" / "report" / "official_per_policy.jsonl"
POLICY = "Rules:\n1. Rule number 1 applies.\n2. Rule number 2 applies."


def synthetic(count: int, agree: float, seed: int) -> tuple[list[Case], dict[str, PolicyRecord]]:
    """``count`` conversations x 3 levels; a level copies its conversation's outcome with
    probability ``agree``, else draws its own (each outcome: exact with probability 0.6)."""
    rng = random.Random(seed)
    cases, records = [], {}
    for n in range(count):
        shared = rng.random() < 0.6
        for level in ("L0", "L1", "L2"):
            case_id = f"syn-{n:04d}-{level.lower()}"
            exact = shared if rng.random() < agree else rng.random() < 0.6
            cases.append(
                Case(
                    id=case_id,
                    domain="synthetic",
                    level=level,
                    conversation="Turn 1 - User: hi",
                    policy=POLICY,
                    ground_truth_violations=[1],
                )
            )
            records[case_id] = PolicyRecord(id=case_id, violated_rules=[1] if exact else [1, 2])
    return cases, records


def widths(
    cases: list[Case], records: dict[str, PolicyRecord], n_boot: int
) -> dict[str, tuple[float, float]]:
    """ALL and L0 widths of RMR and RMR@1.0: (cases drawn, units drawn)."""
    outcomes = [o for o in case_outcomes(cases, records) if not o.excluded]
    rows: dict[str, tuple[float, float]] = {}
    for cell, members in (("ALL", outcomes), ("L0", [o for o in outcomes if o.level == "L0"])):
        matrix = outcome_matrix(members)
        before = bootstrap_matrix(matrix, name=cell, n_boot=n_boot)
        after = bootstrap_matrix(matrix, name=cell, n_boot=n_boot, units=[o.unit for o in members])
        assert before is not None and after is not None
        for metric, label in (("rmr_avg", "RMR"), ("rmr_exact", "RMR@1.0")):
            rows[f"{cell} {label}"] = (
                before[metric][1] - before[metric][0],
                after[metric][1] - after[metric][0],
            )
    return rows


def paired_width(
    cases: list[Case], a: dict[str, PolicyRecord], b: dict[str, PolicyRecord], n_boot: int
) -> float:
    ci = compare_cells(cases, a, b, n_boot=n_boot)["ALL"].paired.ci["rmr_avg"]
    return float("nan") if ci is None else ci[1] - ci[0]


def show(title: str, rows: dict[str, tuple[float, float]]) -> None:
    print(f"\n{title}\n  {'cell':<14}{'cases drawn':>12}{'units drawn':>13}{'ratio':>8}")
    for name, (before, after) in rows.items():
        print(f"  {name:<14}{before:>12.2f}{after:>13.2f}{before / after if after else float('nan'):>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    parser.add_argument("--n-boot", type=int, default=2000)
    parser.add_argument("--agree", type=float, default=0.7)
    args = parser.parse_args()

    sample = load_benchmark(None).cases
    records = resolve_records(sample, read_result_files([args.results]))
    units = len({case.unit for case in sample})
    show(f"Bundled sample ({len(sample)} cases, {units} conversations), {args.results.name}",
         widths(sample, records, args.n_boot))  # fmt: skip

    cases, same = synthetic(40, 1.0, seed=1)
    show("Synthetic: 40 conversations, levels always share one outcome", widths(cases, same, args.n_boot))

    cases, mixed = synthetic(1000, args.agree, seed=2)
    show(
        f"Synthetic: 1,000 conversations, levels agree with p = {args.agree}",
        widths(cases, mixed, args.n_boot),
    )
    _, other = synthetic(1000, args.agree, seed=3)
    alone = [case.model_copy(update={"group": case.id}) for case in cases]  # each case its own unit
    before, after = (
        paired_width(alone, mixed, other, args.n_boot),
        paired_width(cases, mixed, other, args.n_boot),
    )
    print(f"  {'paired ALL RMR':<14}{before:>12.2f}{after:>13.2f}{before / after:>8.2f}")


if __name__ == "__main__":
    main()
