"""The per-policy guard as a DSPy program: one call names every violated rule.

The signature's docstring is the optimizers' starting instruction: it says what "violated"
means and nothing about rule interactions, which are for an optimizer to learn.
"""

from __future__ import annotations

from typing import Any, ClassVar

import dspy

from ._outputs import Protocol


class FindViolatedRules(dspy.Signature):
    """Audit the chatbot's side of a conversation against a numbered policy and name every violated rule.

    A rule is violated when the conversation does not comply with the rule's requirement, whether the
    rule says "must" or "must not": "must not do X" is violated if the chatbot does X, "must do X" is
    violated if the chatbot does not do X. Only include rules that are actually violated.
    """

    policy: str = dspy.InputField(desc="The policy: instructions followed by numbered rules.")
    conversation: str = dspy.InputField(
        desc="The dialogue, one 'Turn N - User/Chatbot: ...' line per message."
    )
    violated_rules: list[int] = dspy.OutputField(
        desc="Numbers of the violated rules, in ascending order; an empty list when none is violated."
    )


class PerPolicyGuard(dspy.Module):
    """Predict the violated rules of a policy (``policy=``, ``conversation=``) from one LM call."""

    protocol: ClassVar[Protocol] = "per-policy"
    predictor_type: ClassVar[Any] = dspy.Predict
    signature_class: ClassVar[type[dspy.Signature]] = FindViolatedRules

    def __init__(self) -> None:
        super().__init__()
        self.predict = self.predictor_type(self.signature_class)

    def forward(self, policy: str, conversation: str) -> dspy.Prediction:
        return self.predict(policy=policy, conversation=conversation)

    async def aforward(self, policy: str, conversation: str) -> dspy.Prediction:
        return await self.predict.acall(policy=policy, conversation=conversation)


class PerPolicyGuardCoT(PerPolicyGuard):
    """``PerPolicyGuard`` that writes out its reasoning before naming the rules."""

    predictor_type: ClassVar[Any] = dspy.ChainOfThought
