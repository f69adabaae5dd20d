"""The report's Cases view: a row per case, each variant's outcome side by side, filters, and
a case opening to its rules, conversation and what each variant answered.

The page stays one file that works from ``file://`` with no network: the cases are one JSON
document (``_cases.cases_document``), gzip'd in base64 in a ``<script type="application/gzip">``
(``data_block``), and the script that renders them (``_viewer.js``) is inline. The script
builds every element with ``textContent``, and base64 holds no ``<``, so neither
``</script>`` nor ``<!--`` in a model's answer ends or comments out the block.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from functools import cache
from importlib import resources

from .._metrics import format_p
from ._html_tables import esc
from ._model import ComparisonSummary

CSS = """
#sp-cases .cv-controls{display:flex;flex-wrap:wrap;gap:6px 14px;align-items:end;margin:8px 0}
#sp-cases .cv-f{display:flex;flex-direction:column;font-size:12px;color:#5b6475}
#sp-cases select,#sp-cases input{font:13px system-ui,sans-serif;padding:3px 4px}
#sp-cases .cv-q{min-width:260px;align-self:end}
#sp-cases .cv-count{color:#4a5262;margin:4px 0}
#sp-cases table.cv-list tr.cv-row{cursor:pointer}#sp-cases table.cv-list tr.cv-row:hover td{background:#f5f8ff}
#sp-cases tr.cv-open td{background:#eef4ff}#sp-cases th.cv-sortable{cursor:pointer;text-decoration:underline dotted}
#sp-cases .cv-b{display:inline-block;font-size:12px;padding:0 6px;border-radius:8px;white-space:nowrap}
#sp-cases .cv-ok{background:#dcfae6;color:#067647}#sp-cases .cv-tol{background:#fef0c7;color:#93370d}
#sp-cases .cv-bad{background:#fee4e2;color:#b42318}#sp-cases .cv-excl{background:#eaecf0;color:#344054}
#sp-cases .cv-none{color:#98a2b3}
#sp-cases .cv-case{padding:6px 4px 12px}#sp-cases .cv-case h4{margin:2px 0 4px;font-size:15px}
#sp-cases .cv-runs{display:grid;gap:10px;margin:8px 0}
#sp-cases .cv-run{border:1px solid #e3e6eb;border-radius:6px;padding:6px 8px;min-width:0}
#sp-cases .cv-run h5{margin:0 0 4px;font-size:13px}
#sp-cases .cv-text{white-space:pre-wrap;overflow-wrap:anywhere;font:12px/1.45 ui-monospace,Menlo,monospace;
background:#f8f9fb;border:1px solid #eceff3;padding:6px 8px;max-height:360px;overflow:auto}
#sp-cases .cv-label{font-weight:600;font-size:12px;margin:8px 0 2px;color:#344054}
#sp-cases table.cv-rules tr.cv-gold td:first-child{font-weight:600}
#sp-cases .cv-flag{display:inline-block;margin-left:4px;font-size:11px;padding:0 5px;border-radius:8px;background:#f4ebff;color:#6941c6}
#sp-cases .cv-sub,#sp-cases .cv-verdict{font-size:11px;color:#5b6475}
#sp-cases .cv-reason{font-size:12px;color:#1d2330;margin-top:2px;overflow-wrap:anywhere}
#sp-cases .cv-missing{color:#98a2b3;font-style:italic}
#sp-cases .cv-more{margin:6px 0;padding:4px 12px}
#sp-cases dl.cv-meta{display:grid;grid-template-columns:max-content 1fr;gap:1px 12px;margin:4px 0;font-size:13px}
#sp-cases dl.cv-meta dt{color:#5b6475}#sp-cases dl.cv-meta dd{margin:0;overflow-wrap:anywhere}
#sp-cases table.cv-list tr.cv-row td:first-child{white-space:nowrap}
#sp-cases table.cv-list tr.cv-row td{max-width:260px;overflow:hidden;text-overflow:ellipsis}#sp-cases table{table-layout:auto}
"""


@cache
def viewer_script() -> str:
    """The Cases view's script (``_viewer.js``, shipped with the package)."""
    return resources.files(__package__).joinpath("_viewer.js").read_text(encoding="utf-8")


#: A surrogate code point on its own (a model's answer cut inside an emoji, read from a ``\\ud83d``
#: escape): UTF-8 cannot encode it, JSON can escape it.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def data_block(document: object) -> str:
    """``document`` as the page carries it: its JSON (a lone surrogate escaped, as ``JSON.parse``
    reads it back) gzip'd and in base64, which ``_viewer.js`` reads with the browser's
    ``DecompressionStream``. The texts are once each in the document already (``_cases``);
    gzip and base64 make it about 2.7 times smaller on English-like text (42 MB of JSON in a 15 MB
    page at 3,000 cases x 3 runs), and base64 holds no ``<`` to end the script."""
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    text = _LONE_SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
    return base64.b64encode(gzip.compress(text.encode("utf-8"), mtime=0)).decode("ascii")


def read_data_block(block: str) -> object:
    """The document ``data_block`` wrote (for tests and tools reading a page)."""
    return json.loads(gzip.decompress(base64.b64decode(block, validate=True)))


def _paired(summary: ComparisonSummary) -> str:
    """Each variant against the baseline over all cases: the paired differences and the paired
    randomization test, as the report's differences table and ``compare`` give them."""
    rows = []
    for diff in summary.diffs_for("ALL"):
        parts = []
        for metric, name in (("rmr_avg", "RMR"), ("rmr_exact", "RMR@1.0"), ("rdr", "RDR")):
            value, interval = diff.diff.get(metric), diff.ci.get(metric)
            text = "–" if value is None else f"{value:+.2f}"
            if interval:
                text += f" [{interval[0]:+.2f}, {interval[1]:+.2f}]"
            elif diff.ci_note:
                text += f" ({diff.ci_note})"
            parts.append(f"{name} {esc(text)}")
        test = (
            "paired test –"
            if diff.test_p is None
            else f"paired test p = {format_p(diff.test_p)} ({diff.variant_only_exact} exact only in "
            f"{esc(diff.label)}, {diff.baseline_only_exact} only in {esc(diff.baseline)})"
        )
        rows.append(
            f"<li><b>{esc(diff.label)}</b> − {esc(diff.baseline)} on {diff.n_pairs} cases both scored: "
            f"{'; '.join(parts)}; {test}</li>"
        )
    if not rows:
        return ""
    return (
        "<p class=lead>Run against run, over all cases (95% paired bootstrap CIs):</p><ul class=cv-paired>"
        + ("".join(rows) + "</ul>")
    )


def cases_section(summary: ComparisonSummary) -> str:
    """The Cases section of the page ('' when the summary carries no cases view)."""
    document = summary.cases_view
    if document is None:
        return ""
    lead = (
        "<p class=lead>One row per case with each variant's outcome (exact, within tolerance, "
        "FP/FN, excluded and why). Filter, search and sort; click a case to open its rules "
        "marked per variant (TP, FP, FN; per-rule runs with each judgment's verdict and reason), "
        "what each variant answered and what it cost, and the conversation. <i>Won by B</i>: B "
        "matches exactly where A does not (an excluded case is not a match).</p>"
    )
    return (
        f"<section id=sp-cases><h2>Cases</h2>{lead}{_paired(summary)}"
        "<noscript><p>The Cases view needs JavaScript.</p></noscript>"
        f'<script type="application/gzip" id="sp-cases-data">{data_block(document)}</script>'
        f"<script>{viewer_script()}</script></section>"
    )
