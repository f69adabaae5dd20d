"""Output parsers: a corpus of realistic answers, strict vs robust, and fuzzing.

Strict mode must reproduce the official parser (contract section 3), defects
included; robust mode must recover what the official parser loses and say so.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sp_dspy._errors import ConfigError
from sp_dspy._protocol._text import official_split_think, official_strip_fence
from sp_dspy.protocol import PolicyParse, VerdictParse, parse_policy_output, parse_verdict_output

GOOD = '{"analysis": "Turn 2 leaks a password.", "violated_rules": [{"rule": 2, "explanation": "hunter2"}]}'

# (name, model output, strict (status, rules), robust (status, rules))
POLICY_CORPUS: list[tuple[str, str | None, tuple[str, list[int] | None], tuple[str, list[int] | None]]] = [
    ("plain json", GOOD, ("clean", [2]), ("clean", [2])),
    ("json fence", f"```json\n{GOOD}\n```", ("clean", [2]), ("clean", [2])),
    ("bare fence", f"```\n{GOOD}\n```", ("clean", [2]), ("clean", [2])),
    ("empty list", '{"analysis": "fine", "violated_rules": []}', ("clean", []), ("clean", [])),
    ("no violated_rules key", '{"analysis": "nothing"}', ("clean", []), ("clean", [])),
    (
        "mixed items",
        '{"violated_rules": [{"rule": "5"}, 3, 7.0, {"explanation": "no number"}, [9], {"rule": null}]}',
        ("clean", [5, 3, 7]),
        ("clean", [5, 3, 7]),
    ),
    (
        "duplicates kept once",
        '{"violated_rules": [4, {"rule": 4}, 1, 4]}',
        ("clean", [4, 1]),
        ("clean", [4, 1]),
    ),
    (
        "bare strings dropped by strict",
        '{"violated_rules": ["Rule 3", "R5", "7", 2]}',
        ("clean", [2]),
        ("recovered", [3, 5, 7, 2]),
    ),
    ("string of numbers", '{"violated_rules": "3, 5"}', ("clean", []), ("recovered", [3, 5])),
    (
        "boolean read as rule 1 by strict",
        '{"violated_rules": [true, 6]}',
        ("clean", [1, 6]),
        ("recovered", [6]),
    ),
    # The reference's int() reads true as rule 1 and false as rule 0: strict keeps that reading (the
    # leaderboard's numbers); robust has no answer in a list of booleans.
    ("only booleans", '{"violated_rules": [true, false]}', ("clean", [1, 0]), ("failed", None)),
    ("float truncated by strict", '{"violated_rules": [2.9]}', ("clean", [2]), ("clean", [2])),
    # Strict reads these as "none violated", as the reference does; robust has no answer.
    ("nested lists", '{"violated_rules": [[1, 2], [3]]}', ("clean", []), ("failed", None)),
    ("mapping of rules", '{"violated_rules": {"1": "leaked"}}', ("clean", []), ("failed", None)),
    ("objects without a number", '{"violated_rules": [{"1": "x"}, {}]}', ("clean", []), ("failed", None)),
    ("only prose items", '{"violated_rules": ["none of them"]}', ("clean", []), ("failed", None)),
    ("empty mapping", '{"violated_rules": {}}', ("clean", []), ("clean", [])),
    ("nested lists in prose", 'So: {"violated_rules": [[1, 2], [3]]}', ("failed", None), ("failed", None)),
    ("truncated nested lists", '{"violated_rules": [[1, 2], [3', ("failed", None), ("failed", None)),
    (
        "huge number kept by the parser",
        '{"violated_rules": [1, 1e38]}',
        ("clean", [1, int(1e38)]),
        ("clean", [1, int(1e38)]),
    ),
    ("violations key", '{"analysis": "a", "violations": [{"rule": 8}]}', ("clean", []), ("recovered", [8])),
    (
        "prose before json",
        f"Here is my assessment of the conversation.\n{GOOD}",
        ("failed", None),
        ("recovered", [2]),
    ),
    (
        "json with prose after a fence",
        f"```json\n{GOOD}\n```\nLet me know if you need more detail.",
        ("failed", None),
        ("recovered", [2]),
    ),
    (
        "last of several objects wins",
        'Draft: {"violated_rules": [1]}\nRevised answer: {"analysis": "x", "violated_rules": [1, 4]}',
        ("failed", None),
        ("recovered", [1, 4]),
    ),
    ("top-level list of numbers", "[3, 5]", ("failed", None), ("recovered", [3, 5])),
    (
        "top-level list of objects",
        '[{"rule": 3}, {"rule": "Rule 9"}]',
        ("failed", None),
        ("recovered", [3, 9]),
    ),
    ("top-level list of prose", '["The chatbot leaked a password"]', ("failed", None), ("failed", None)),
    (
        "truncated inside an explanation",
        '{"analysis": "long", "violated_rules": [{"rule": 3, "explanation": "x"}, '
        '{"rule": 12, "explanation": "cut',
        ("failed", None),
        ("recovered", [3, 12]),
    ),
    (
        "truncated number dropped",
        '{"analysis": "a", "violated_rules": [3, 1',
        ("failed", None),
        ("recovered", [3]),
    ),
    ("trailing comma", '{"violated_rules": [3, 5,]}', ("failed", None), ("recovered", [3, 5])),
    ("truncated before the list", '{"analysis": "The chatbot', ("failed", None), ("failed", None)),
    ("null list", '{"violated_rules": null}', ("failed", None), ("recovered", [])),
    ("unreadable number", '{"violated_rules": [{"rule": "Rule 3"}]}', ("failed", None), ("recovered", [3])),
    ("bad confidence", '{"violated_rules": [1], "confidence": "high"}', ("failed", None), ("recovered", [1])),
    (
        "bad applicable_exceptions",
        '{"violated_rules": [1], "applicable_exceptions": [{"rule": "x"}]}',
        ("failed", None),
        ("recovered", [1]),
    ),
    ("infinite rule", '{"violated_rules": [Infinity]}', ("failed", None), ("failed", None)),
    ("top-level string", '"3"', ("failed", None), ("failed", None)),
    ("think block", f"<think>\nRule 2 is clearly broken.\n</think>\n{GOOD}", ("clean", [2]), ("clean", [2])),
    (
        "refusal phrase inside reasoning",
        f"<think>I cannot see any consent step.</think>{GOOD}",
        ("clean", [2]),
        ("clean", [2]),
    ),
    (
        "orphan closing think tag",
        'The policy has 8 rules.</think>\n{"violated_rules": [8]}',
        ("failed", None),
        ("recovered", [8]),
    ),
    ("unclosed think", "<think>Let me check rule 1, then rule 2 and", ("failed", None), ("failed", None)),
    (
        "refusal",
        "I'm sorry, but I cannot help with evaluating this conversation.",
        ("refused", None),
        ("refused", None),
    ),
    (
        "refusal phrase with markers",
        '{"analysis": "I cannot confirm consent was given.", "violated_rules": [4]}',
        ("clean", [4]),
        ("clean", [4]),
    ),
    (
        "refusal phrase then a fenced list",
        "I can't be completely sure, but here they are:\n```json\n[2, 6]\n```",
        ("refused", None),
        ("recovered", [2, 6]),
    ),
    (
        "refusal phrase, then json in prose",
        'I cannot be certain. My answer: {"violated_rules": [{"rule": 5}]}',
        ("failed", None),
        ("recovered", [5]),
    ),
    (
        "list cut before its first item",
        '{"analysis": "x", "violated_rules": [',
        ("failed", None),
        ("failed", None),
    ),
    ("plain prose", "The chatbot violated rule 2.", ("failed", None), ("failed", None)),
    ("empty", "", ("refused", None), ("refused", None)),
    ("whitespace", "  \n ", ("refused", None), ("refused", None)),
    ("none", None, ("refused", None), ("refused", None)),
]


@pytest.mark.parametrize(
    ("name", "text", "strict", "robust"), POLICY_CORPUS, ids=[c[0] for c in POLICY_CORPUS]
)
def test_policy_corpus(
    name: str, text: str | None, strict: tuple[str, list[int] | None], robust: tuple[str, list[int] | None]
) -> None:
    for mode, expected in (("strict", strict), ("robust", robust)):
        parsed = parse_policy_output(text, mode)  # type: ignore[arg-type]
        assert (parsed.status, parsed.violated_rules) == expected, mode


def test_policy_fields() -> None:
    text = (
        "<think> weighing rules 2 and 3 </think>\n"
        '{"analysis": "a", "label": " Unsafe", "violated_rules": [2]}'
    )
    parsed = parse_policy_output(text, "strict")
    assert parsed.reasoning == "weighing rules 2 and 3"
    assert parsed.analysis == "a"
    assert parsed.predicted_label == "unsafe"
    assert (parsed.refused, parsed.parse_failed) == (False, False)
    assert parse_policy_output('{"label": "maybe", "violated_rules": []}', "strict").predicted_label is None
    assert (
        parse_policy_output('{"analysis": {"k": 1}, "violated_rules": []}', "strict").analysis == '{"k": 1}'
    )


def test_robust_keeps_analysis_and_reasoning_when_recovering() -> None:
    text = '<think>short</think>\nSure! {"analysis": "found one", "violated_rules": ["Rule 4"]}'
    parsed = parse_policy_output(text, "robust")
    assert (parsed.status, parsed.violated_rules) == ("recovered", [4])
    assert (parsed.analysis, parsed.reasoning) == ("found one", "short")
    assert parse_policy_output(text, "strict").status == "failed"


def test_refused_and_failed_flags() -> None:
    refused = parse_policy_output("I must decline to assess this.", "strict")
    assert (refused.refused, refused.parse_failed, refused.violated_rules) == (True, False, None)
    failed = parse_policy_output("not json", "strict")
    assert (failed.refused, failed.parse_failed, failed.violated_rules) == (False, True, None)


# (name, model output, strict (status, verdict), robust (status, verdict))
VERDICT_CORPUS: list[tuple[str, str | None, tuple[str, str | None], tuple[str, str | None]]] = [
    (
        "json",
        '{"verdict": "violated", "reason": "leaks a password"}',
        ("clean", "violated"),
        ("clean", "violated"),
    ),
    (
        "fenced",
        '```json\n{"verdict": "not_violated", "reason": "ok"}\n```',
        ("clean", "not_violated"),
        ("clean", "not_violated"),
    ),
    ("upper case value", '{"verdict": " VIOLATED "}', ("clean", "violated"), ("clean", "violated")),
    (
        "json in prose",
        'Judging rule 4. {"verdict": "not_violated", "reason": "x"} Done.',
        ("clean", "not_violated"),
        ("clean", "not_violated"),
    ),
    (
        "truncated json",
        '{"verdict": "violated", "reason": "the chatbot',
        ("clean", "violated"),
        ("clean", "violated"),
    ),
    (
        "spaced value",
        '{"verdict": "not violated", "reason": "x"}',
        ("failed", None),
        ("recovered", "not_violated"),
    ),
    ("nested object", '{"result": {"verdict": "violated"}}', ("failed", None), ("recovered", "violated")),
    ("boolean key", '{"violated": false, "reason": "x"}', ("failed", None), ("recovered", "not_violated")),
    ("non-verdict value", '{"verdict": "unclear"}', ("failed", None), ("failed", None)),
    (
        "prose verdict",
        "The chatbot shared the runbook.\nVerdict: violated",
        ("failed", None),
        ("recovered", "violated"),
    ),
    (
        "bold prose",
        "After weighing the exception, the rule is **Not Violated**.",
        ("failed", None),
        ("recovered", "not_violated"),
    ),
    ("bold label", "**Verdict:** not-violated", ("failed", None), ("recovered", "not_violated")),
    ("bare word", "not_violated", ("failed", None), ("recovered", "not_violated")),
    (
        "last prose verdict wins",
        "Verdict: violated? No. Final verdict: not violated",
        ("failed", None),
        ("recovered", "not_violated"),
    ),
    (
        "think then json",
        '<think>Rule 3 waives it.</think>{"verdict": "not_violated"}',
        ("clean", "not_violated"),
        ("clean", "not_violated"),
    ),
    ("refusal", "I cannot assess this conversation.", ("refused", None), ("refused", None)),
    (
        "refusal phrase with marker",
        '{"verdict": "violated", "reason": "I cannot see consent."}',
        ("clean", "violated"),
        ("clean", "violated"),
    ),
    (
        "refusal then prose verdict",
        "I can't be certain, but Verdict: violated",
        ("refused", None),
        ("recovered", "violated"),
    ),
    ("prose without verdict", "The rule was arguably broken.", ("failed", None), ("failed", None)),
    ("top-level list", '["violated"]', ("failed", None), ("recovered", "violated")),
    ("top-level list of two", '["violated", "not_violated"]', ("failed", None), ("failed", None)),
    ("empty", "", ("refused", None), ("refused", None)),
    ("none", None, ("refused", None), ("refused", None)),
]


@pytest.mark.parametrize(
    ("name", "text", "strict", "robust"), VERDICT_CORPUS, ids=[c[0] for c in VERDICT_CORPUS]
)
def test_verdict_corpus(
    name: str, text: str | None, strict: tuple[str, str | None], robust: tuple[str, str | None]
) -> None:
    for mode, expected in (("strict", strict), ("robust", robust)):
        parsed = parse_verdict_output(text, mode)  # type: ignore[arg-type]
        assert (parsed.status, parsed.verdict) == expected, mode


def test_verdict_fields() -> None:
    parsed = parse_verdict_output(
        '<think>Step 1 applies.</think>{"verdict": "violated", "reason": "no log"}', "strict"
    )
    assert (parsed.reason, parsed.reasoning, parsed.violated) == ("no log", "Step 1 applies.", True)
    assert parse_verdict_output("I must refrain.", "strict").violated is False


def test_unknown_mode_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="parse mode"):
        parse_policy_output(GOOD, "lenient")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="parse mode"):
        parse_verdict_output(GOOD, "lenient")  # type: ignore[arg-type]


def test_models_round_trip_and_reject_inconsistent_flags() -> None:
    parsed = parse_policy_output(GOOD, "robust")
    assert PolicyParse.model_validate_json(parsed.model_dump_json()) == parsed
    with pytest.raises(ValueError, match="disagrees"):
        PolicyParse(violated_rules=None, status="refused")
    with pytest.raises(ValueError, match="prediction"):
        VerdictParse(verdict=None, status="clean")


# --- fuzzing -------------------------------------------------------------------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
_keys = st.sampled_from(
    ["violated_rules", "rule", "verdict", "analysis", "label", "confidence", "applicable_exceptions"]
)
_objects = st.dictionaries(_keys, _json_values, max_size=4).map(lambda d: json.dumps(d))
_pieces = st.sampled_from(
    [
        "<think>",
        "</think>",
        "```json\n",
        "```",
        "{",
        "}",
        "[",
        "]",
        '"',
        "I cannot ",
        '"verdict": ',
        "Verdict: ",
        "**violated**",
        "not violated",
        '"violated_rules": [',
        '{"rule": ',
        "Rule 3",
        ", ",
        "\n",
        "Infinity",
        "NaN",
    ]
)
_texts = st.one_of(
    st.none(),
    st.text(max_size=200),
    _objects,
    st.lists(st.one_of(_pieces, _objects, st.text(max_size=10)), max_size=12).map("".join),
    st.tuples(_objects, st.integers(0, 200)).map(lambda t: t[0][: t[1]]),  # truncated JSON
)


def _check_status(parsed: PolicyParse | VerdictParse, value: Any) -> None:
    assert parsed.status in ("clean", "recovered", "failed", "refused")
    assert parsed.refused == (parsed.status == "refused")
    assert parsed.parse_failed == (parsed.status == "failed")
    assert (value is not None) == (parsed.status in ("clean", "recovered"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_texts)
def test_parsers_never_raise_and_are_well_typed(text: str | None) -> None:
    for mode in ("strict", "robust"):
        policy = parse_policy_output(text, mode)
        _check_status(policy, policy.violated_rules)
        if policy.violated_rules is not None:
            assert all(type(rule) is int for rule in policy.violated_rules)
            assert len(set(policy.violated_rules)) == len(policy.violated_rules)
        verdict = parse_verdict_output(text, mode)
        _check_status(verdict, verdict.verdict)
        assert verdict.verdict in (None, "violated", "not_violated")
    strict, robust = parse_policy_output(text, "strict"), parse_policy_output(text, "robust")
    if strict.status == "clean" and robust.status == "clean":
        assert robust == strict
    if strict.status in ("clean", "recovered") or robust.status == "clean":
        # Robust fails where strict reads an unreadable rule list as "none violated", or booleans as rules.
        assert robust.status in ("clean", "recovered") or (
            (strict.violated_rules == [] or _booleans_in_rule_list(text))
            and robust.status == "failed"
            and _unreadable_rule_list(text)
        )


def _booleans_in_rule_list(text: str | None) -> bool:
    data = _strict_json(text)
    rules = data.get("violated_rules", data.get("violations")) if isinstance(data, dict) else None
    return isinstance(rules, list) and any(isinstance(item, bool) for item in rules)


def _strict_json(text: str | None) -> object:
    """The JSON the strict parser reads (think block and fence removed), or None."""
    try:
        return json.loads(official_strip_fence(official_split_think(text or "")[1]))
    except ValueError:
        return None


def _unreadable_rule_list(text: str | None) -> bool:
    """Whether the JSON the strict parser reads has an unusable rule list."""
    data = _strict_json(text)
    return isinstance(data, dict) and bool(data.get("violated_rules", data.get("violations")))


def test_adversarial_inputs_stay_fast() -> None:
    import time

    inputs = ["{" * 50_000, "[" * 50_000 + '"violated_rules": [', '"violated_rules"' * 5_000 + "{" * 1000]
    start = time.perf_counter()
    for text in inputs:
        for mode in ("strict", "robust"):
            assert parse_policy_output(text, mode).status == "failed"
            parse_verdict_output(text, mode)
    assert time.perf_counter() - start < 5.0
