"""The benchmark case, public: what a guard program reads (policy, conversation, rubric, gold rules).

Importing this builds the case schema only, not the loaders, the benchmark kinds or the runner.
"""

from sp_dspy._data import Case

__all__ = ["Case"]
