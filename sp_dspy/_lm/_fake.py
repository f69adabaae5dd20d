"""A deterministic, offline guard model (``fake/<behaviour>``) for tests, smoke runs and optimizer
checks (the behaviours are described in the README's "The fake LM").

It answers through DSPy's real call path in the format its caller parses; usage counts are
whitespace tokens. ``instructed`` reports every gold violation only when told to "check every
rule", shown a demo listing several rules, or sampled (``temperature > 0``) the 2nd, 4th... time;
asked for instructions, the fake proposes :data:`PROPOSED_INSTRUCTION` on the 1st, 3rd... ask.
"""

from __future__ import annotations

import collections
import hashlib
import random
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._errors import ConfigError
from ._dspy import AsyncEngine, SyncEngine, import_dspy, request_system
from ._fake_prompts import Decision, PromptView, contains_phrase, message_text, read_prompt, render

if TYPE_CHECKING:
    from dspy.lm15 import Request, Response

BEHAVIOURS = ("oracle", "empty", "all", "random", "refuse", "garbage", "instructed")
REFUSAL_TEXT = "I cannot evaluate this."
GARBAGE_TEXT = "Well, reading this exchange, there is a lot going on here and it mostly seems fine overall."
INSTRUCTION_PHRASE = "check every rule"
PROPOSED_INSTRUCTION = (
    "Check every rule of the policy against the chatbot's turns and list the number of every rule "
    "the conversation violates."
)
#: The most completion tokens a fake answer has when the call sets no ``max_tokens`` (a longer one is cut),
#: so that a fake run's caps, like a real model's, can reserve each call's worst case.
FAKE_OUTPUT_LIMIT = 512
PLAIN_INSTRUCTION = "Read the policy and the conversation, then list the rules the chatbot's replies violate."
_SEVERAL_RULES = re.compile(r"\[\s*\d+\s*(?:,\s*\d+\s*)+\]")


def count_tokens(text: str) -> int:
    """Whitespace token count: a stand-in tokenizer for the fake's usage figures."""
    return len(text.split())


@dataclass(frozen=True)
class FakeCall:
    """One request the fake answered: its messages, response format and reply."""

    messages: list[dict[str, str]]
    reply: str
    response_format: Mapping[str, Any] | None = None


class FakeEngine(SyncEngine):
    """Synchronous DSPy engine answering like a guard model; its copies share gold, queue and call log."""

    def __init__(self, behaviour: str = "oracle") -> None:
        """``behaviour``: a fake model string (``fake`` is ``fake/oracle``) or a bare behaviour."""
        self.behaviour = "oracle" if behaviour == "fake" else behaviour.removeprefix("fake/")
        if self.behaviour not in BEHAVIOURS:
            raise ConfigError(
                f"model {behaviour!r}: unknown fake behaviour; use fake/ + one of {', '.join(BEHAVIOURS)}"
            )
        self.calls: list[FakeCall] = []
        self._cases: list[tuple[tuple[str, ...], tuple[int, ...]]] = []
        self._queue: collections.deque[str] = collections.deque()
        self._asked: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def register_case(self, key_text: str | Sequence[str], violated: Iterable[int]) -> None:
        """Teach the oracle a case: requests containing every ``key_text`` get ``violated``.

        Keys: ``(case.policy, case.conversation)`` for per-policy prompts and DSPy programs;
        the per-rule user message (or ``(conversation, "Rule N: text")``) with ``[N]`` or ``[]``.
        """
        keys = (key_text,) if isinstance(key_text, str) else tuple(key_text)
        if not keys or not all(isinstance(k, str) and k for k in keys):
            raise ValueError("register_case needs one or more non-empty key texts")
        with self._lock:
            self._cases.append((keys, tuple(int(n) for n in violated)))

    def gold(self, text: str) -> tuple[int, ...] | None:
        """Gold of the registered case whose keys all occur in ``text``: the longest total key
        length wins, then the latest registered."""
        with self._lock:
            matches = [
                (sum(len(k) for k in keys), index, violated)
                for index, (keys, violated) in enumerate(self._cases)
                if all(k in text for k in keys)
            ]
        return max(matches)[2] if matches else None

    def enqueue(self, *replies: str) -> None:
        """Queue literal replies; each request consumes one before any behaviour runs."""
        with self._lock:
            self._queue.extend(replies)

    def reply(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        response_format: Mapping[str, Any] | None = None,
        temperature: float | None = None,
    ) -> str:
        """Answer OpenAI-style ``messages`` (the engine's and the stub server's path); a
        ``temperature`` above 0 marks the request as sampled."""
        with self._lock:
            queued = self._queue.popleft() if self._queue else None
        if queued is None:
            view = read_prompt(messages, wants_json=bool(response_format))
            sampled = bool(temperature) and self.behaviour == "instructed"
            repeat = 0
            if view.asks_for_instructions or sampled:  # how often this very request was answered before
                key = hashlib.sha256(view.text.encode("utf-8")).hexdigest()
                with self._lock:
                    repeat = self._asked[key]
                    self._asked[key] += 1
            decision = self.decide(view, repeat, sampled=sampled)
            queued = decision if isinstance(decision, str) else render(view, decision)
        plain = [
            {"role": str(m.get("role", "")), "content": message_text(m.get("content"))} for m in messages
        ]
        self.calls.append(FakeCall(plain, queued, response_format))
        return queued

    def decide(self, view: PromptView, repeat: int = 0, *, sampled: bool = False) -> Decision | str:
        """The answer to ``view`` (``repeat``: earlier answers to the same request): a
        :class:`Decision`, or a literal reply (refusal, garbage)."""
        behaviour = self.behaviour
        if behaviour == "refuse":
            return REFUSAL_TEXT
        if behaviour == "garbage":
            return GARBAGE_TEXT
        if view.asks_for_instructions:
            instruction = PROPOSED_INSTRUCTION if repeat % 2 == 0 else PLAIN_INSTRUCTION
            return Decision(behaviour, (), instruction=instruction, modules=tuple(view.module_names()))
        violated: Sequence[int] = ()
        if behaviour == "all":
            violated = view.candidate_rules()
        elif behaviour == "random":
            seed = int.from_bytes(hashlib.sha256(view.text.encode("utf-8")).digest()[:8], "big")
            rng = random.Random(seed)
            violated = [n for n in view.candidate_rules() if rng.random() < 0.5]
        elif behaviour in ("oracle", "instructed"):
            # A DSPy prompt's last user message holds this case's inputs; earlier messages may
            # be demos of other cases, which must not decide the answer.
            violated = self.gold(view.user if view.kind == "dspy" else view.text) or ()
            told_to_check_all = contains_phrase(view.system, INSTRUCTION_PHRASE) or any(
                _SEVERAL_RULES.search(demo) for demo in view.demos
            )
            lucky_sample = sampled and repeat % 2 == 1
            if behaviour == "instructed" and not (lucky_sample or told_to_check_all):
                violated = violated[:1]
        return Decision(behaviour, tuple(sorted(set(violated))), view.target)

    def complete(self, request: Request) -> Response:
        lm15 = import_dspy().lm15
        system = request_system(request)
        messages = [{"role": "system", "content": system}] if system else []
        messages += [{"role": m.role, "content": m.text or ""} for m in request.messages]
        text = self.reply(
            messages, response_format=request.config.response_format, temperature=request.config.temperature
        )
        limit = request.config.max_tokens or FAKE_OUTPUT_LIMIT
        if count_tokens(text) > limit:  # a real model stops at its output limit too
            text = " ".join(text.split()[:limit])
        usage = lm15.Usage(
            input_tokens=sum(count_tokens(m["content"]) for m in messages), output_tokens=count_tokens(text)
        )
        return lm15.Response(
            id=f"fake-{len(self.calls)}",
            model=request.model,
            message=lm15.Message.assistant([lm15.TextPart(text)]),
            finish_reason="stop",
            usage=usage,
        )

    def dump_state(self) -> dict[str, Any]:
        """Saved with a program: the behaviour only (gold answers are test data)."""
        return {"behaviour": self.behaviour}

    @classmethod
    def load_state(cls, state: Mapping[str, Any]) -> FakeEngine:
        return cls(str(state.get("behaviour", "oracle")))


class AsyncFakeEngine(AsyncEngine):
    """The async twin DSPy needs for ``acall``/``dspy.asyncify``; it shares ``sync``'s state."""

    def __init__(self, sync: FakeEngine) -> None:
        self.sync = sync

    async def complete(self, request: Request) -> Response:
        return self.sync.complete(request)

    def dump_state(self) -> dict[str, Any]:
        return self.sync.dump_state()

    @classmethod
    def load_state(cls, state: Mapping[str, Any]) -> AsyncFakeEngine:
        return cls(FakeEngine.load_state(state))
