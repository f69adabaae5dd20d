"""The official SafePyramid match rule, public: RMR@tau as the reference scorer counts it.

A case matches at tolerance tau when neither its false positives nor its false
negatives exceed ``floor(eps * |G| / 100)`` with ``eps = (1 - tau) * 100`` (contract
section 2). Optimizer metrics use these names so that what a compile maximises is
the number ``score`` reports. ``PolicyRecord`` and ``JudgmentRecord`` are the result
records: what a program answers (the runner adds the case and run fields), what result
files hold and what reading them gives; ``Usage`` is the tokens and dollars they carry
(the one usage type of every layer).
"""

from sp_dspy._metrics import TAUS, JudgmentRecord, PolicyRecord, rmr_match, tolerance
from sp_dspy._usage import Usage

__all__ = ["TAUS", "JudgmentRecord", "PolicyRecord", "Usage", "rmr_match", "tolerance"]
