"""Resolve ``--dataset`` to a file on disk: a local file, the bundled sample, or a Hub id."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .._errors import DataError

DEFAULT_HUB_DATASET = "ByteDance/SafePyramid"
HUB_PROBE_TIMEOUT_S = 5.0
HUB_FILE = "benchmark.json"
HUB_FILE_WITH_EVIDENCE = "benchmark_with_evidence.json"
SAMPLE_NAME = "safepyramid_sample.json"


def sample_path(name: str = SAMPLE_NAME) -> Path:
    """A bundled sample file shipped inside the package (by default the SafePyramid sample)."""
    return Path(str(resources.files("sp_dspy._data").joinpath("sample", name)))


def looks_like_hub_id(spec: str) -> bool:
    """``owner/name`` with no file suffix and no such local path."""
    if Path(spec).exists() or spec.startswith((".", "/", "~")):
        return False
    parts = spec.split("/")
    return len(parts) == 2 and all(parts) and not spec.endswith((".json", ".jsonl", ".parquet"))


def resolve_dataset(spec: str | None, *, with_evidence: bool = False) -> Path:
    """Map a ``--dataset`` value to a local file path (downloading from the Hub if needed)."""
    if spec is None or spec == "sample":
        return sample_path()
    if spec == "hub":
        spec = DEFAULT_HUB_DATASET
    if looks_like_hub_id(spec):
        name = HUB_FILE_WITH_EVIDENCE if with_evidence else HUB_FILE
        try:
            return fetch_hub_file(spec, name)
        except Exception as exc:  # network, auth, missing file: all one line for the user
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DataError(
                f"could not fetch {name} of Hub dataset {spec} ({type(exc).__name__}: {reason[:200]}); "
                "download it elsewhere and pass --dataset PATH"
            ) from exc
    path = Path(spec).expanduser()
    if not path.exists():
        raise DataError(f"{path}: no such file (give --dataset a JSON file or a Hub dataset id)")
    if path.is_dir():
        raise DataError(f"{path}: is a directory, expected a JSON file")
    return path


def fetch_hub_file(repo_id: str, filename: str) -> Path:
    """One file of a Hub dataset through the cache; ``ConnectionError`` at once when the Hub is unreachable.

    One metadata request without retries (``hf_hub_download`` keeps retrying) tells
    whether the Hub answers; if not, a cached copy is used when there is one.
    """
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        get_hf_file_metadata(hf_hub_url(repo_id, filename, repo_type="dataset"), timeout=HUB_PROBE_TIMEOUT_S)
    except HfHubHTTPError:
        pass  # the Hub answered: let the download report what it said
    except Exception as exc:  # unreachable: connection refused, DNS, timeout, offline mode
        try:
            cached = hf_hub_download(
                repo_id=repo_id, filename=filename, repo_type="dataset", local_files_only=True
            )
        except LocalEntryNotFoundError:
            reason = " ".join(str(exc).split())[:160] or type(exc).__name__
            raise ConnectionError(
                f"the Hugging Face Hub is unreachable and no copy is cached ({reason})"
            ) from exc
        return Path(cached)
    return Path(hf_hub_download(repo_id=repo_id, filename=filename, repo_type="dataset"))
