"""llama.cpp's thread count: half the CPUs this process may use, unless given."""

from __future__ import annotations

from pathlib import Path

import pytest

from sp_dspy._serve import _llamacpp
from sp_dspy._serve._llamacpp import LlamaCppServer, default_threads


@pytest.mark.parametrize(("cpus", "threads"), [(1, 1), (2, 1), (3, 1), (8, 4), (64, 32)])
def test_default_is_half_the_usable_cpus(cpus: int, threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_llamacpp.os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    assert default_threads() == threads


def test_without_affinity_the_cpu_count_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(_llamacpp.os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(_llamacpp.os, "cpu_count", lambda: 6)
    assert default_threads() == 3


def test_the_server_command_carries_the_thread_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setattr(_llamacpp.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    chosen = LlamaCppServer(model).command()
    given = LlamaCppServer(model, threads=3).command()
    assert chosen[chosen.index("--threads") + 1] == "2"
    assert given[given.index("--threads") + 1] == "3"
