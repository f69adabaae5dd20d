"""The parse cache of ``sp-dspy score``: hits, misses, invalidation, and never an error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import sp_dspy
from sp_dspy._data import _scoring_load, load_scoring_cases, scoring_cache_dir
from sp_dspy._data import _scoring_store as cache_store
from sp_dspy._errors import DataError
from sp_dspy._lm import default_cache_dir
from sp_dspy.cli._score import register
from tests._factories import raw_case, write_dataset


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    cases = [raw_case(f"c-{i}-l{i % 3}", level=f"L{i % 3}", gt=[1 + i % 3]) for i in range(6)]
    return write_dataset(tmp_path / "bench.json", cases)


def _entries() -> list[Path]:
    directory = scoring_cache_dir()
    return sorted(directory.iterdir()) if directory.exists() else []


def _no_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any read of the dataset fail, so only a cache hit can load."""

    def refuse(*_: object, **__: object) -> object:
        raise AssertionError("the dataset was parsed")

    monkeypatch.setattr(_scoring_load, "load_views", refuse)


def test_second_load_is_a_hit_that_never_parses_the_dataset(
    dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = load_scoring_cases(dataset)
    assert not first.from_cache
    assert len(_entries()) == 1 and _entries()[0].parent == scoring_cache_dir().parent / "scoring"
    _no_parse(monkeypatch)
    second = load_scoring_cases(dataset)
    assert second.from_cache
    assert second.cases == first.cases and second.source == str(dataset)


def test_no_cache_neither_reads_nor_writes(dataset: Path) -> None:
    load_scoring_cases(dataset, cache=False)
    assert _entries() == []
    load_scoring_cases(dataset)
    assert not load_scoring_cases(dataset, cache=False).from_cache


@pytest.mark.parametrize("change", ["mtime", "size"])
def test_a_changed_file_is_a_miss_and_replaces_the_entry(dataset: Path, change: str) -> None:
    load_scoring_cases(dataset)
    stat = dataset.stat()
    if change == "mtime":
        os.utime(dataset, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    else:
        document = json.loads(dataset.read_text(encoding="utf-8"))
        document["data"] = document["data"][:2]
        dataset.write_text(json.dumps(document), encoding="utf-8")
    again = load_scoring_cases(dataset)
    assert not again.from_cache
    assert len(again.cases) == (6 if change == "mtime" else 2)
    assert len(_entries()) == 1
    assert load_scoring_cases(dataset).from_cache


def test_version_and_lenient_are_part_of_the_key(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    load_scoring_cases(dataset)
    assert not load_scoring_cases(dataset, lenient=True).from_cache
    assert len(_entries()) == 2
    monkeypatch.setattr(cache_store, "SCHEMA_VERSION", cache_store.SCHEMA_VERSION + 1)
    assert not load_scoring_cases(dataset).from_cache
    assert load_scoring_cases(dataset).from_cache
    monkeypatch.setattr(sp_dspy, "__version__", sp_dspy.__version__ + ".post1")
    assert not load_scoring_cases(dataset).from_cache
    assert len(_entries()) == 2


@pytest.mark.parametrize("garbage", [b"", b"not json\n", b"{}\n{}", b"\xff\xfe\x00"])
def test_a_corrupt_entry_is_ignored_and_rewritten(dataset: Path, garbage: bytes) -> None:
    load_scoring_cases(dataset)
    (entry,) = _entries()
    entry.write_bytes(garbage)
    assert not load_scoring_cases(dataset).from_cache
    assert load_scoring_cases(dataset).from_cache


def test_a_truncated_entry_with_the_right_key_is_a_miss(dataset: Path) -> None:
    load_scoring_cases(dataset)
    (entry,) = _entries()
    entry.write_bytes(entry.read_bytes()[:-20])
    loaded = load_scoring_cases(dataset)
    assert not loaded.from_cache and len(loaded.cases) == 6


def test_an_unwritable_cache_is_skipped_silently(dataset: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x", encoding="utf-8")
    for _ in range(2):
        loaded = load_scoring_cases(dataset, cache_dir=blocker / "scoring")
        assert not loaded.from_cache and len(loaded.cases) == 6
    assert blocker.read_text(encoding="utf-8") == "x"


def test_writes_leave_no_temporary_files(dataset: Path) -> None:
    load_scoring_cases(dataset)
    load_scoring_cases(dataset, lenient=True)
    assert all(p.suffix == ".json" and not p.name.startswith(".") for p in _entries())


def test_a_failed_load_writes_nothing(tmp_path: Path) -> None:
    case = raw_case("bad-l0", gt=[9])
    path = write_dataset(tmp_path / "bad.json", [case])
    for _ in range(2):
        with pytest.raises(DataError, match="not in the rubric"):
            load_scoring_cases(path)
    assert _entries() == []


def test_the_cache_dir_follows_the_lm_cache_rule(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert scoring_cache_dir().parent == default_cache_dir()
    monkeypatch.delenv("SP_DSPY_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert scoring_cache_dir().parent == default_cache_dir() == tmp_path / "xdg" / "sp-dspy"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert scoring_cache_dir().parent == default_cache_dir() == tmp_path / "home" / ".cache" / "sp-dspy"


def test_score_command_uses_the_cache_unless_told_not_to(dataset: Path, tmp_path: Path) -> None:
    predictions = tmp_path / "pred.jsonl"
    predictions.write_text(
        "\n".join(json.dumps({"id": f"c-{i}-l{i % 3}", "violated_rules": [1]}) for i in range(6)) + "\n",
        encoding="utf-8",
    )
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    args = ["--dataset", str(dataset), "--json", "-", str(predictions)]
    cold = runner.invoke(app, [*args, "--no-data-cache"])
    assert cold.exit_code == 0, cold.output
    assert _entries() == []
    first = runner.invoke(app, args)
    warm = runner.invoke(app, args)
    assert len(_entries()) == 1
    assert json.loads(cold.stdout) == json.loads(first.stdout) == json.loads(warm.stdout)
    assert "--no-data-cache" in runner.invoke(app, ["--help"], env={"COLUMNS": "200"}).output


def test_a_full_load_stores_the_views_score_reads(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = load_scoring_cases(dataset, cache=False)
    sp_dspy.load_benchmark(dataset, level="L1")  # filters apply after the file is read
    assert len(_entries()) == 1
    _no_parse(monkeypatch)
    warm = load_scoring_cases(dataset)
    assert warm.from_cache and warm.cases == fresh.cases


def test_a_full_load_with_skipped_cases_stores_what_lenient_scoring_would(tmp_path: Path) -> None:
    cases = [raw_case("ok-l0", gt=[1]), raw_case("bad-l0", gt=[9]), raw_case("ok2-l1", level="L1", gt=[2])]
    path = write_dataset(tmp_path / "mixed.json", cases)
    fresh = load_scoring_cases(path, lenient=True, cache=False)
    sp_dspy.load_benchmark(path, lenient=True)
    warm = load_scoring_cases(path, lenient=True)
    assert warm.from_cache and warm.skipped == fresh.skipped == 1
    assert (warm.cases, warm.skipped_reasons) == (fresh.cases, fresh.skipped_reasons)
    with pytest.raises(DataError, match="not in the rubric"):
        load_scoring_cases(path)


def test_a_full_load_replaces_a_stale_entry_and_keeps_a_current_one(
    dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_scoring_cases(dataset)
    stat = dataset.stat()
    os.utime(dataset, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    sp_dspy.load_benchmark(dataset)
    assert load_scoring_cases(dataset).from_cache
    written: list[object] = []
    monkeypatch.setattr(_scoring_load, "store_entry", lambda *args: written.append(args))
    sp_dspy.load_benchmark(dataset)
    assert written == []


def test_a_file_changed_while_it_was_loaded_is_not_remembered(
    dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sp_dspy._data import _loader

    real = _loader.load_file

    def load_then_touch(path: Path, *, lenient: bool = False) -> object:
        loaded = real(path, lenient=lenient)
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        return loaded

    monkeypatch.setattr(_loader, "load_file", load_then_touch)
    sp_dspy.load_benchmark(dataset)
    assert _entries() == []


def test_a_write_prunes_entries_of_vanished_files_and_stale_temporaries(
    dataset: Path, tmp_path: Path
) -> None:
    other = write_dataset(tmp_path / "other.json", [raw_case("o-1-l0", gt=[1])])
    load_scoring_cases(other)
    load_scoring_cases(dataset)
    assert len(_entries()) == 2
    directory = scoring_cache_dir()
    corrupt = directory / ("0" * 32 + ".json")
    corrupt.write_bytes(b"not a key\n")
    stale, fresh = directory / ".entry-stale.tmp", directory / ".entry-fresh.tmp"
    for temporary in (stale, fresh):
        temporary.write_bytes(b"partial")
    hours_ago = stale.stat().st_mtime - 2 * cache_store.STALE_TEMPORARY_S
    os.utime(stale, (hours_ago, hours_ago))
    other.unlink()
    stat = dataset.stat()
    os.utime(dataset, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    load_scoring_cases(dataset)  # a miss: writes, then prunes
    names = {p.name for p in directory.iterdir()}
    assert names == {cache_store.CacheKey.of(dataset, lenient=False).entry_name(), fresh.name}
    assert load_scoring_cases(dataset).from_cache


def test_prune_leaves_entries_of_existing_files_and_an_absent_directory_alone(
    dataset: Path, tmp_path: Path
) -> None:
    load_scoring_cases(dataset)
    load_scoring_cases(dataset, lenient=True)
    assert cache_store.prune(scoring_cache_dir()) == 0 and len(_entries()) == 2
    assert cache_store.prune(tmp_path / "no-such-dir") == 0


def test_a_key_line_reads_back_as_its_key_and_nothing_else_does(tmp_path: Path, dataset: Path) -> None:
    key = cache_store.CacheKey.of(dataset, lenient=True)
    line = key.line()
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and line.isascii()
    assert cache_store.CacheKey.from_line(line) == key
    odd = cache_store.CacheKey.of(write_dataset(tmp_path / 'é "q".json', [raw_case()]), lenient=False)
    assert cache_store.CacheKey.from_line(odd.line()) == odd
    fields = json.loads(line)
    for bad in (
        b"",
        b"[]",
        b"not json",
        json.dumps({**fields, "size": "12"}).encode(),
        json.dumps({**fields, "lenient": 1}).encode(),
        json.dumps({k: v for k, v in fields.items() if k != "inode"}).encode(),
        json.dumps({**fields, "extra": 1}).encode(),
    ):
        assert cache_store.CacheKey.from_line(bad) is None, bad
