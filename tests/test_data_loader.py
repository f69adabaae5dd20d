"""Loader: every legacy variant loads; every bad input names file, case and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sp_dspy._data import load_benchmark, load_file
from sp_dspy._errors import DataError
from tests._factories import raw_case, write_dataset


def test_object_and_bare_list_load_the_same(tmp_path: Path) -> None:
    cases = [raw_case("a-1-l0"), raw_case("a-1-l1", level="L1")]
    wrapped = load_file(write_dataset(tmp_path / "w.json", cases))
    bare = load_file(write_dataset(tmp_path / "b.json", cases, wrap=False))
    assert [c.id for c in wrapped.cases] == [c.id for c in bare.cases] == ["a-1-l0", "a-1-l1"]
    assert wrapped.content_hash != bare.content_hash  # hash of the bytes, not of the cases


def test_missing_id_gets_position_before_filtering(tmp_path: Path) -> None:
    first, second = raw_case("x-l0"), raw_case("x-l1", level="L1")
    del first["id"], second["id"]
    path = write_dataset(tmp_path / "d.json", [first, second])
    loaded = load_benchmark(str(path), level="L1")
    assert [c.id for c in loaded.cases] == ["case-1"]


def test_legacy_user_prompt_and_nested_failure_modes(tmp_path: Path) -> None:
    case = raw_case("leg-1-l1", level="L1", types={3: "distractor"})
    case["user_prompt"] = case.pop("conversation")
    fm = case.pop("failure_mode_metadata")
    case["rubric"]["failure_mode_metadata"] = {**fm, "conditional_violations": [1]}
    loaded = load_file(write_dataset(tmp_path / "d.json", [case]))
    only = loaded.cases[0]
    assert only.conversation.startswith("Turn 1 - User")
    assert only.failure_mode_metadata.contradicted_rules == [1]
    assert only.failure_mode_metadata.distractor_rules == [3]


def test_top_level_failure_mode_fields_and_bare_int_paired_with(tmp_path: Path) -> None:
    case = raw_case(
        "leg-2-l1",
        level="L1",
        rules={1: "Must not share addresses.", 2: "If the user is the owner, Rule 1 is waived."},
        gt=[],
        types={2: "exception"},
    )
    case.pop("failure_mode_metadata")
    case["waived_rules"] = [1]
    case["decisive_rules"] = [1]
    case["rubric"]["non_violations"][1]["paired_with"] = 1
    only = load_file(write_dataset(tmp_path / "d.json", [case])).cases[0]
    assert only.failure_mode_metadata.waived_rules == [1]
    assert only.failure_mode_metadata.decisive_rules == [1]
    assert only.rubric.by_rule()[2].paired_with == [1]


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"data": [\n  {"id": "a",}\n]}', encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.json:2:14: invalid JSON"):
        load_file(path)


def test_missing_file_names_its_path(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"nope\.json: no such file"):
        load_benchmark(str(tmp_path / "nope.json"))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda c: c.pop("domain"), r"case bad-1-l0: field domain: Field required"),
        (lambda c: c.update(level="L7"), r"case bad-1-l0: field level"),
        (lambda c: c.update(ground_truth_violations="1"), r"case bad-1-l0: field ground_truth_violations"),
        (lambda c: c.update(ground_truth_violations=[1, 9]), r"rule\(s\) \[9\] not in the rubric"),
        (
            lambda c: c.update(policy="no numbered rules here"),
            r"field rubric: rule\(s\) \[1, 2, 3\] do not appear",
        ),
        (lambda c: c["rubric"]["violations"][0].update(type="fuzzy"), r"field rubric\.violations\.0\.type"),
    ],
)
def test_bad_data_names_case_and_field(tmp_path: Path, mutate: object, message: str) -> None:
    case = raw_case("bad-1-l0")
    mutate(case)  # type: ignore[operator]
    path = write_dataset(tmp_path / "d.json", [raw_case("ok-1-l0"), case])
    with pytest.raises(DataError, match=message) as info:
        load_file(path)
    assert str(info.value).startswith(f"{path}:")
    assert "\n" not in str(info.value)


def test_duplicate_ids_are_an_error_and_lenient_skips(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "d.json", [raw_case("dup-l0"), raw_case("dup-l0"), raw_case("ok-l0")])
    with pytest.raises(DataError, match="field id: duplicate case id"):
        load_file(path)
    loaded = load_file(path, lenient=True)
    assert [c.id for c in loaded.cases] == ["dup-l0", "ok-l0"]
    assert loaded.skipped == 1


def test_error_points_at_the_line_of_the_case(tmp_path: Path) -> None:
    bad = raw_case("late-1-l0")
    bad.pop("policy")
    path = write_dataset(tmp_path / "d.json", [raw_case("a-l0"), bad])
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if '"late-1-l0"' in text)
    with pytest.raises(DataError, match=rf"d\.json:{line}: case late-1-l0: field policy"):
        load_file(path)


def test_filters_level_domain_start_limit(tmp_path: Path) -> None:
    cases = [
        raw_case(f"c-{i}-l{i % 3}", level=f"L{i % 3}", domain="privacy" if i < 4 else "fraud")
        for i in range(6)
    ]
    path = write_dataset(tmp_path / "d.json", cases)
    assert [c.id for c in load_benchmark(str(path), level="L0").cases] == ["c-0-l0", "c-3-l0"]
    assert [c.id for c in load_benchmark(str(path), domain="fraud").cases] == ["c-4-l1", "c-5-l2"]
    assert [c.id for c in load_benchmark(str(path), start_idx=1, limit=2).cases] == ["c-1-l1", "c-2-l2"]
    with pytest.raises(DataError, match="--level"):
        load_benchmark(str(path), level="L9")


def test_hub_unreachable_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    def offline(**_: object) -> str:
        raise OSError("Cannot reach huggingface.co: Connection refused\nmore detail")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    with pytest.raises(DataError) as info:
        load_benchmark("ByteDance/SafePyramid")
    text = str(info.value)
    assert "\n" not in text and "--dataset PATH" in text and "benchmark.json" in text


def test_hub_download_uses_evidence_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import huggingface_hub

    asked: dict[str, object] = {}
    path = write_dataset(tmp_path / "benchmark_with_evidence.json", [raw_case()])

    def fake_download(**kwargs: object) -> str:
        asked.update(kwargs)
        return str(path)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    loaded = load_benchmark("ByteDance/SafePyramid", with_evidence=True)
    assert asked == {
        "repo_id": "ByteDance/SafePyramid",
        "filename": "benchmark_with_evidence.json",
        "repo_type": "dataset",
    }
    assert loaded.cases[0].id == "test-001-l0"


def test_evidence_fields_are_kept(tmp_path: Path) -> None:
    case = raw_case()
    case["rubric"]["violations"][0]["evidence"] = [{"validator": "v1", "quote": "12 Elm Street"}]
    only = load_file(write_dataset(tmp_path / "d.json", [case])).cases[0]
    dumped = only.rubric.violations[0].model_dump()
    assert dumped["evidence"] == [{"validator": "v1", "quote": "12 Elm Street"}]
    assert json.loads(only.model_dump_json())["id"] == "test-001-l0"


def test_failure_mode_block_of_wrong_type_is_named(tmp_path: Path) -> None:
    case = raw_case("fm-1-l0")
    case["failure_mode_metadata"] = ["not", "a", "mapping"]
    with pytest.raises(DataError, match="case fm-1-l0: field failure_mode_metadata"):
        load_file(write_dataset(tmp_path / "d.json", [case]))
