"""Parity check: ``sp_dspy`` metrics against the reference harness's own aggregation code.

Generates random small datasets and random result files in the reference harness's
formats, scores each with the reference's functions (its ``load_benchmark``,
``load_records`` + ``aggregate_case_records``, and ``aggregate_judgments_to_case_metrics``
for per-rule judgments) and with ``sp_dspy`` (``load_benchmark``, ``read_result_files``,
``score``), and asserts that every key of every reference cell (``L0``, ``L1``, ``L2``,
``ALL``) is equal, exactly: counts, rounded percentages, ``None`` for empty cells.

The random files exercise what changes numbers: exact, partial, empty, over-long and
out-of-rubric predictions; refused, parse-failed (with and without a partial
prediction), errored, ``null``-prediction, output-capped (``--cap-aware`` on and off)
and missing records; flags set only inside ``structured_scores``; ``null`` flags;
numeric strings; duplicate ids within and across files (a later one wins); unknown
ids; blank and malformed lines (both skip them: ``--skip-bad-lines`` here); level
filters; levels absent from a dataset; cells where every case is excluded.

Per-rule judgment files carry no duplicate (case, rule) pairs: on duplicates the
reference double-counts (contract section 6) and ``sp_dspy`` de-duplicates, a
deliberate difference.

The reference is not part of this project: point ``--reference-src`` at a checkout
(``git clone https://github.com/jiacheng-z01/SafePyramid DIR``).

    python benchmarks/reference_parity.py --reference-src DIR [--datasets 300]

Exit status 0 when every compared value is equal, 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sp_dspy._benchmarks import load_benchmark  # noqa: E402
from sp_dspy._data import filter_cases  # noqa: E402
from sp_dspy._errors import DataError  # noqa: E402
from sp_dspy._metrics import read_result_files, score  # noqa: E402

LEVELS = ("L0", "L1", "L2")
DOMAINS = ("privacy", "fraud", "defamation", "specialized_advice")
TYPES = ("decisive", "distractor", "exception", "conditional")


def reference_modules(src: Path) -> dict[str, ModuleType]:
    """Import the reference's data, scoring, runner and per_rule modules from ``src``."""
    for root in (src / "src", src):
        if (root / "safepyramid" / "scoring.py").exists():
            sys.path.insert(0, str(root))
            names = ("data", "scoring", "runner", "per_rule")
            return {name: importlib.import_module(f"safepyramid.{name}") for name in names}
    raise SystemExit(f"no safepyramid/scoring.py under {src} or {src / 'src'}; clone the reference there")


def random_case(rng: random.Random, cid: str, level: str, domain: str) -> dict[str, Any]:
    """A schema-valid case: numbered rules in the policy, ground truth within the rubric."""
    n_rules = rng.randint(1, 14)
    entries = []
    for rule in range(1, n_rules + 1):
        kind = rng.choice(TYPES) if level != "L0" else rng.choice(TYPES[:2])
        entry: dict[str, Any] = {"rule": rule, "type": kind, "text": f"The chatbot must follow rule {rule}."}
        if kind in ("exception", "conditional"):
            entry["paired_with"] = [rng.randint(1, n_rules)]
        entries.append(entry)
    gt = sorted(rng.sample(range(1, n_rules + 1), k=min(n_rules, rng.choice((0, 1, 1, 2, 3, 5)))))
    rules_text = "\n".join(f"{e['rule']}. {e['text']}" for e in entries)
    distractors = [e["rule"] for e in entries if e["type"] == "distractor"]
    return {
        "id": cid,
        "domain": domain,
        "level": level,
        "conversation": "Turn 1 - User: hello\nTurn 1 - Chatbot: hi",
        "framework": "Synthetic framework." if level == "L2" else "",
        "policy": f"Check ALL rules below.\n\nRules:\n{rules_text}",
        "ground_truth_violations": gt,
        "rubric": {
            "violations": [e for e in entries if e["rule"] in gt],
            "non_violations": [e for e in entries if e["rule"] not in gt],
        },
        "failure_mode_metadata": {
            "distractor_rules": distractors,
            "waived_rules": [] if level == "L0" else rng.sample(range(1, n_rules + 1), k=min(1, n_rules)),
            "contradicted_rules": [] if level == "L0" else gt[:1],
        },
    }


def random_dataset(rng: random.Random) -> list[dict[str, Any]]:
    levels = rng.choice([LEVELS, LEVELS, LEVELS, ("L0",), ("L1", "L2"), ("L0", "L2")])
    cases: list[dict[str, Any]] = []
    for i in range(rng.randint(1, 45)):
        domain = rng.choice(DOMAINS)
        cases.extend(random_case(rng, f"{domain[:4]}-{i:03d}-{lv.lower()}", lv, domain) for lv in levels)
    return cases


def _prediction(rng: random.Random, case: dict[str, Any]) -> list[Any]:
    gt = case["ground_truth_violations"]
    n_rules = len(case["rubric"]["violations"]) + len(case["rubric"]["non_violations"])
    roll = rng.random()
    if roll < 0.3:
        pred: list[Any] = list(gt)
    elif roll < 0.4:
        pred = []
    elif roll < 0.45:
        pred = list(range(1, n_rules + 3))  # everything, and rules outside the rubric
    else:
        pred = sorted(
            {*(r for r in gt if rng.random() < 0.6), *rng.sample(range(1, n_rules + 2), k=rng.randint(0, 2))}
        )
    if pred and rng.random() < 0.05:
        pred[0] = str(pred[0])  # numeric strings: int() in both
    return pred


def random_record(rng: random.Random, case_id: str, case: dict[str, Any] | None) -> dict[str, Any]:
    """One per-policy record in the reference harness's result format, with edge cases."""
    record: dict[str, Any] = {"id": case_id, "model_name": "random"}
    if case is not None:
        record["violated_rules"] = _prediction(rng, case)
    else:
        record["violated_rules"] = [1]
    roll = rng.random()
    if roll < 0.06:
        record.update(refused=True, parse_failed=False)
        record.pop("violated_rules")
    elif roll < 0.10:
        record.update(refused=False, parse_failed=True)
        if rng.random() < 0.5:
            record.pop("violated_rules")
    elif roll < 0.12:
        record["error"] = "APIConnectionError: connection reset"
    elif roll < 0.14:
        record["violated_rules"] = None
    elif roll < 0.17:
        record["structured_scores"] = {rng.choice(["refused", "parse_failed"]): True}
    elif roll < 0.20:
        record["refused"] = None  # "not refused", as some files write it
    if rng.random() < 0.3:
        capped = rng.random() < 0.25
        record["usage"] = {
            "prompt_tokens": 100,
            "completion_tokens": rng.choice([65_000, 70_000]) if capped else rng.choice([10, 64_999, None]),
            "total_tokens": 100,
        }
    return record


def write_policy_files(rng: random.Random, cases: list[dict[str, Any]], folder: Path) -> list[Path]:
    by_id = {c["id"]: c for c in cases}
    files = []
    for index in range(rng.randint(1, 3)):
        lines = []
        for case_id in rng.sample(sorted(by_id), k=rng.randint(0, len(by_id))):
            lines.append(json.dumps(random_record(rng, case_id, by_id[case_id])))
            if rng.random() < 0.05:  # the same id again later in the file: the later line wins
                lines.append(json.dumps(random_record(rng, case_id, by_id[case_id])))
        if rng.random() < 0.3:
            lines.append(json.dumps(random_record(rng, "unknown-999-l0", None)))
        if rng.random() < 0.2:
            lines.insert(rng.randint(0, len(lines)), rng.choice(["", "   ", "{not json", '{"id": "trunc']))
        if rng.random() < 0.3:
            rng.shuffle(lines)
        path = folder / f"results_{index}.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files.append(path)
    return files


def write_judgment_files(rng: random.Random, cases: list[dict[str, Any]], folder: Path) -> list[Path]:
    """Judgment files in the reference's format; no (case, rule) pair appears twice."""
    judgments = [{"kind": "judgment", "cid": "unknown-999-l0", "rule": 1, "pred": True, "refused": False}]
    for case in cases:
        if rng.random() < 0.1:
            continue  # no judgment at all: excluded
        all_refused = rng.random() < 0.08
        gt = set(case["ground_truth_violations"])
        for entry in (*case["rubric"]["violations"], *case["rubric"]["non_violations"]):
            if entry["type"] == "conditional" or rng.random() < 0.1:
                continue
            refused = all_refused or rng.random() < 0.05
            pred = (entry["rule"] in gt) != (rng.random() < 0.2)
            judgments.append(
                {
                    "kind": "judgment",
                    "cid": case["id"],
                    "level": case["level"],
                    "rule": entry["rule"],
                    "rule_type": entry["type"],
                    "gt": entry["rule"] in gt,
                    "pred": False if refused else pred,
                    "refused": refused,
                }
            )
    rng.shuffle(judgments)
    cut = rng.randint(0, len(judgments))
    files = []
    for index, part in enumerate((judgments[:cut], judgments[cut:])):
        lines = [json.dumps(j) for j in part] + [
            json.dumps({"kind": "summary", "level": "L0", "model": "random"})
        ]
        path = folder / f"per_rule_{index}.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files.append(path)
    return files


def read_reference_judgments(files: list[Path]) -> list[dict[str, Any]]:
    """Judgment lines as the reference's ``score --per-rule`` collects them."""
    out = []
    for path in files:
        for line in path.read_text(encoding="utf-8").split("\n"):
            if line.strip():
                try:
                    value = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if value.get("kind") == "judgment":
                    out.append(value)
    return out


def compare(theirs: dict[str, Any], ours: dict[str, Any], label: str, mismatches: list[str]) -> int:
    """Every key of every reference cell must be equal; returns the number of values compared."""
    compared = 0
    for cell, values in theirs.items():
        for key, value in values.items():
            compared += 1
            got = ours.get(cell, {}).get(key, "<missing>")
            if got != value or type(got) is not type(value):
                mismatches.append(f"{label}: {cell}.{key}: reference {value!r}, sp_dspy {got!r}")
    return compared


def run(ref: dict[str, ModuleType], n_datasets: int, seed: int) -> int:
    mismatches: list[str] = []
    compared = {"per-policy": 0, "per-rule": 0}
    refused = 0  # datasets whose level filter selects nothing
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(n_datasets):
            rng = random.Random(f"{seed}-{index}")
            folder = Path(tmp) / str(index)
            folder.mkdir()
            cases = random_dataset(rng)
            dataset = folder / "benchmark.json"
            document: Any = cases if rng.random() < 0.3 else {"metadata": {}, "data": cases}
            dataset.write_text(json.dumps(document), encoding="utf-8")
            level = rng.choice([None, None, None, *LEVELS])
            _, ref_cases = ref["data"].load_benchmark(dataset=str(dataset), level=level)
            try:
                ours_cases = filter_cases(load_benchmark(dataset).cases, level=level)
            except DataError:
                # sp-dspy refuses a --level that selects no case (one line) where the
                # reference scores it as empty cells: both must find nothing there.
                if ref_cases:
                    mismatches.append(
                        f"dataset {index}: sp_dspy refused level {level}; the reference has cases"
                    )
                refused += 1
                continue
            policy_files = write_policy_files(rng, cases, folder)
            records = ref["runner"].load_records([str(p) for p in policy_files])
            results = read_result_files(policy_files, skip_bad_lines=True)
            for cap_aware in (False, True):
                theirs = ref["scoring"].aggregate_case_records(records, ref_cases, cap_aware=cap_aware)
                ours = score(ours_cases, results, cap_aware=cap_aware, ci=False).cells
                label = f"dataset {index} (level={level}, cap_aware={cap_aware})"
                compared["per-policy"] += compare(theirs, ours, label, mismatches)
            judgment_files = write_judgment_files(rng, cases, folder)
            theirs = ref["per_rule"].aggregate_judgments_to_case_metrics(
                read_reference_judgments(judgment_files), ref_cases
            )
            ours = score(ours_cases, read_result_files(judgment_files), per_rule=True, ci=False).cells
            compared["per-rule"] += compare(
                theirs, ours, f"dataset {index} per-rule (level={level})", mismatches
            )
    print(
        f"{n_datasets} random datasets (seed {seed}): compared {compared['per-policy']} per-policy and "
        f"{compared['per-rule']} per-rule cell values ({refused} level filter(s) selected no case: "
        f"refused by sp_dspy, empty for the reference); {len(mismatches)} mismatches"
    )
    for line in mismatches[:20]:
        print("  " + line)
    return 1 if mismatches else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference-src", type=Path, required=True, help="checkout of the reference harness")
    parser.add_argument("--datasets", type=int, default=300, help="number of random datasets")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sys.exit(run(reference_modules(args.reference_src), args.datasets, args.seed))


if __name__ == "__main__":
    main()
