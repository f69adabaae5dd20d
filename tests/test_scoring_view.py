"""Scoring views: the slim loader gives exactly the full loader's views, errors and skips."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sp_dspy._data import (
    Case,
    ScoringCase,
    filter_cases,
    load_file,
    load_scoring_cases,
    sample_path,
    scoring_view,
    scoring_views,
)
from sp_dspy._data._scan import rule_numbers
from sp_dspy._data._scoring_slim import slim_views, slim_views_of
from sp_dspy._errors import DataError
from sp_dspy._metrics import (
    JudgmentRecord,
    PolicyRecord,
    aggregate_judgments,
    attribute_errors,
    case_outcomes,
    classify_failure,
    judgment_diagnostics,
    score,
)
from tests._factories import raw_case, write_dataset

FIXTURES = Path(__file__).parent / "fixtures" / "scoring"
LEGACY: dict[str, Any] = json.loads((FIXTURES / "legacy_variants.json").read_text(encoding="utf-8"))
BAD: dict[str, Any] = json.loads((FIXTURES / "bad_variants.json").read_text(encoding="utf-8"))


def _write(tmp_path: Path, name: str, document: Any) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    return path


def test_sample_takes_the_slim_path_and_matches_the_full_loader() -> None:
    path = sample_path()
    slim = slim_views(path.read_bytes())
    assert slim is not None and len(slim) > 10
    assert slim == scoring_views(load_file(path).cases)
    assert any(view.waived_rules for view in slim) and any(view.contradicted_rules for view in slim)
    assert load_scoring_cases(None, cache=False).cases == slim


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_legacy_variants_give_the_full_loaders_views(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, name, LEGACY[name])
    full = scoring_views(load_file(path).cases)
    loaded = load_scoring_cases(path, cache=False)
    assert loaded.cases == full
    assert loaded.skipped == 0 and loaded.source == str(path)
    # Only the current schema may take the slim path; legacy spellings need normalising.
    assert (slim_views(path.read_bytes()) is not None) == (name == "bare_list")


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_data_gives_the_full_loaders_error(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, name, BAD[name])
    assert slim_views(path.read_bytes()) is None
    with pytest.raises(DataError) as full:
        load_file(path)
    with pytest.raises(DataError) as slim:
        load_scoring_cases(path, cache=False)
    assert str(slim.value) == str(full.value)


def test_invalid_json_gives_the_full_loaders_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"data": [\n  {"id": "a",}\n]}', encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.json:2:14: invalid JSON"):
        load_scoring_cases(path, cache=False)


@pytest.mark.parametrize("name", ["gt_not_in_rubric", "duplicate_id", "severity_not_int"])
def test_lenient_skips_like_the_full_loader(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, name, BAD[name])
    full = load_file(path, lenient=True)
    loaded = load_scoring_cases(path, lenient=True, cache=False)
    assert loaded.cases == scoring_views(full.cases)
    assert full.skipped == 1
    assert (loaded.skipped, loaded.skipped_reasons) == (full.skipped, full.skipped_reasons)


def test_view_keeps_what_the_scorer_reads() -> None:
    raw = raw_case("v-1-l1", level="L1", gt=[1], types={2: "distractor", 3: "exception"})
    raw["failure_mode_metadata"].update(waived_rules=[1], contradicted_rules=[2], decisive_rules=[1])
    raw["rubric"]["non_violations"].append({"rule": 2, "text": "again", "type": "conditional"})
    view = ScoringCase.from_case(Case.model_validate(raw))
    assert msgspec.structs.asdict(view) == {
        "id": "v-1-l1",
        "domain": "privacy",
        "level": "L1",
        "ground_truth_violations": [1],
        "rule_types": {
            1: "decisive",
            2: "conditional",
            3: "exception",
        },  # a repeated rule keeps its last type
        "distractor_rules": [2],
        "waived_rules": [1],
        "contradicted_rules": [2],
        "decisive_rules": [1],
    }
    # The round trips of the parse cache (JSON) and of the worker's pipe (msgpack).
    assert msgspec.json.decode(msgspec.json.encode(view), type=ScoringCase) == view
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(view), type=ScoringCase) == view
    assert scoring_view(view) is view


def test_evidence_and_unknown_fields_stay_on_the_slim_path(tmp_path: Path) -> None:
    case = raw_case("ev-1-l0")
    case["rubric"]["violations"][0]["evidence"] = [{"validator": "v1", "quote": "12 Elm Street"}]
    case["notes"] = {"anything": [1, "x"]}
    case["user_prompt"] = "kept as an extra field when conversation is there"
    path = write_dataset(tmp_path / "d.json", [case])
    assert slim_views(path.read_bytes()) == scoring_views(load_file(path).cases)


def _outcome(load: Any, path: Path) -> Any:
    """What loading ``path`` gives: the scoring views, or the error's message."""
    try:
        return scoring_views(load(path).cases)
    except DataError as error:
        return str(error)


def _case_bytes(case: dict[str, Any], old: bytes = b"", new: bytes = b"") -> bytes:
    """A one-case document's bytes, with ``old`` (which must be there) replaced by ``new``."""
    document = json.dumps({"data": [case]}).encode()
    assert old in document
    return document.replace(old, new) if old else document


# Values pydantic's lax mode may coerce but msgspec rejects: the slim path must step
# aside for the full loader, whichever way that decides.
_LAX: dict[str, bytes] = {
    "rule_as_text": _case_bytes(raw_case(), b'"rule": 1', b'"rule": "1"'),
    "gt_as_float": _case_bytes(
        raw_case(), b'"ground_truth_violations": [1]', b'"ground_truth_violations": [1.0]'
    ),
    "severity_as_text": _case_bytes(raw_case(extra={"severity": 2}), b'"severity": 2', b'"severity": "2"'),
    "applies_as_text": _case_bytes(raw_case(), b'"decisive"}', b'"decisive", "applies": "yes"}'),
    "bool_as_rule": _case_bytes(raw_case(), b'"rule": 3', b'"rule": true'),
}


@pytest.mark.parametrize("name", sorted(_LAX))
def test_values_only_lax_validation_accepts_leave_the_slim_path(tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.json"
    path.write_bytes(_LAX[name])
    assert slim_views(path.read_bytes()) is None
    assert _outcome(lambda p: load_scoring_cases(p, cache=False), path) == _outcome(load_file, path)


def test_bytes_that_are_not_utf8_load_as_the_full_loader_reads_them(tmp_path: Path) -> None:
    # The full loader reads such bytes with replacement characters. In the
    # conversation (never decoded by the slim path) they change nothing scoring reads;
    # in a field the slim path decodes, it steps aside.
    in_conversation = tmp_path / "conversation.json"
    in_conversation.write_bytes(_case_bytes(raw_case(), b"Where does Dana", b"Where \xff\xfe does Dana"))
    in_domain = tmp_path / "domain.json"
    in_domain.write_bytes(_case_bytes(raw_case(), b'"privacy"', b'"priv\xffacy"'))
    assert slim_views(in_conversation.read_bytes()) == scoring_views(load_file(in_conversation).cases)
    assert slim_views(in_domain.read_bytes()) is None
    assert _outcome(lambda p: load_scoring_cases(p, cache=False), in_domain) == _outcome(load_file, in_domain)


def test_a_repeated_key_keeps_its_last_value_on_both_paths(tmp_path: Path) -> None:
    path = tmp_path / "repeated.json"
    path.write_bytes(
        _case_bytes(raw_case("first-l0"), b'"id": "first-l0"', b'"id": "first-l0", "id": "last-l0"')
    )
    views = slim_views(path.read_bytes())
    assert views is not None and [v.id for v in views] == ["last-l0"]
    assert views == scoring_views(load_file(path).cases)


def test_slim_views_of_a_file_and_the_ways_it_declines(tmp_path: Path) -> None:
    raw = sample_path().read_bytes()
    assert slim_views_of(sample_path()) == slim_views(raw) == scoring_views(load_file(sample_path()).cases)
    assert slim_views(b'{"data": []}') == []
    cases = [raw_case(f"d-{i}-l0") for i in range(7)]
    cases[6]["id"] = "d-0-l0"  # a duplicate id, found after six good cases
    assert slim_views(json.dumps({"data": cases}).encode()) is None
    assert slim_views(b"not json") is None
    (tmp_path / "empty.json").write_bytes(b"")
    assert slim_views_of(tmp_path / "empty.json") is None  # cannot be mapped: the full loader words why
    assert slim_views_of(tmp_path / "missing.json") is None


def _full_rule_numbers(policy: str) -> set[int]:
    return {int(n) for n in re.findall(r"\n\s*(\d+)\.(?=\s)", "\n" + policy)}


_POLICY_PIECES = st.sampled_from(
    ["\n", " ", "\t", "\r", "1", "2", "13", ".", "a", "\u00a0", "\u0663", "\u2028"]
)


@given(st.lists(_POLICY_PIECES, max_size=30).map("".join))
def test_rule_numbers_match_the_loader(policy: str) -> None:
    assert rule_numbers(policy) == _full_rule_numbers(policy)


def test_filter_cases_works_on_views() -> None:
    views = load_scoring_cases(None, cache=False).cases
    full = load_file(sample_path()).cases
    picked = filter_cases(views, level="L1,L2", domain="privacy", start_idx=1, limit=3)
    assert [v.id for v in picked] == [
        c.id for c in filter_cases(full, level="L1,L2", domain="privacy", start_idx=1, limit=3)
    ]


def test_metrics_accept_cases_and_views_alike() -> None:
    full = load_file(sample_path()).cases
    views = scoring_views(full)
    records = {
        c.id: PolicyRecord(
            id=c.id, violated_rules=[*c.ground_truth_violations[1:], *c.failure_mode_metadata.waived_rules]
        )
        for c in full
    }
    assert score(full, records, n_boot=50).model_dump() == score(views, records, n_boot=50).model_dump()
    for case, view, outcome in zip(full, views, case_outcomes(full, records), strict=True):
        assert classify_failure(case, outcome) == classify_failure(view, outcome)
        assert attribute_errors(case, outcome) == attribute_errors(view, outcome)
    judgments = [
        JudgmentRecord(cid=c.id, rule=rule, pred=rule in c.ground_truth_violations)
        for c in full
        for rule in sorted(scoring_view(c).rule_types)
    ]
    assert aggregate_judgments(full, judgments) == aggregate_judgments(views, judgments)
    assert judgment_diagnostics(full, judgments) == judgment_diagnostics(views, judgments)
