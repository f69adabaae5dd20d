"""Open the report in headless Chromium: no JavaScript error, no broken image, no fetch.

A check script is injected at the top of ``<head>``, before the report's own (its Cases view's):
``window.onerror``, an unhandled promise rejection and CSP violations mark the root element, and on ``load`` a marker
lists how many images did not decode. The injected CSP allows only ``data:`` images
and inline styles, so any network reference shows up as a violation. Skipped only
when ``chromium`` is not on PATH (CI installs the Debian ``chromium`` package).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from sp_dspy._benchmarks import load_benchmark
from sp_dspy._report import build_summary, write_html

FIXTURES = Path(__file__).parent / "fixtures" / "report"
CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not on PATH (apt-get install -y chromium)"
)

CHECK = """<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; \
style-src 'unsafe-inline'; script-src 'unsafe-inline'"><script>
function mark(k,v){document.documentElement.setAttribute(k,String(v));}
window.onerror=function(m){mark('data-js-error',m);};
window.addEventListener('unhandledrejection',function(e){mark('data-js-error',e.reason);});
document.addEventListener('securitypolicyviolation',function(e){mark('data-csp-violation',e.blockedURI);});
window.addEventListener('load',function(){var all=Array.prototype.slice.call(document.images);
var broken=all.filter(function(i){return !(i.complete&&i.naturalWidth>0);}).length;
var d=document.createElement('div');d.id='sp-check';d.textContent='SP-CHECK images='+all.length+' broken='+broken;
document.body.appendChild(d);});</script>"""


def _browse(page: Path, profile: Path) -> str:
    """The DOM after load, as Chromium serialises it."""
    assert CHROMIUM is not None
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=10000",
        "--dump-dom",
    ]
    done = subprocess.run(
        [CHROMIUM, *flags, page.resolve().as_uri()], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _instrumented(html: str) -> str:
    head = html.index("<head>") + len("<head>")
    return html[:head] + CHECK + html[head:]


def _verdict(dom: str) -> tuple[int, int, str | None, str | None]:
    found = re.search(r"SP-CHECK images=(\d+) broken=(\d+)", dom)
    assert found, "the load handler never ran: " + dom[:500]
    js_error = re.search(r'data-js-error="([^"]*)"', dom)
    violation = re.search(r'data-csp-violation="([^"]*)"', dom)
    return (
        int(found.group(1)),
        int(found.group(2)),
        js_error.group(1) if js_error else None,
        violation.group(1) if violation else None,
    )


def test_report_renders_in_chromium_without_errors(tmp_path: Path) -> None:
    cases = load_benchmark(None).cases
    names = ["official_per_policy.jsonl", "official_per_rule.jsonl", "smollm_per_policy.jsonl"]
    summary = build_summary(cases, [(None, [FIXTURES / n]) for n in names], n_boot=100)
    report = write_html(summary, tmp_path / "report.html")
    page = tmp_path / "checked.html"
    page.write_text(_instrumented(report.read_text(encoding="utf-8")), encoding="utf-8")
    dom = _browse(page, tmp_path / "profile")
    images, broken, js_error, violation = _verdict(dom)
    assert (images, broken, js_error, violation) == (6, 0, None, None)
    # The Cases view ran under the same policy and drew its rows (24 cases).
    assert re.search(r'<section id="sp-cases" data-ready="1">', dom)
    assert dom.count('class="cv-row"') == 24


def test_the_check_catches_broken_images_errors_and_fetches(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    bad = (
        '<!DOCTYPE html><html><head></head><body><img src="data:image/png;base64,AAAA">'
        '<img src="https://example.invalid/x.png"><script>notDefined();</script></body></html>'
    )
    page.write_text(_instrumented(bad), encoding="utf-8")
    images, broken, js_error, violation = _verdict(_browse(page, tmp_path / "profile"))
    assert (images, broken) == (2, 2)
    assert js_error is not None and "notDefined" in js_error
    assert violation is not None and "example.invalid" in violation
