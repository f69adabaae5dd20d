"""The report's Cases view driven in headless Chromium through chromedriver (selenium).

Filters, search, sorting, opening a case, run against run and hostile text are clicked and
their results asserted against what the metrics layer says of the same records. One browser
serves every test of the module (starting one costs seconds); each test loads its page
afresh. Skipped only when Debian's ``chromium`` or ``chromedriver`` is not on PATH (CI and
``make browser`` install both).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

from sp_dspy._benchmarks import load_benchmark
from sp_dspy._metrics import case_outcomes, classify_failure, read_result_files, resolve_records
from sp_dspy._metrics._official import error_types
from sp_dspy._report import build_summary, write_html

FIXTURES = Path(__file__).parent / "fixtures" / "report"
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None or CHROMEDRIVER is None,
        reason="chromium or chromedriver is not on PATH (apt-get install -y chromium chromium-driver)",
    ),
    pytest.mark.timeout(180),
]

CASES = load_benchmark(None).cases
HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"></textarea><!--'
RAW = '</script><b id="injected">bold</b>'


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = Options()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument("--window-size=1400,1000")
    assert CHROMIUM is not None and CHROMEDRIVER is not None
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines() if line]


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A: the official per-policy run; B: the per-rule run, each judgment with a reason and one
    without a verdict; C: a per-policy run whose first answer is hostile markup."""
    folder = tmp_path_factory.mktemp("runs")
    judgments = _lines("official_per_rule.jsonl")
    for judgment in judgments:
        judgment["reason"] = f"reason for rule {judgment['rule']} of {judgment['cid']}"
    judgments[1].update(pred=None, parse_failed=True, answer="maybe?")
    hostile = _lines("official_per_policy.jsonl")
    hostile[0].update(analysis=HOSTILE, answer=RAW, parse_status="recovered")
    return {
        "A": FIXTURES / "official_per_policy.jsonl",
        "B": _write(folder / "per_rule.jsonl", judgments),
        "C": _write(folder / "hostile.jsonl", hostile),
    }


@pytest.fixture(scope="module")
def page(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> str:
    labels = ["A", "B", "<b>C</b>"]
    variants = [(label, [runs[key]]) for label, key in zip(labels, "ABC", strict=True)]
    summary = build_summary(CASES, variants, "A", n_boot=200)
    path = write_html(summary, tmp_path_factory.mktemp("page") / "report.html", plots=[])
    return path.resolve().as_uri()


def _outcomes(path: Path) -> dict[str, Any]:
    records = resolve_records(CASES, read_result_files([path]))
    return {o.id: o for o in case_outcomes(CASES, records)}


def _types(case: Any, outcome: Any) -> set[str]:
    fps, fns = error_types(case, outcome)
    return {*fps.values(), *fns.values()}


def _open(driver: WebDriver, uri: str) -> None:
    driver.get(uri)
    WebDriverWait(driver, 30).until(
        lambda d: d.find_element(By.ID, "sp-cases").get_attribute("data-ready") == "1"
    )


def _choose(driver: WebDriver, key: str, value: str) -> None:
    Select(driver.find_element(By.CSS_SELECTOR, f'select[data-filter="{key}"]')).select_by_value(value)


def _shown(driver: WebDriver) -> list[str]:
    ids: list[str] = driver.execute_script(
        "return Array.from(document.querySelectorAll('#sp-cases tr.cv-row')).map(r => r.dataset.case)"
    )
    return ids


def _search(driver: WebDriver, text: str) -> None:
    """Type into the search box and wait for the list to follow (the box waits for a pause in typing)."""
    count = driver.find_element(By.CSS_SELECTOR, ".cv-count")
    before = count.text
    box = driver.find_element(By.CSS_SELECTOR, 'input[data-filter="q"]')
    box.clear()
    box.send_keys(text)
    WebDriverWait(driver, 10).until(lambda _: count.text != before)


def test_filters_search_and_sorting(browser: WebDriver, page: str, runs: dict[str, Path]) -> None:
    _open(browser, page)
    assert browser.find_element(By.CSS_SELECTOR, ".cv-count").text == "24 of 24 cases match"
    _choose(browser, "lv", "L1")
    assert _shown(browser) == [case.id for case in CASES if case.level == "L1"]
    _choose(browser, "lv", "")
    _choose(browser, "run", "0")  # A's outcomes
    _choose(browser, "o", "e")
    excluded = [cid for cid, o in _outcomes(runs["A"]).items() if o.excluded]
    assert excluded and _shown(browser) == excluded
    _choose(browser, "o", "fp")
    with_fp = [cid for cid, o in _outcomes(runs["A"]).items() if not o.excluded and o.fp]
    assert with_fp and _shown(browser) == with_fp
    _choose(browser, "o", "")
    by_id = {case.id: case for case in CASES}
    outcomes = _outcomes(runs["A"])
    _choose(browser, "m", "FM-D1")
    flagged = [cid for cid, o in outcomes.items() if "FM-D1" in classify_failure(by_id[cid], o)]
    assert flagged and _shown(browser) == flagged
    _choose(browser, "m", "")
    _choose(browser, "et", "exception")
    exception = [cid for cid, o in outcomes.items() if "exception" in _types(by_id[cid], o)]
    assert exception and _shown(browser) == exception
    _choose(browser, "et", "")
    # A phrase of priv-101's conversation: its three levels share it.
    _search(browser, "GPS history for her sick days")
    assert _shown(browser) == ["priv-101-l0", "priv-101-l1", "priv-101-l2"]
    browser.find_element(By.CSS_SELECTOR, 'th[data-sort="id"]').click()
    browser.find_element(By.CSS_SELECTOR, 'th[data-sort="id"]').click()  # again: descending
    assert _shown(browser) == ["priv-101-l2", "priv-101-l1", "priv-101-l0"]


def test_a_case_opens_with_each_run_side_by_side(browser: WebDriver, page: str) -> None:
    _open(browser, page)
    browser.find_element(By.CSS_SELECTOR, 'tr.cv-row[data-case="priv-101-l0"]').click()
    detail = browser.find_element(By.CSS_SELECTOR, "tr.cv-detail")
    panels = detail.find_elements(By.CSS_SELECTOR, ".cv-run")
    assert [p.get_attribute("data-run") for p in panels] == ["A", "B", "<b>C</b>"]
    assert "1872 in, 295 out" in panels[0].text and "$0.000458" in panels[0].text

    def marks(rule: int) -> list[str]:
        row = detail.find_element(By.CSS_SELECTOR, f'tr[data-rule="{rule}"]')
        return [
            cell.find_element(By.CSS_SELECTOR, ".cv-b").text
            for cell in row.find_elements(By.CSS_SELECTOR, ".cv-mark")
        ]

    # A predicted 1, 3, 6, 12 and 99 (no rule of this policy); B's judgment of rule 2 has no verdict.
    assert marks(1) == ["TP", "TP", "TP"]
    assert marks(99) == ["FP", "–", "FP"]
    assert "(not a rule of this policy)" in detail.find_element(By.CSS_SELECTOR, 'tr[data-rule="99"]').text
    assert marks(2)[1] == "no verdict"
    rule_1 = detail.find_element(By.CSS_SELECTOR, 'tr[data-rule="1"]').text
    assert "violated" in rule_1 and "reason for rule 1 of priv-101-l0" in rule_1
    assert "decisive" in rule_1 and "gold" in rule_1
    # Closing it removes the detail row; Enter opens it from the keyboard.
    row = browser.find_element(By.CSS_SELECTOR, 'tr.cv-row[data-case="priv-101-l0"]')
    row.click()
    assert not browser.find_elements(By.CSS_SELECTOR, "tr.cv-detail")
    row.send_keys(Keys.ENTER)
    assert len(browser.find_elements(By.CSS_SELECTOR, "tr.cv-detail .cv-run")) == 3


def test_each_level_opens_to_its_full_conversation_and_rules(browser: WebDriver, page: str) -> None:
    """The page keeps a conversation and a repeated rule text once (``test_report_cases``); each
    case still opens to all of its own: the conversation whole, every rule's text at its number."""
    _open(browser, page)
    by_id = {case.id: case for case in CASES}
    for cid in ("priv-101-l0", "priv-101-l1", "priv-101-l2"):
        case = by_id[cid]
        browser.find_element(By.CSS_SELECTOR, f'tr.cv-row[data-case="{cid}"]').click()
        detail = browser.find_element(By.CSS_SELECTOR, "tr.cv-detail")
        conversation = detail.find_element(By.CSS_SELECTOR, ".cv-conv .cv-text").get_attribute("textContent")
        assert conversation == case.conversation
        for rule in case.rubric.entries():
            row = detail.find_element(By.CSS_SELECTOR, f'tr[data-rule="{rule.rule}"]')
            assert row.find_elements(By.TAG_NAME, "td")[2].get_attribute("textContent") == rule.text
        browser.find_element(By.CSS_SELECTOR, f'tr.cv-row[data-case="{cid}"]').click()  # close it


def test_run_against_run_filters_and_header(browser: WebDriver, page: str, runs: dict[str, Path]) -> None:
    _open(browser, page)
    a, b = _outcomes(runs["A"]), _outcomes(runs["B"])
    expected = {
        "won": [cid for cid in a if b[cid].exact and not a[cid].exact],
        "lost": [cid for cid in a if a[cid].exact and not b[cid].exact],
        "wrong": [cid for cid in a if not a[cid].exact and not b[cid].exact],
    }
    assert all(expected.values())
    _choose(browser, "b", "1")
    for pair, ids in expected.items():
        _choose(browser, "pair", pair)
        assert _shown(browser) == ids, pair
        label = Select(
            browser.find_element(By.CSS_SELECTOR, 'select[data-filter="pair"]')
        ).first_selected_option
        assert label.text.endswith(f"({len(ids)})")
    header = browser.find_element(By.CSS_SELECTOR, "ul.cv-paired").text
    assert "B − A on" in header and "paired test p =" in header and "RMR@1.0" in header


def test_hostile_answers_and_labels_stay_text(browser: WebDriver, page: str) -> None:
    _open(browser, page)
    browser.find_element(By.CSS_SELECTOR, 'tr.cv-row[data-case="priv-101-l0"]').click()
    panel = browser.find_element(By.CSS_SELECTOR, '.cv-run[data-run="<b>C</b>"]')
    assert panel.find_element(By.CSS_SELECTOR, ".cv-a").get_attribute("textContent") == HOSTILE
    assert panel.find_element(By.CSS_SELECTOR, ".cv-raw").get_attribute("textContent") == RAW
    assert browser.execute_script("return window.__pwned === undefined")
    assert not browser.find_elements(By.ID, "injected")
    assert not browser.find_elements(By.CSS_SELECTOR, "#sp-cases img, #sp-cases table b")
    assert "<b>C</b>" in browser.find_element(By.CSS_SELECTOR, "table.cv-list thead").text


def test_a_custom_policy_shows_its_tags_and_keeps_its_texts_inert(browser: WebDriver, tmp_path: Path) -> None:
    rows = [
        {
            "id": f"c{i}",
            "policy": f"1. Never say {HOSTILE}.\n2. Stay polite.",
            "messages": [
                {"role": "user", "content": f"question {i} </textarea><img src=x onerror=window.__pwned=3>"},
                {"role": "assistant", "content": "an answer"},
            ],
            "violated_rules": [1] if i % 2 else [],
            "tags": ["odd" if i % 2 else "even"],
        }
        for i in range(6)
    ]
    dataset = tmp_path / "policy.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    cases = load_benchmark(str(dataset), benchmark="custom").cases
    answers = _write(tmp_path / "answers.jsonl", [{"id": f"c{i}", "violated_rules": [1]} for i in range(6)])
    summary = build_summary(cases, [("guard", [answers])], benchmark="custom", n_boot=0)
    _open(browser, write_html(summary, tmp_path / "custom.html", plots=[]).resolve().as_uri())
    headers = browser.find_element(By.CSS_SELECTOR, "table.cv-list thead").text
    assert "Tags" in headers and "Level" not in headers
    _choose(browser, "tg", "even")
    assert _shown(browser) == ["c0", "c2", "c4"]
    browser.find_element(By.CSS_SELECTOR, 'tr.cv-row[data-case="c2"]').click()
    detail = browser.find_element(By.CSS_SELECTOR, "tr.cv-detail")
    assert f"Never say {HOSTILE}." in detail.find_element(By.CSS_SELECTOR, 'tr[data-rule="1"]').text
    assert "onerror=window.__pwned=3" in detail.find_element(By.CSS_SELECTOR, ".cv-conv").text
    assert browser.execute_script("return window.__pwned === undefined")
    assert not browser.find_elements(By.CSS_SELECTOR, "#sp-cases img")


def test_the_view_is_in_the_url_fragment_so_a_link_opens_it_again(
    browser: WebDriver, page: str, runs: dict[str, Path]
) -> None:
    _open(browser, page)
    _choose(browser, "run", "0")
    _choose(browser, "o", "fp")
    browser.find_element(By.CSS_SELECTOR, "tr.cv-row").click()
    link = browser.current_url
    fragment = link.partition("#")[2]
    with_fp = [cid for cid, o in _outcomes(runs["A"]).items() if not o.excluded and o.fp]
    assert "run=0" in fragment and "o=fp" in fragment and f"case={with_fp[0]}" in fragment
    _open(browser, page)  # the bare page: the first view, no fragment written
    assert "#" not in browser.current_url and len(_shown(browser)) == len(CASES)
    browser.get("about:blank")
    _open(browser, link)  # the link: the same filters, the same case open
    assert _shown(browser) == with_fp
    assert Select(
        browser.find_element(By.CSS_SELECTOR, 'select[data-filter="o"]')
    ).first_selected_option.text == ("has a false positive")
    detail = browser.find_element(By.CSS_SELECTOR, "tr.cv-detail")
    assert detail.find_element(By.CSS_SELECTOR, "h4").text == with_fp[0]
