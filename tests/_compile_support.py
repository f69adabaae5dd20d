"""Fake LMs for compile tests: the instructed guard on a stub server, and a scripted proposer.

The ``fake/instructed`` guard reports every violation only when its instructions say
"check every rule"; asked for instructions, it sometimes proposes that phrase itself.
``scripted_prompt_lm`` plays a prompt (or reflection) model that *always* proposes it,
for tests that need the proposal on a fixed call. Built only on the public
``sp_dspy._lm`` API (``enqueue`` and ``StubServer``).
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from sp_dspy._benchmarks import load_benchmark
from sp_dspy._data import Case
from sp_dspy._lm import LMConfig, fake_engine, make_lm
from sp_dspy._lm._fake import INSTRUCTION_PHRASE
from sp_dspy._runner._fake_gold import teach_fake
from tests._stub_server import StubServer

BETTER_INSTRUCTION = (
    f"{INSTRUCTION_PHRASE.capitalize()} of the policy against the chatbot's turns and list the number "
    "of every rule the conversation violates."
)
# COPRO and MIPRO ask through DSPy's chat adapter for ``proposed_instruction`` (COPRO
# also for an output prefix; the adapter ignores sections a signature lacks). GEPA's
# reflection asks through the JSON adapter for ``new_instruction``.
PROPOSAL_REPLY = (
    f"[[ ## proposed_instruction ## ]]\n{BETTER_INSTRUCTION}\n\n"
    "[[ ## proposed_prefix_for_output_field ## ]]\nViolated Rules:\n\n[[ ## completed ## ]]"
)
REFLECTION_REPLY = json.dumps({"new_instruction": BETTER_INSTRUCTION})


def sample_cases() -> list[Case]:
    return load_benchmark(None).cases


def scripted_prompt_lm(reply: str = PROPOSAL_REPLY, replies: int = 200) -> Any:
    """An in-process fake whose next ``replies`` answers are ``reply`` (an instruction proposal)."""
    lm = make_lm(LMConfig(model="fake/instructed"))
    engine = fake_engine(lm)
    assert engine is not None
    engine.enqueue(*[reply] * replies)
    return lm


def improving_stub(cases: list[Case] | None = None) -> StubServer:
    """A stub server answering as ``fake/instructed``, taught the gold answers of ``cases``.

    The fake itself proposes instructions when an optimizer asks (COPRO, MIPRO, GEPA,
    SIMBA), sometimes the one with "check every rule", so compiles against it improve.
    """
    server = StubServer(behaviour="instructed")
    teach_fake(SimpleNamespace(engine=server.fake), cases or sample_cases())
    return server
