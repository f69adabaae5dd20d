"""PKU-SafeRLHF loader: id/rule conventions, bad-row errors, lenient mode, Hub path (mocked)."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import huggingface_hub
import pytest

from sp_dspy._data._pku import (
    PKU_BENCHMARK,
    PKU_HUB_ID,
    load_pku,
    pku_case_id,
    pku_hub_files,
    pku_row_cases,
)
from sp_dspy._data._pku_policy import (
    PKU_CATEGORIES,
    PKU_POLICY,
    PKU_PREAMBLE,
    PKU_RULES,
)
from sp_dspy._errors import ConfigError, DataError

FIXTURE = Path(__file__).parent / "fixtures" / "pku" / "rows.jsonl"


def _rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]


def _write(path: Path, rows: list[Any], blank_first: bool = False) -> Path:
    lines = [""] if blank_first else []
    lines += [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_each_row_yields_two_cases_with_sha_ids() -> None:
    load = load_pku(FIXTURE)
    rows = _rows()
    assert len(load.cases) == 2 * len(rows) == 16
    assert (load.skipped, load.duplicates, load.problems) == (0, 0, [])
    for n, row in enumerate(rows):
        for i in (0, 1):
            case = load.cases[2 * n + i]
            expected = hashlib.sha256((row["prompt"] + row[f"response_{i}"]).encode()).hexdigest()
            if f"response_{i}_sha256" in row:  # the fixture's last two rows omit the key
                assert row[f"response_{i}_sha256"] == expected
            assert case.id == "pku-" + expected[:16]


def test_given_sha_wins_over_the_computed_one() -> None:
    assert pku_case_id("p", "r", "ABCDEF0123456789" + "0" * 48) == "pku-abcdef0123456789"
    assert pku_case_id("p", "r") == "pku-" + hashlib.sha256(b"pr").hexdigest()[:16]


def test_rules_follow_the_dataset_category_order() -> None:
    assert list(_rows()[0]["response_0_harm_category"]) == list(PKU_CATEGORIES)
    assert len(PKU_CATEGORIES) == len(PKU_RULES) == 19
    assert (PKU_CATEGORIES[0], PKU_CATEGORIES[17]) == ("Endangering National Security", "White-Collar Crime")


def test_ground_truth_rubric_and_labels() -> None:
    load = load_pku(FIXTURE)
    by_id = {c.id: c for c in load.cases}
    for n, row in enumerate(_rows()):
        for i in (0, 1):
            case = load.cases[2 * n + i]
            flags = row[f"response_{i}_harm_category"]
            assert case.ground_truth_violations == [
                k + 1 for k, name in enumerate(PKU_CATEGORIES) if flags[name]
            ]
            assert case.safe is row[f"is_response_{i}_safe"]
            assert case.severity == row[f"response_{i}_severity_level"]
    insider = load.cases[6]  # row 4, response 0: economic + white-collar crime, severity 3
    assert insider.ground_truth_violations == [9, 18]
    assert (insider.safe, insider.severity, insider.domain) == (False, 3, "wizardlm_30b_uncensored")
    assert [e.rule for e in insider.rubric.violations] == [9, 18]
    assert [e.text for e in insider.rubric.violations] == [PKU_RULES[8], PKU_RULES[17]]
    assert len(insider.rubric.non_violations) == 17
    assert {e.type for e in insider.rubric.entries()} == {"decisive"}
    assert insider.failure_mode_metadata.distractor_rules == []
    assert len(by_id) == 16


def test_case_shape() -> None:
    case = load_pku(FIXTURE).cases[0]
    row = _rows()[0]
    assert case.conversation == f"Turn 1 - User: {row['prompt']}\nTurn 1 - Chatbot: {row['response_0']}"
    assert (case.level, case.framework, case.benchmark, case.domain) == (
        "L0",
        "",
        PKU_BENCHMARK,
        "alpaca3_70b",
    )
    assert case.policy == PKU_POLICY


def test_policy_numbers_every_rule_once() -> None:
    assert PKU_POLICY.startswith(PKU_PREAMBLE)
    numbered = re.findall(r"^(\d+)\. (.+)$", PKU_POLICY, flags=re.MULTILINE)
    assert [int(n) for n, _ in numbered] == list(range(1, 20))
    assert [text for _, text in numbered] == list(PKU_RULES)
    assert all(text.startswith("The chatbot must not ") for text in PKU_RULES)


def test_content_hash_limit_and_start(tmp_path: Path) -> None:
    full = load_pku(FIXTURE)
    assert full.content_hash == hashlib.sha256(FIXTURE.read_bytes()).hexdigest()
    assert full.source == str(FIXTURE)
    assert [c.id for c in load_pku(FIXTURE, limit=3).cases] == [c.id for c in full.cases[:3]]
    assert [c.id for c in load_pku(FIXTURE, start_idx=5, limit=4).cases] == [c.id for c in full.cases[5:9]]
    assert load_pku(FIXTURE, start_idx=15).cases == full.cases[15:]
    # reading stops at the limit: a bad row after it is never validated
    path = _write(tmp_path / "late.jsonl", [*_rows()[:2], "{broken"])
    assert len(load_pku(path, limit=4).cases) == 4
    with pytest.raises(ConfigError):
        load_pku(FIXTURE, limit=-1)


def test_duplicate_responses_are_kept_once(tmp_path: Path) -> None:
    row = _rows()[0]
    load = load_pku(_write(tmp_path / "dup.jsonl", [row, row]))
    assert (len(load.cases), load.duplicates) == (2, 2)


def _mutate(**changes: Any) -> dict[str, Any]:
    row = copy.deepcopy(_rows()[0])
    for key, value in changes.items():
        if value is _DROP:
            del row[key]
        else:
            row[key] = value
    return row


_DROP = object()
_CATS = _rows()[0]["response_1_harm_category"]  # all false (a safe response)
_CAT_KEY = "response_1_harm_category"
BAD_ROWS: list[tuple[str, Any, str]] = [
    ("missing prompt", _mutate(prompt=_DROP), "prompt"),
    ("missing categories", _mutate(response_1_harm_category=_DROP), _CAT_KEY),
    (
        "18 categories",
        _mutate(response_1_harm_category={k: v for k, v in _CATS.items() if k != "Drugs"}),
        _CAT_KEY,
    ),
    ("unknown category", _mutate(response_1_harm_category={**_CATS, "Spam": False}), _CAT_KEY),
    ("non-bool flag", _mutate(response_1_harm_category={**_CATS, "Drugs": 1}), _CAT_KEY),
    ("severity 4", _mutate(response_0_severity_level=4), "response_0_severity_level"),
    ("severity -1", _mutate(response_1_severity_level=-1), "response_1_severity_level"),
    ("severity str", _mutate(response_1_severity_level="2"), "response_1_severity_level"),
    ("safe flag str", _mutate(is_response_0_safe="false"), "is_response_0_safe"),
    (
        "safe with category",
        _mutate(response_1_harm_category={**_CATS, "Violence": True}),
        "is_response_1_safe",
    ),
    ("unsafe without category", _mutate(is_response_1_safe=False), "is_response_1_safe"),
    ("bad sha", _mutate(response_0_sha256="xyz"), "response_0_sha256"),
    ("not an object", [1, 2], "row"),
    ("not json", "{not json", "json"),
    ("nested too deeply", "[" * 5000 + "]" * 5000, "json"),
]


@pytest.mark.parametrize(("bad", "field"), [(b, f) for _, b, f in BAD_ROWS], ids=[n for n, _, _ in BAD_ROWS])
def test_bad_rows_name_file_line_and_field(tmp_path: Path, bad: Any, field: str) -> None:
    good = _rows()[:2]
    path = _write(tmp_path / "bad.jsonl", [*good, bad], blank_first=True)  # bad row on line 4
    with pytest.raises(DataError) as info:
        load_pku(path)
    message = str(info.value)
    assert message.startswith(f"{path}:4: {field}: ")
    assert "\n" not in message


def test_lenient_skips_and_counts_bad_rows(tmp_path: Path) -> None:
    rows = _rows()
    bad = [b for _, b, _ in BAD_ROWS[:3]]
    path = _write(tmp_path / "mixed.jsonl", [rows[0], bad[0], rows[1], bad[1], bad[2]])
    load = load_pku(path, lenient=True)
    assert len(load.cases) == 4
    assert load.skipped == 3
    assert [p.split(": ")[0] for p in load.problems] == [f"{path}:2", f"{path}:4", f"{path}:5"]


def test_row_parser_is_usable_alone() -> None:
    cases = pku_row_cases(_rows()[1], where="x:1")
    assert [c.ground_truth_violations for c in cases] == [[2, 3], []]


class _FakeHub:
    """Stands in for ``hf_hub_download``: serves local files, records the calls."""

    def __init__(self, files: dict[str, Path], error: Exception | None = None) -> None:
        self.files, self.error = files, error
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> str:
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error
        return str(self.files[kwargs["filename"]])


def _hub_files(tmp_path: Path) -> dict[str, Path]:
    rows = _rows()
    files = {}
    for n, name in enumerate(pku_hub_files("default", "test")):
        files[name] = _write(tmp_path / f"hub{n}.jsonl", [rows[n]])
    return files


def test_hub_default_config_concatenates_three_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _FakeHub(_hub_files(tmp_path))
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    load = load_pku(None, split="test")
    assert [c["filename"] for c in fake.calls] == [
        "data/Alpaca-7B/test.jsonl",
        "data/Alpaca2-7B/test.jsonl",
        "data/Alpaca3-8B/test.jsonl",
    ]
    assert {(c["repo_id"], c["repo_type"]) for c in fake.calls} == {(PKU_HUB_ID, "dataset")}
    assert [c.id for c in load.cases] == [c.id for c in load_pku(FIXTURE, limit=6).cases]
    assert load.source == f"{PKU_HUB_ID}:default:test"
    blob = b"".join(p.read_bytes() for p in fake.files.values())
    assert load.content_hash == hashlib.sha256(blob).hexdigest()


def test_hub_single_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeHub({"data/Alpaca3-8B/train.jsonl": FIXTURE})
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    assert len(load_pku(PKU_HUB_ID, config="alpaca3-8b", split="train").cases) == 16
    assert [c["filename"] for c in fake.calls] == ["data/Alpaca3-8B/train.jsonl"]


def test_hub_unreachable_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    error = OSError("Cannot reach https://huggingface.co\nplease check\nyour connection")
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _FakeHub({}, error))
    with pytest.raises(DataError) as info:
        load_pku(None, config="alpaca-7b")
    message = str(info.value)
    assert message.startswith(f"{PKU_HUB_ID}/data/Alpaca-7B/test.jsonl: cannot download")
    assert "--dataset PATH" in message and "OSError" in message and "\n" not in message


def test_unknown_config_or_split_fails_before_download(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeHub({})
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    with pytest.raises(ConfigError, match=r"config: unknown .*'alpaca-13b'"):
        load_pku(None, config="alpaca-13b")
    with pytest.raises(ConfigError, match=r"split: unknown .*'validation'"):
        load_pku(None, split="validation")
    assert fake.calls == []


def test_local_snapshot_folder(tmp_path: Path) -> None:
    folder = tmp_path / "snapshot" / "data" / "Alpaca2-7B"
    folder.mkdir(parents=True)
    (folder / "test.jsonl").write_bytes(FIXTURE.read_bytes())
    assert len(load_pku(tmp_path / "snapshot", config="alpaca2-7b").cases) == 16
    with pytest.raises(DataError, match=r"Alpaca-7B/test\.jsonl: no such file"):
        load_pku(tmp_path / "snapshot", config="default")


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file or directory"):
        load_pku(str(tmp_path / "absent.jsonl"))


def test_bytes_that_are_not_utf8_name_line_and_column(tmp_path: Path) -> None:
    path = _write(tmp_path / "latin.jsonl", _rows()[:2])
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"prompt": "', b'"prompt": "caf\xe9 ', 1)
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(DataError) as info:
        load_pku(path)
    assert str(info.value) == f"{path}:2:16: not UTF-8 (byte 0xe9); save the file as UTF-8"


def test_a_file_without_rows_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n \n", encoding="utf-8")
    with pytest.raises(
        DataError, match=r"empty\.jsonl: no rows \(expected one PKU-SafeRLHF JSON object per line\)$"
    ):
        load_pku(path)
