"""The report's Cases view at full size: 3,000 cases x 3 runs, its page size and how fast it
opens and filters in headless Chromium.

What it builds: the full-size synthetic benchmark (``make_synthetic.py``, generated when
missing) and three runs of its 3,000 cases (``synthetic_results.py``): a per-policy run
(seed 0), a per-rule run (about 68k judgments, seed 0) and a second per-policy run
(seed 1). ``build_summary`` scores them (1,000 bootstrap resamples) and the page is
written twice: as ``sp-dspy view`` writes it (no plots) and as ``sp-dspy report`` does.

What it measures, ``--repeat`` times after one warm-up load, in a fresh tab each time
(Debian's chromium through chromedriver, 1400x1000 window):

- **first render**: ``performance.mark("sp-cases-ready")``, set when the first 100 rows are
  on the page, from navigation start (reading and parsing the file, the data block's base64
  decoded, inflated and ``JSON.parse``d, building the controls and rows); and the browser's
  first contentful paint.
- **filter**: choosing an outcome in the "Outcome" filter (re-filtering the 3,000 cases
  and rebuilding the visible rows), then a level, then "won by B"; timed around the
  ``change`` event up to a forced layout.
- **open a case**: a click on the first row up to a forced layout (its rules, three runs'
  panels and the conversation are built on demand).
- **search**: the first query (which lowercases each case's texts once) and a second one,
  from the ``input`` event to the list's update, less the 120 ms pause the box waits for.

    python benchmarks/bench_viewer.py
    python benchmarks/bench_viewer.py --repeat 7 --keep benchmarks/_data/viewer
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

from synthetic_results import write_results

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "_data"
DEBOUNCE_MS = 120


def _dataset(path: Path) -> Path:
    if not path.exists():
        subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "make_synthetic.py"), "--out", str(path)], check=True
        )
    return path


def _runs(dataset: Path, folder: Path) -> list[tuple[str, list[Path]]]:
    cases = json.loads(dataset.read_text(encoding="utf-8"))["data"]
    first, judgments = write_results(cases, folder / "seed0", seed=0)
    second, _ = write_results(cases, folder / "seed1", seed=1)
    return [("per-policy", [first]), ("per-rule", [judgments]), ("per-policy seed 1", [second])]


def _pages(dataset: Path, folder: Path) -> tuple[Path, Path, dict[str, float]]:
    from sp_dspy import load_benchmark
    from sp_dspy._report import build_summary, write_html
    from sp_dspy._report._viewer import data_block, read_data_block

    timings: dict[str, float] = {}
    variants = _runs(dataset, folder)
    cases = load_benchmark(str(dataset)).cases
    start = time.perf_counter()
    summary = build_summary(cases, variants, "per-policy", n_boot=1000)
    timings["build_summary (3 runs, CIs)"] = time.perf_counter() - start
    assert summary.cases_view is not None
    start = time.perf_counter()
    block = data_block(summary.cases_view)
    timings["data block: JSON gzip'd in base64 (s)"] = time.perf_counter() - start
    timings["data block (MB)"] = len(block) / 1e6
    document = read_data_block(block)
    assert isinstance(document, dict)
    timings["its JSON (MB)"] = (
        len(json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()) / 1e6
    )
    timings["of which texts (MB)"] = (
        sum(len(json.dumps(text, ensure_ascii=False).encode()) for text in document["S"]) / 1e6
    )
    start = time.perf_counter()
    view = write_html(summary, folder / "view.html", title="bench view", plots=[])
    timings["write view page (s)"] = time.perf_counter() - start
    start = time.perf_counter()
    report = write_html(summary, folder / "report.html", title="bench report")
    timings["write report page with plots (s)"] = time.perf_counter() - start
    return view, report, timings


def _driver() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or chromedriver is None:
        sys.exit("chromium and chromedriver are needed: apt-get install -y chromium chromium-driver")
    options = Options()
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    options.binary_location = chromium
    return webdriver.Chrome(service=Service(chromedriver), options=options)


TIMED_CHANGE = """
var s = document.querySelector('select[data-filter="' + arguments[0] + '"]');
var t = performance.now();
s.value = arguments[1];
s.dispatchEvent(new Event('change'));
document.body.offsetHeight;
return performance.now() - t;
"""
TIMED_OPEN = """
var row = document.querySelector('#sp-cases tr.cv-row');
var t = performance.now();
row.click();
document.body.offsetHeight;
return performance.now() - t;
"""
TIMED_SEARCH = """
var done = arguments[arguments.length - 1], box = document.querySelector('input[data-filter="q"]');
var rows = document.querySelector('#sp-cases table.cv-list tbody'), t = performance.now();
var watch = new MutationObserver(function () { watch.disconnect(); document.body.offsetHeight; done(performance.now() - t); });
watch.observe(rows, {childList: true});
box.value = arguments[0];
box.dispatchEvent(new Event('input'));
"""


def _measure(driver: Any, uri: str) -> dict[str, float]:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.switch_to.new_window("tab")
    driver.get(uri)
    WebDriverWait(driver, 120).until(
        lambda d: d.execute_script("return document.getElementById('sp-cases').dataset.ready") == "1"
    )
    figures: dict[str, float] = {
        "first render (ms)": driver.execute_script(
            "return performance.getEntriesByName('sp-cases-ready')[0].startTime"
        ),
        "first contentful paint (ms)": driver.execute_script(
            "var p = performance.getEntriesByName('first-contentful-paint')[0]; return p ? p.startTime : -1"
        ),
        "filter: outcome (ms)": driver.execute_script(TIMED_CHANGE, "o", "w"),
        "filter: + level (ms)": driver.execute_script(TIMED_CHANGE, "lv", "L2"),
        "filter: + won by B (ms)": driver.execute_script(TIMED_CHANGE, "pair", "won"),
        "filters cleared (ms)": sum(
            driver.execute_script(TIMED_CHANGE, key, "") for key in ("o", "lv", "pair")
        ),
        "open a case (ms)": driver.execute_script(TIMED_OPEN),
    }
    driver.set_script_timeout(60)
    figures["first search (ms)"] = driver.execute_async_script(TIMED_SEARCH, "-0042-") - DEBOUNCE_MS
    figures["second search (ms)"] = driver.execute_async_script(TIMED_SEARCH, "-0777-") - DEBOUNCE_MS
    driver.close()
    driver.switch_to.window(driver.window_handles[0])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DATA / "synthetic.json")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--keep", type=Path, default=None, help="Write the runs and pages here (default: a temporary folder)."
    )
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    dataset = _dataset(args.dataset)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench-viewer-"))
    folder.mkdir(parents=True, exist_ok=True)
    view, report, timings = _pages(dataset, folder)
    print(f"dataset: {dataset} ({dataset.stat().st_size / 1e6:.1f} MB)")
    for name, value in timings.items():
        print(f"{name}: {value:.2f}")
    for page in (view, report):
        print(f"{page.name}: {page.stat().st_size / 1e6:.2f} MB")
    driver = _driver()
    try:
        print(f"chromium {driver.capabilities.get('browserVersion', '?')}, repeat {args.repeat} (+1 warm-up)")
        for page in (view, report):
            uri = page.resolve().as_uri()
            _measure(driver, uri)  # warm-up: page cache, compiled script
            runs = [_measure(driver, uri) for _ in range(args.repeat)]
            print(f"\n{page.name}: min / median / max over {args.repeat} loads")
            for name in runs[0]:
                values = sorted(run[name] for run in runs)
                print(f"  {name:30s} {values[0]:8.0f} {median(values):8.0f} {values[-1]:8.0f}")
    finally:
        driver.quit()
    if args.keep is None:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
