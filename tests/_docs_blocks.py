"""The fenced code blocks of the documentation, and how a marked one is run.

A block is *marked* when the line before its opening fence (blank lines aside) is
``<!-- docs-test: run -->``: the docs tell the reader to run it, and it runs offline (the fake
LM, the bundled sample, loopback servers). ``tests/test_docs_examples.py`` runs the marked
blocks of each page in order in one fresh directory, and compiles every Python block.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "<!-- docs-test: run -->"
#: Every Markdown file a reader is sent to: the site's pages, the README and the READMEs the site shows.
PAGES = (
    *sorted((ROOT / "docs").rglob("*.md")),
    ROOT / "README.md",
    ROOT / "artifacts" / "README.md",
    ROOT / "benchmarks" / "README.md",
)
SHELL = ("bash", "sh", "shell", "console")
PYTHON = ("python", "py")
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts (``page:line``), its language, its text, whether it is marked."""

    page: Path
    line: int
    language: str
    text: str
    marked: bool

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, its text dedented by its fence's indent."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    previous = ""
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            if lines[index].strip():
                previous = lines[index].strip()
            index += 1
            continue
        fence, start = opening["fence"], index
        index += 1
        while index < len(lines) and not lines[index].strip().startswith(fence):
            index += 1
        body = textwrap.dedent("\n".join(lines[start + 1 : index]))
        language = opening["info"].strip("{}.").lower()
        found.append(Block(page, start + 1, language, body + "\n", previous == MARK))
        previous = ""
        index += 1
    return found


def run_environment(workdir: Path) -> dict[str, str]:
    """The environment a marked block runs in: ``sp-dspy`` of this checkout first on the ``PATH``,
    every user path inside ``workdir``, no API key, no Hub."""
    bin_dir = workdir / ".bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    launcher = bin_dir / "sp-dspy"
    launcher.write_text(f"#!{sys.executable}\nfrom sp_dspy.cli import main\nmain()\n")
    launcher.chmod(0o755)
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.endswith("_API_KEY") and name not in ("RUN_ID", "HF_TOKEN")
    }
    home = workdir / ".home"
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(ROOT),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        SP_DSPY_CACHE_DIR=str(home / "cache"),
        DSPY_CACHEDIR=str(home / "dspy"),
        HF_HOME=str(home / "hf"),
        HF_HUB_OFFLINE="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        COLUMNS="100",
    )
    return env


def run_block(block: Block, workdir: Path, env: dict[str, str], timeout: float = 300) -> None:
    """Run a marked block in ``workdir``; an ``AssertionError`` naming ``page:line`` and the output if it fails."""
    if block.language in SHELL:
        command = ["bash", "-euo", "pipefail", "-c", block.text]
    else:
        command = [sys.executable, "-c", block.text]
    done = subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    output = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, (
        f"{block.where}: exit {done.returncode}\n{block.text}\n--- output ---\n{output}"
    )
