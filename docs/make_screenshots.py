"""Screenshots of the report's Cases view for the docs and the README (``docs/cases-*.png``).

The page is the bundled sample's 24 cases with three of the tests' fixture runs (official
per-policy as the baseline, official per-rule, SmolLM2 per-policy), rendered by headless
Chromium through chromedriver and saved with selenium's ``save_screenshot``, then reduced to
a 256-colour palette to keep the PNGs small.

    python docs/make_screenshots.py
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from sp_dspy import load_benchmark
from sp_dspy._report import build_summary, write_html

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "report"
DOCS = ROOT / "docs"
RUNS = {
    "baseline": "official_per_policy.jsonl",
    "per-rule": "official_per_rule.jsonl",
    "smollm": "smollm_per_policy.jsonl",
}


def _save(driver: webdriver.Chrome, name: str) -> None:
    path = DOCS / name
    driver.save_screenshot(str(path))
    Image.open(path).convert("RGB").quantize(colors=256).save(path, optimize=True)
    print(f"{path}: {path.stat().st_size // 1024} KiB")


def _choose(driver: webdriver.Chrome, key: str, value: str) -> None:
    Select(driver.find_element(By.CSS_SELECTOR, f'select[data-filter="{key}"]')).select_by_value(value)


def _top(driver: webdriver.Chrome, css: str) -> None:
    driver.execute_script("document.querySelector(arguments[0]).scrollIntoView(true)", css)


def main() -> None:
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or chromedriver is None:
        sys.exit("chromium and chromedriver are needed: apt-get install -y chromium chromium-driver")
    variants = [(label, [FIXTURES / name]) for label, name in RUNS.items()]
    summary = build_summary(load_benchmark(None).cases, variants, "baseline", n_boot=1000)
    page = write_html(summary, Path(tempfile.mkdtemp()) / "view.html", title="sp-dspy view", plots=[])
    options = Options()
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--window-size=1280,860",
    ):
        options.add_argument(flag)
    options.binary_location = chromium
    driver = webdriver.Chrome(service=Service(chromedriver), options=options)
    try:
        driver.get(page.resolve().as_uri())
        WebDriverWait(driver, 30).until(
            lambda d: d.find_element(By.ID, "sp-cases").get_attribute("data-ready") == "1"
        )
        _top(driver, "#sp-cases")
        _save(driver, "cases-list.png")
        _choose(driver, "b", "1")
        _choose(driver, "pair", "won")
        _top(driver, "#sp-cases .cv-controls")
        _save(driver, "cases-won-by-b.png")
        _choose(driver, "pair", "")
        driver.find_element(By.CSS_SELECTOR, 'tr.cv-row[data-case="priv-101-l1"]').click()
        _top(driver, 'tr.cv-row[data-case="priv-101-l1"]')
        _save(driver, "cases-open.png")
        driver.execute_script("document.querySelector('#sp-cases table.cv-rules').scrollIntoView(true)")
        _save(driver, "cases-rules.png")
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
