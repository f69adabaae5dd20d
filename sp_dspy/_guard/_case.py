"""A benchmark ``Case`` built from what an application has: a policy and a conversation.

An application has no gold answer (``ground_truth_violations`` is empty; only scoring
reads it) and no rubric: every rule becomes a ``decisive`` rule without pairings, so a
per-rule judge never sees the exceptions or conditionals that modify its rule. Rule
interactions reach only per-policy programs, which read the whole policy; hence
per-policy is the default to deploy. ``framework`` is shown to per-rule judges as at L2.
"""

from __future__ import annotations

import hashlib
from typing import cast

from .._data._schema import Case, Rubric, RubricEntry
from .._errors import DataError
from ._conversation import conversation_text
from ._policy import policy_rules
from ._source import Source

GUARD_DOMAIN = "application"


def guard_case(
    policy: object,
    conversation: object,
    *,
    framework: object = "",
    policy_source: Source | None = None,
    conversation_source: Source | None = None,
) -> Case:
    """The ``Case`` a guard checks; a bad input is a one-line ``DataError`` naming where."""
    rules = policy_rules(policy, source=policy_source)
    text = conversation_text(conversation, source=conversation_source)
    if not isinstance(framework, str):
        raise DataError(f"framework: expected a string, got {type(framework).__name__}")
    policy_text = cast(str, policy)  # policy_rules checked it
    entries = [RubricEntry(rule=number, text=rule, type="decisive") for number, rule in rules.items()]
    digest = hashlib.sha256("\0".join((policy_text, text, framework)).encode("utf-8")).hexdigest()[:12]
    return Case(
        id=f"guard-{digest}",
        domain=GUARD_DOMAIN,
        level="L2" if framework.strip() else "L0",
        conversation=text,
        policy=policy_text,
        framework=framework.strip(),
        ground_truth_violations=[],
        rubric=Rubric(non_violations=entries),
    )
