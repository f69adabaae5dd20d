"""Loader: every legacy variant loads; every bad input names file, case and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sp_dspy._benchmarks import load_benchmark
from sp_dspy._data._loader import load_file
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
        (
            lambda c: c["rubric"]["non_violations"].append(dict(c["rubric"]["non_violations"][0])),
            r"field rubric: rule\(s\) \[2\] listed more than once",
        ),
        (
            lambda c: c["rubric"]["non_violations"].append(dict(c["rubric"]["violations"][0])),
            r"field rubric: rule\(s\) \[1\] listed more than once",
        ),
        (
            lambda c: c.update(policy=c["policy"] + "\n3. A second rule three."),
            r"field policy: rule number\(s\) \[3\] used for more than one rule",
        ),
        (
            lambda c: c.update(ground_truth_violations=[True]),
            r"field ground_truth_violations\.0: expected a rule number, got the boolean true$",
        ),
        (
            lambda c: c["rubric"]["violations"][0].update(rule=True),
            r"field rubric\.violations\.0\.rule: expected a rule number, got the boolean true$",
        ),
        (
            lambda c: c["rubric"]["non_violations"][0].update(paired_with=[False]),
            r"field rubric\.non_violations\.0\.paired_with\.0: expected a rule number, got the boolean false",
        ),
        (
            lambda c: c["failure_mode_metadata"].update(distractor_rules=[True]),
            r"field failure_mode_metadata\.distractor_rules\.0: expected a rule number",
        ),
        (
            lambda c: (c.pop("failure_mode_metadata"), c.update(waived_rules=[True])),  # legacy: top level
            r"field failure_mode_metadata\.waived_rules\.0: expected a rule number",
        ),
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
    asked.pop("local_files_only", None)  # offline in tests: the cached copy is asked for
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


def test_numeric_rule_numbers_still_load_leniently(tmp_path: Path) -> None:
    case = raw_case("lax-1-l0")
    case["ground_truth_violations"] = ["1"]
    case["rubric"]["violations"][0]["rule"] = 1.0
    only = load_file(write_dataset(tmp_path / "d.json", [case])).cases[0]
    assert only.ground_truth_violations == [1] and only.rubric.violations[0].rule == 1


@pytest.mark.parametrize("where", ["case", "extra"])
def test_json_nested_too_deeply_is_one_line_naming_the_line(tmp_path: Path, where: str) -> None:
    deep = "[" * 5000 + "]" * 5000
    if where == "case":  # the whole case is the deep value
        text = '{"data": [\n' + json.dumps(raw_case("ok-l0")) + ",\n" + deep + "\n]}"
    else:  # a field of a case nobody reads
        text = '{"data": [\n' + json.dumps(raw_case("ok-l0"))[:-1] + ',\n"notes": ' + deep + "}\n]}"
    path = tmp_path / "deep.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as info:
        load_file(path)
    assert str(info.value) == f"{path}:3: invalid JSON: arrays and objects nested more than 500 levels deep"


def test_bytes_that_are_not_utf8_name_line_and_column(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "d.json", [raw_case("a-l0"), raw_case("b-l0")])
    lines = path.read_bytes().split(b"\n")
    target = next(i for i, line in enumerate(lines) if b"Dana lives" in line and i > 40)
    column = lines[target].index(b"Dana lives") + 6
    lines[target] = lines[target].replace(b"Dana lives", b"Dana \xe9lives")  # Latin-1, not UTF-8
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(DataError) as info:
        load_file(path)
    assert str(info.value) == f"{path}:{target + 1}:{column}: not UTF-8 (byte 0xe9); save the file as UTF-8"
    with pytest.raises(DataError, match="not UTF-8"):
        load_file(path, lenient=True)  # not a case to skip: the file itself is broken


@pytest.mark.parametrize("field", ["id", "domain", "conversation", "policy"])
def test_a_lone_surrogate_is_refused_naming_case_and_field(tmp_path: Path, field: str) -> None:
    case = raw_case("sur-1-l0")
    case[field] = case[field][:2] + "\ud800" + case[field][2:]
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"data": [raw_case("ok-l0"), case]}), encoding="utf-8")  # "\ud800" escaped
    shown = "su\\ud800r-1-l0" if field == "id" else "sur-1-l0"
    with pytest.raises(DataError) as info:
        load_file(path)
    message = str(info.value)
    assert (
        message
        == f"{path}:1: case {shown}: field {field}: unpaired surrogate \\ud800 at character 2 (not a Unicode character)"
    )
    message.encode("utf-8")  # printable: the surrogate itself is escaped
    loaded = load_file(path, lenient=True)
    assert [c.id for c in loaded.cases] == ["ok-l0"] and loaded.skipped == 1


def test_a_surrogate_pair_is_a_character_and_loads(tmp_path: Path) -> None:
    case = raw_case("emoji-l0")
    case["conversation"] += " \U0001f600"
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"data": [case]}), encoding="utf-8")  # written as \ud83d\ude00
    assert "\\ud83d\\ude00" in path.read_text()
    assert load_file(path).cases[0].conversation.endswith("\U0001f600")


def test_a_filter_that_selects_no_case_is_an_error(tmp_path: Path) -> None:
    cases = [raw_case("c-1-l0"), raw_case("c-1-l1", level="L1", domain="fraud")]
    path = str(write_dataset(tmp_path / "d.json", cases))
    with pytest.raises(DataError) as info:
        load_benchmark(path, domain="privcy")
    assert str(info.value) == "--domain: no case in domain privcy (the dataset has: fraud, privacy)"
    with pytest.raises(DataError, match=r"^--domain: no case in domain privcy \(the dataset"):
        load_benchmark(path, domain="privacy,privcy")  # a typo among good names too
    with pytest.raises(DataError, match=r"^--level: no case at level L2 \(the dataset has: L0, L1\)$"):
        load_benchmark(path, level="L2")
    with pytest.raises(DataError, match=r"^--level L1 --domain privacy: no case has both$"):
        load_benchmark(path, level="L1", domain="privacy")
    with pytest.raises(DataError, match=r"^--start-idx 2: only 2 case\(s\) selected, so it must be below 2$"):
        load_benchmark(path, start_idx=2)
    with pytest.raises(DataError, match=r"^--start-idx 1: only 1 case"):
        load_benchmark(path, level="L0", start_idx=1)
    assert [c.id for c in load_benchmark(path, start_idx=1).cases] == ["c-1-l1"]
    assert load_benchmark(path, limit=0).cases == []  # asked for none: not a filter that missed


@pytest.mark.parametrize("document", ['{"data": []}', "[]"])
def test_a_file_without_cases_is_refused(tmp_path: Path, document: str) -> None:
    path = tmp_path / "empty.json"
    path.write_text(document, encoding="utf-8")
    with pytest.raises(DataError, match=r"empty\.json: no cases \(the file's list of cases is empty\)$"):
        load_file(path)


def test_a_case_rule_is_numbered_from_1(tmp_path: Path) -> None:
    """Rule 0 in a rubric (and its policy) is refused; a result line may still name 0 (strict parity)."""
    path = write_dataset(tmp_path / "d.json", [raw_case("z-1-l0", rules={0: "Zero.", 1: "One."}, gt=[1])])
    with pytest.raises(
        DataError, match=r"field rubric\.non_violations\.0\.rule: rule 0: rules are numbered from 1$"
    ):
        load_file(path)
    path = write_dataset(
        tmp_path / "gt.json", [raw_case("z-1-l0", gt=[1], extra={"ground_truth_violations": [-1]})]
    )
    with pytest.raises(
        DataError, match=r"field ground_truth_violations\.0: rule -1: rules are numbered from 1$"
    ):
        load_file(path)
