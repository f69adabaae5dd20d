"""Load a user's own policy cases (``--benchmark custom``) from JSONL; README documents the format.

Each line becomes the case ``Guard`` builds from its policy and conversation, plus its
gold answer; a bad line is one error naming ``FILE:LINE``, the case id and the field.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Final

from .._errors import DataError
from ._inputs import Source, guard_case
from ._loader import Benchmark, check_unicode
from ._scan import MAX_DATASET_BYTES, decode_utf8, json_object_line, read_regular
from ._schema import Case, Rubric
from ._source import sample_path

CUSTOM_BENCHMARK: Final = "custom"
CUSTOM_DOMAIN: Final = "custom"
EXAMPLE_NAME: Final = "custom_example.jsonl"
_FIELDS: Final = frozenset({"id", "policy", "messages", "conversation", "violated_rules", "group", "tags"})


def example_path() -> Path:
    """The bundled example of the format: a fictional app's policy, written for this project."""
    return sample_path(EXAMPLE_NAME)


def load_custom(dataset: str | None, *, lenient: bool = False) -> Benchmark:
    """The cases of a custom JSONL file (``None`` or ``"sample"``: the bundled example)."""
    path = example_path() if dataset in (None, "sample") else Path(str(dataset)).expanduser()
    if not path.exists():
        raise DataError(f"{path}: no such file (give --dataset your cases as JSONL, one case per line)")
    blob = read_regular(path, "dataset", max_bytes=MAX_DATASET_BYTES)
    text = decode_utf8(blob, path)
    cases: list[Case] = []
    reasons: list[str] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            case = custom_case(json_object_line(line, f"{path}:{number}"), where=f"{path}:{number}")
            if case.id in seen:
                raise DataError(
                    f"{path}:{number}: case {case.id}: id: duplicate (first on line {seen[case.id]})"
                )
        except DataError as error:
            if not lenient:
                raise
            reasons.append(str(error))
            continue
        seen[case.id] = number
        cases.append(case)
    if not cases and not reasons:
        raise DataError(f"{path}: no cases (expected one JSON object per line)")
    return Benchmark(
        cases=cases,
        source=str(path),
        content_hash=hashlib.sha256(blob).hexdigest(),
        skipped=len(reasons),
        skipped_reasons=reasons,
        benchmark=CUSTOM_BENCHMARK,
    )


def custom_case(row: dict[str, Any], *, where: str) -> Case:
    """The ``Case`` of one line; ``DataError`` ``WHERE: case ID: field: why`` when it is malformed."""
    case_id = row.get("id")
    if not isinstance(case_id, str) or not case_id.strip():
        raise DataError(f"{where}: id: expected a non-empty string, got {case_id!r:.40}")
    at = f"{where}: case {case_id}"
    unknown = sorted(set(row) - _FIELDS)
    if unknown:
        raise DataError(
            f"{at}: unknown field(s) {', '.join(unknown)} (expected {', '.join(sorted(_FIELDS))})"
        )
    if ("messages" in row) == ("conversation" in row):
        raise DataError(f"{at}: give exactly one of messages (chat messages) or conversation (Turn N text)")
    field = "messages" if "messages" in row else "conversation"
    if field == "messages" and not isinstance(row[field], list):
        raise DataError(f"{at}: messages: expected a list of chat messages, got {type(row[field]).__name__}")
    base = guard_case(
        row.get("policy"),
        row[field],
        policy_source=Source(f"{at}: policy"),
        conversation_source=Source(f"{at}: {field}"),
    )
    entries = base.rubric.non_violations
    violated = _rule_list(row.get("violated_rules"), {entry.rule for entry in entries}, at)
    group = row.get("group")
    if group is not None and (not isinstance(group, str) or not group.strip()):
        raise DataError(f"{at}: group: expected a non-empty string, got {group!r:.40}")
    tags = row.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(tag, str) and tag.strip() for tag in tags):
        raise DataError(f"{at}: tags: expected a list of non-empty strings, got {tags!r:.60}")
    case = base.model_copy(
        update={
            "id": case_id,
            "domain": CUSTOM_DOMAIN,
            "ground_truth_violations": violated,
            "rubric": Rubric(
                violations=[e for e in entries if e.rule in violated],
                non_violations=[e for e in entries if e.rule not in violated],
            ),
            "benchmark": CUSTOM_BENCHMARK,
            "group": group,
            "tags": list(dict.fromkeys(tag.strip() for tag in tags)),
        }
    )
    try:
        check_unicode(case)
    except DataError as exc:
        raise DataError(f"{at}: {exc}") from None
    return case


def _rule_list(value: object, rules: set[int], at: str) -> list[int]:
    if value is None:
        raise DataError(f"{at}: violated_rules: missing (use [] when no rule is violated)")
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise DataError(f"{at}: violated_rules: expected a list of rule numbers, got {value!r:.60}")
    twice = sorted({rule for rule in value if value.count(rule) > 1})
    if twice:
        raise DataError(f"{at}: violated_rules: rule(s) {twice} listed more than once")
    unknown = sorted(set(value) - rules)
    if unknown:
        raise DataError(f"{at}: violated_rules: rule(s) {unknown} are not numbered in the policy")
    return sorted(value)
