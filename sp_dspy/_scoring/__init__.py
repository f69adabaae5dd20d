"""Scoring recorded results as the commands do: the result files read, the dataset and the cases
their runs selected loaded (``load_for_results``), and ``sp-dspy score``'s job (``score_results``).

``score``, ``compare``, ``report``, ``view``, ``show`` and ``export`` all load recorded data here,
so two commands never score the same run on different cases. Importing this package does not
import numpy (the intervals load when a score asks for them).
"""

from ._config import NBoot, config_from_flags
from ._recorded import Note, Notify, RecordedSelection, ScoredData, load_for_results, read_results
from ._score import ScoreConfig, ScoredResults, build_score_config, score_results

__all__ = [
    "NBoot",
    "Note",
    "Notify",
    "RecordedSelection",
    "ScoreConfig",
    "ScoredData",
    "ScoredResults",
    "build_score_config",
    "config_from_flags",
    "load_for_results",
    "read_results",
    "score_results",
]
