"""The docs' examples do not rot: every Python block compiles, every marked block runs offline.

A marked block (``<!-- docs-test: run -->`` on the line before it) is one the docs tell the
reader to run; the marked blocks of a page run in order in one fresh directory, as a reader
following the page would run them. The README stays short and its links lead somewhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests._docs_blocks import MARK, PAGES, PYTHON, ROOT, SHELL, Block, blocks, run_block, run_environment

ALL_BLOCKS = [block for page in PAGES for block in blocks(page)]
RUN_PAGES = sorted({block.page for block in ALL_BLOCKS if block.marked})
#: Each main job the README names has an offline example the tests run.
MAIN_JOBS = (
    "eval",
    "score",
    "show",
    "compare",
    "view",
    "report",
    "compile",
    "experiment",
    "ablate",
    "check",
    "split",
)


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.language in PYTHON], ids=lambda b: b.where)
def test_every_python_block_compiles(block: Block) -> None:
    try:
        compile(block.text, block.where, "exec")
    except SyntaxError as error:
        pytest.fail(f"{block.where}: {error}")


def test_marks_sit_before_runnable_blocks_only() -> None:
    """A mark before prose or a block of another language would be silently ignored: refuse it."""
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            if line.strip() != MARK:
                continue
            following = next((later for later in lines[number:] if later.strip()), "")
            assert following.lstrip().startswith(("```", "~~~")), (
                f"{_page_id(page)}:{number}: mark before no block"
            )
    for block in ALL_BLOCKS:
        if block.marked:
            assert block.language in SHELL + PYTHON, f"{block.where}: a marked block must be shell or Python"


def test_every_main_job_has_an_offline_example_that_runs() -> None:
    ran = " ".join(block.text for block in ALL_BLOCKS if block.marked and block.language in SHELL)
    missing = [job for job in MAIN_JOBS if not re.search(rf"sp-dspy {job}\b", ran)]
    assert not missing, f"no marked example runs: {', '.join(missing)}"
    assert re.search(r"sp-dspy serve --guard", ran), "no marked example serves a guard"
    assert any(block.marked and block.language in PYTHON for block in ALL_BLOCKS)


@pytest.mark.network  # the guard service's page starts it on 127.0.0.1
@pytest.mark.parametrize("page", RUN_PAGES, ids=_page_id)
def test_marked_blocks_run(page: Path, tmp_path: Path) -> None:
    env = run_environment(tmp_path)
    for block in blocks(page):
        if block.marked:
            run_block(block, tmp_path, env)


def test_readme_fits_on_a_screen_and_its_links_resolve() -> None:
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [target.split("#")[0] for target in targets if not re.match(r"[a-z]+:", target)]
    assert local, "the README links into the docs"
    missing = [target for target in local if target and not (ROOT / target).exists()]
    assert not missing, f"README links to missing files: {missing}"
