"""Metrics for PKU-SafeRLHF cast as an in-context policy task (see ``sp_dspy._data._pku``).

SafePyramid's RMR/RDR measure rule-set agreement; PKU-SafeRLHF is labelled with harm
categories, a safe flag and a severity, so it gets the metrics its paper reports
(binary accuracy, category-set exact match, severity accuracy) plus per-category F1.
"""

from sp_dspy._metrics_pku._render import CATEGORY_SCOPE, render_pku_report
from sp_dspy._metrics_pku._score import PKU_PUBLISHED, PkuReport, score_pku_results

__all__ = ["CATEGORY_SCOPE", "PKU_PUBLISHED", "PkuReport", "render_pku_report", "score_pku_results"]
