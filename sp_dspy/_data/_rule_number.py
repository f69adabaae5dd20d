"""``RuleNumber``: the type of every rule number read from a file (dataset or results).

Its own module, with no model built on import, so the result records can use it
without importing the case schema. Python's ``bool`` is an ``int``, so pydantic's lax
mode would read ``true`` as rule 1 and ``false`` as rule 0: a broken file would score
as if it named rules. ``RuleNumber`` refuses booleans and stays as lax as pydantic is
otherwise (``"3"`` and ``3.0`` are rule 3, as they always were).

A case's own rule numbers (``CaseRuleNumber``: its rubric, ground truth and failure-mode
lists) start at 1, as policies number their rules. A result line's may not: the strict
parser keeps the reference's reading of an answer, where ``false`` is rule 0 and ``-1``
stays a (false-positive) rule, so results are read with ``RuleNumber``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BeforeValidator


def _not_a_boolean(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError(f"expected a rule number, got the boolean {str(value).lower()}")
    return value


RuleNumber = Annotated[int, BeforeValidator(_not_a_boolean)]


def _from_one(value: int) -> int:
    if value < 1:
        raise ValueError(f"rule {value}: rules are numbered from 1")
    return value


CaseRuleNumber = Annotated[int, BeforeValidator(_not_a_boolean), AfterValidator(_from_one)]
