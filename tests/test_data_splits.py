"""Splits: deterministic, grouped by conversation, stratified, overlap refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sp_dspy._data import Case, Split, load_split, make_split, parse_ratios, select_split
from sp_dspy._data._schema import conversation_id
from sp_dspy._errors import DataError
from tests._factories import raw_case


def _cases(n_conversations: int, domains: tuple[str, ...] = ("privacy", "fraud", "ip")) -> list[Case]:
    out = []
    for i in range(n_conversations):
        for level in ("L0", "L1", "L2"):
            out.append(
                Case.model_validate(
                    raw_case(f"conv-{i:03d}-{level.lower()}", level=level, domain=domains[i % len(domains)])
                )
            )
    return out


def test_same_seed_same_split_other_seed_differs() -> None:
    cases = _cases(30)
    a = make_split(cases, seed=1, dataset_hash="h")
    assert a == make_split(cases, seed=1, dataset_hash="h")
    assert a.test != make_split(cases, seed=2, dataset_hash="h").test


def test_levels_of_a_conversation_stay_together_and_sizes_follow_ratios() -> None:
    split = make_split(_cases(30), seed=0, ratios=(0.1, 0.1, 0.8), dataset_hash="h")
    split.check_disjoint()
    assert (len(split.train), len(split.dev), len(split.test)) == (9, 9, 72)
    for part in ("train", "dev", "test"):
        groups = {conversation_id(i) for i in split.part(part)}
        assert len(split.part(part)) == 3 * len(groups)


def test_every_domain_appears_in_train_when_possible() -> None:
    split = make_split(_cases(30), seed=3, ratios=(0.2, 0.1, 0.7), dataset_hash="h")
    train_domains = {("privacy", "fraud", "ip")[int(i.split("-")[1]) % 3] for i in split.train}
    assert train_domains == {"privacy", "fraud", "ip"}


def test_tiny_dataset_keeps_every_part_nonempty() -> None:
    split = make_split(_cases(4), seed=0, ratios=(0.1, 0.1, 0.8), dataset_hash="h")
    assert all(split.part(p) for p in ("train", "dev", "test"))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.integers(0, 10_000))
def test_split_is_a_partition(n: int, seed: int) -> None:
    cases = _cases(n)
    split = make_split(cases, seed=seed, dataset_hash="h")
    ids = split.train + split.dev + split.test
    assert sorted(ids) == sorted(c.id for c in cases)


def test_ratios_are_validated() -> None:
    assert parse_ratios("0.2,0.2,0.6") == (0.2, 0.2, 0.6)
    for bad in ("0.5,0.5", "a,b,c", "0.5,0.5,0.5", "-0.1,0.1,1.0"):
        with pytest.raises(DataError, match="--ratios"):
            parse_ratios(bad)


def test_overlapping_split_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    doc = Split(
        train=["a-1-l0"], dev=["a-1-l1"], test=["b-1-l0"], seed=0, ratios=(0.1, 0.1, 0.8), dataset_hash="h"
    )
    path.write_text(json.dumps(doc.model_dump()))
    with pytest.raises(DataError, match="conversation a-1 is in both train and dev"):
        load_split(path)
    doc2 = doc.model_copy(update={"dev": ["b-1-l0"], "train": ["a-1-l0"]})
    path.write_text(json.dumps(doc2.model_dump()))
    with pytest.raises(DataError, match="parts dev and test overlap"):
        load_split(path)


def test_select_split_and_errors(tmp_path: Path) -> None:
    cases = _cases(10)
    split = make_split(cases, seed=0, dataset_hash="h")
    path = tmp_path / "s.json"
    split.save(path)
    assert [c.id for c in select_split(cases, f"{path}:dev", dataset_hash="h")] == split.dev
    with pytest.raises(DataError, match="FILE:PART"):
        select_split(cases, f"{path}:holdout", dataset_hash="h")
    with pytest.raises(DataError, match="id\\(s\\) not in the dataset"):
        select_split(cases[:3], f"{path}:test", dataset_hash="h")


def test_a_split_of_another_dataset_is_refused(tmp_path: Path) -> None:
    cases = _cases(10)
    path = tmp_path / "s.json"
    make_split(cases, seed=0, dataset_hash="a" * 64).save(path)
    with pytest.raises(
        DataError,
        match=r"s\.json: field dataset_hash: aaaaaaaaaaaa is not the hash of the dataset \(bbbbbbbbbbbb\)",
    ):
        select_split(cases, f"{path}:dev", dataset_hash="b" * 64)


@pytest.mark.timeout(30)
def test_a_split_file_must_be_a_regular_utf8_json_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    with pytest.raises(DataError, match=r"fifo\.json: split file is a FIFO, not a regular file$"):
        load_split(fifo)
    (tmp_path / "splits").mkdir()
    with pytest.raises(DataError, match=r"splits: split file is a directory, not a regular file$"):
        load_split(tmp_path / "splits")
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"train": ["caf\xe9-1-l0"]}')
    with pytest.raises(DataError, match=r"latin\.json:1:16: not UTF-8 \(byte 0xe9\)"):
        load_split(latin)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(
        DataError, match=r"deep\.json:1: invalid JSON: arrays and objects nested more than 500"
    ):
        load_split(deep)
