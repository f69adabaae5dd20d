"""Fake helper LMs for compile tests: a prompt/reflection model that proposes better instructions.

The ``fake/instructed`` guard reports every violation only when its instructions say
"check every rule". These helpers play the optimizer's *prompt* (or *reflection*)
model and always propose an instruction with that phrase, so a test can show that
an optimizer which rewrites instructions improves the program: mechanics, not
quality. Built only on the public ``sp_dspy._lm`` API (``enqueue`` and a
``StubServer`` responder).
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from sp_dspy._data import Case, load_benchmark
from sp_dspy._lm import INSTRUCTION_PHRASE, LMConfig, StubServer, fake_engine, make_lm
from sp_dspy._runner._fake_gold import teach_fake

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


def _message_text(body: dict[str, Any]) -> str:
    parts = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
        parts.append(str(content or ""))
    return "\n".join(parts)


def improving_stub(cases: list[Case] | None = None) -> StubServer:
    """A stub server answering as ``fake/instructed`` that also proposes better instructions.

    Requests asking for ``proposed_instruction`` (COPRO, MIPRO) get ``PROPOSAL_REPLY``,
    those asking for ``new_instruction`` (GEPA's reflection) ``REFLECTION_REPLY``; everything else is the fake guard,
    taught the gold answers of ``cases`` (default: the bundled sample).
    """
    server = StubServer(behaviour="instructed")
    teach_fake(SimpleNamespace(engine=server.fake), cases or sample_cases())

    def respond(body: dict[str, Any]) -> str:
        text = _message_text(body)
        if "new_instruction" in text:
            return REFLECTION_REPLY
        if "proposed_instruction" in text:
            return PROPOSAL_REPLY
        return server.fake.reply(body.get("messages") or [], response_format=body.get("response_format"))

    server.responder = respond
    return server
