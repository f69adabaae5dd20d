"""Seeded result files for the full-size synthetic benchmark, in the reference's format.

``bench_core.py`` scores them: a per-policy predictions file (``policy_record`` per
case, with exact, partial, empty, refused, parse-failed, errored, output-capped and
missing cases) and a per-rule judgment file (``judgment_lines``), both as the
reference harness writes them (contract section 4).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
