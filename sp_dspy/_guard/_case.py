"""A benchmark ``Case`` built from what an application has: a policy and a conversation.

Every guard program takes a ``Case``, so a deployed guard builds one. Two things a
benchmark case has are unknown to an application:

- The gold answer: ``ground_truth_violations`` is empty. Nothing reads it to
  answer; it only labels results for scoring.
- The rubric (each rule's type and which rules modify which). Per-rule programs
  need one to build their targets, so every parsed rule becomes a ``decisive`` rule
  with no pairings. Consequences: every rule is judged on its own (conditionals
  too, which the benchmark never judges alone), and no judge sees the exceptions or
  conditionals that modify its rule. Rule interactions are therefore visible only
  to per-policy programs, which read the whole policy text; that is why per-policy
  is the natural form to deploy and the default.

``framework`` (optional) is the regulatory framework text: a per-rule judge is
shown it as at L2; per-policy programs see it only if the policy text contains it,
as benchmark policies do.
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
    """The ``Case`` a guard checks (see the module docstring for what it lacks).

    Raises:
        DataError: a bad policy, conversation or framework (one line naming where).
    """
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
