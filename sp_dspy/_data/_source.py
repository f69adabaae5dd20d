"""Resolve ``--dataset`` to bytes on disk: a local file, the bundled sample, or a Hub id.

Hub downloads go through ``huggingface_hub`` (cached, ``HF_TOKEN`` honoured by it); any
failure to reach the Hub becomes one line that suggests ``--dataset PATH``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .._errors import DataError

DEFAULT_HUB_DATASET = "ByteDance/SafePyramid"
HUB_FILE = "benchmark.json"
HUB_FILE_WITH_EVIDENCE = "benchmark_with_evidence.json"
SAMPLE_NAME = "safepyramid_sample.json"


def sample_path() -> Path:
    """The bundled sample benchmark shipped inside the package."""
    return Path(str(resources.files("sp_dspy._data").joinpath("sample", SAMPLE_NAME)))


def looks_like_hub_id(spec: str) -> bool:
    """``owner/name`` with no file suffix and no such local path."""
    if Path(spec).exists() or spec.startswith((".", "/", "~")):
        return False
    parts = spec.split("/")
    return len(parts) == 2 and all(parts) and not spec.endswith((".json", ".jsonl", ".parquet"))


def names_hub_dataset(spec: str | None) -> bool:
    """Whether ``resolve_dataset`` would fetch ``spec`` from the Hub (rather than read a local file)."""
    if spec is None or spec == "sample":
        return False
    return looks_like_hub_id(DEFAULT_HUB_DATASET if spec == "hub" else spec)


def resolve_dataset(spec: str | None, *, with_evidence: bool = False, filename: str | None = None) -> Path:
    """Map a ``--dataset`` value to a local file path (downloading from the Hub if needed)."""
    if spec is None or spec == "sample":
        return sample_path()
    if spec == "hub":
        spec = DEFAULT_HUB_DATASET
    if names_hub_dataset(spec):
        name = filename or (HUB_FILE_WITH_EVIDENCE if with_evidence else HUB_FILE)
        return hub_download(spec, name)
    path = Path(spec).expanduser()
    if not path.exists():
        raise DataError(f"{path}: no such file (give --dataset a JSON file or a Hub dataset id)")
    if path.is_dir():
        raise DataError(f"{path}: is a directory, expected a JSON file")
    return path


def hub_download(repo_id: str, filename: str) -> Path:
    """Download (or reuse the cached copy of) one file of a Hub dataset repository."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise DataError(f"huggingface_hub is not installed: cannot fetch {repo_id}") from exc
    try:
        return Path(hf_hub_download(repo_id=repo_id, filename=filename, repo_type="dataset"))
    except Exception as exc:  # network, auth, missing file: all one line for the user
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(
            f"could not fetch {filename} of Hub dataset {repo_id} ({type(exc).__name__}: {reason[:200]}); "
            "download it elsewhere and pass --dataset PATH"
        ) from exc
