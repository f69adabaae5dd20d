"""Every optimizer compiles end to end on the bundled sample with fake LMs; artifacts round-trip.

Tiny optimizer settings keep each compile to well under a second. Every LM is
``fake/instructed``: as the guard it reports every violation only when told to "check
every rule" (or shown a demo listing several rules, or, sampled at a temperature above
0, on every second sample of one prompt); asked for instructions it sometimes proposes
that phrase, so optimizers must beat the starting program on dev.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import dspy
import pytest

from sp_dspy._compile import CompileConfig, CompileOutcome, compile_guard
from sp_dspy._compile._artifact import program_state
from sp_dspy._compile._data import ids_hash
from sp_dspy._lm import LMConfig, fake_engine, make_lm
from sp_dspy.optimizers import BOOTSTRAP_RECIPE, GEPA_RECIPE, MIPRO_RECIPE, SIMBA_RECIPE, CompileJob, Recipe
from sp_dspy.programs import load_program
from tests._compile_support import sample_cases

TINY: dict[str, dict[str, Any]] = {
    "copro": {"breadth": 2, "depth": 1},
    "mipro": {"num_candidates": 2, "num_trials": 2, "max_bootstrapped_demos": 1, "max_labeled_demos": 1},
    "gepa": {"max_metric_calls": 12},
    "bootstrap": {"num_candidate_programs": 1, "max_bootstrapped_demos": 1, "max_labeled_demos": 1},
    "simba": {"bsize": 3, "num_candidates": 2, "max_steps": 1, "max_demos": 1},
}
INSTRUCTED = LMConfig(model="fake/instructed")


def run_compile(
    optimizer: str,
    out: Path,
    *,
    protocol: str = "per-policy",
    seed: int = 0,
    settings: dict[str, Any] | None = None,
    **extra: Any,
) -> tuple[CompileOutcome, dict[str, Any]]:
    """Compile with fresh fakes; returns the outcome and the LMs (to count their calls)."""
    helper = make_lm(INSTRUCTED)
    lms = {"task": make_lm(INSTRUCTED), "prompt": helper, "reflection": helper}
    config = CompileConfig(
        optimizer=optimizer,
        protocol=protocol,  # type: ignore[arg-type]
        out=out,
        seed=seed,
        overrides={**TINY[optimizer], "num_threads": 2, **(settings or {})},
        **extra,
    )
    return compile_guard(config, INSTRUCTED, lms=lms), lms


def engine_calls(lms: dict[str, Any]) -> int:
    engines = {id(e): e for e in (fake_engine(lm) for lm in lms.values()) if e is not None}
    return sum(len(engine.calls) for engine in engines.values())


@pytest.mark.parametrize("optimizer", list(TINY))
def test_every_optimizer_compiles_per_policy_and_the_artifact_round_trips(
    optimizer: str, tmp_path: Path
) -> None:
    outcome, lms = run_compile(optimizer, tmp_path / "art")
    manifest = outcome.manifest
    assert manifest is not None
    out = tmp_path / "art"
    assert {p.name for p in out.iterdir()} == {
        "program.json", "manifest.json", "prompt.md", "splits.json", "compile.log"
    }  # fmt: skip

    saved = json.loads((out / "program.json").read_text())
    assert saved["predict"]["lm"] is None
    assert all(
        set(demo) <= {"policy", "conversation", "violated_rules", "augmented"}
        for demo in saved["predict"]["demos"]
    )
    loaded = load_program(out)
    assert type(loaded).__name__ == "PerPolicyGuard"
    assert program_state(loaded) == {k: v for k, v in saved.items() if k != "metadata"}

    document = json.loads((out / "manifest.json").read_text())
    assert (document["program"], document["protocol"]) == ("dspy", "per-policy")
    assert document["optimizer"]["name"] == optimizer
    assert document["optimizer"]["parameters"]["num_threads"] == 2
    assert document["budget_limited"] is False
    assert document["dev"]["before"]["ci95"] is not None and document["dev"]["after"]["ci95"] is not None
    assert set(document["versions"]) >= {"dspy", "python"}
    split = json.loads((out / "splits.json").read_text())
    assert document["split"]["train"] == split["train"] and document["split"]["dev"] == split["dev"]
    assert document["split"]["test_hash"] == ids_hash(split["test"]) and "test" not in document["split"]
    # Every call was counted, and the dry-run projection was an upper estimate.
    assert manifest.usage["calls"] == engine_calls(lms) > 0
    assert manifest.usage["calls"] <= outcome.plan.total.calls


@pytest.mark.parametrize("optimizer", ["copro", "mipro", "gepa", "bootstrap", "simba"])
def test_fake_instructed_alone_shows_each_optimizer_improving_on_dev(optimizer: str, tmp_path: Path) -> None:
    """No scripted helper: the fake proposes the rewarded instruction (or bootstrap's demos show it);
    SIMBA's samples (temperature 1.0) sometimes check every rule, and it keeps the better one as a demo."""
    zero_shot = {"max_bootstrapped_demos": 0, "max_labeled_demos": 0} if optimizer == "mipro" else {}
    outcome, _ = run_compile(optimizer, tmp_path / "art", settings=zero_shot)  # mipro: instructions only
    manifest = outcome.manifest
    assert manifest is not None
    assert manifest.dev.before.score == 0.0  # the instructed fake reports one violation of several
    assert manifest.dev.after.score == 100.0
    assert (
        manifest.dev.selected != "start" and "better than the starting program's 0.00" in manifest.dev.reason
    )
    document = json.loads((tmp_path / "art" / "manifest.json").read_text())
    assert (document["dev"]["before"]["score"], document["dev"]["after"]["score"]) == (0.0, 100.0)
    prompt = (tmp_path / "art" / "prompt.md").read_text()
    if optimizer in ("bootstrap", "simba"):  # demonstrations, not instructions, changed
        assert "No change." in prompt and "### Demonstrations (0)" not in prompt  # simba: its better sample
    else:
        assert "+Check every rule" in prompt and "-Audit the chatbot" in prompt


@pytest.mark.parametrize("optimizer", ["mipro", "copro"])
def test_the_estimate_bounds_the_calls_of_a_compile_with_the_default_settings(
    optimizer: str, tmp_path: Path
) -> None:
    """MIPRO describes the program again for every proposal: 41 estimated calls, 44 made, before."""
    helper = make_lm(INSTRUCTED)
    lms = {"task": make_lm(INSTRUCTED), "prompt": helper, "reflection": helper}
    config = CompileConfig(optimizer=optimizer, out=tmp_path / "art", overrides={"num_threads": 2})
    outcome = compile_guard(config, INSTRUCTED, lms=lms)
    assert outcome.manifest is not None
    assert outcome.manifest.usage["calls"] == engine_calls(lms) <= outcome.plan.total.calls
    for role, tally in outcome.manifest.usage["by_lm"].items():
        planned = sum(phase[role].calls for phase in outcome.plan.phases.values() if role in phase)
        assert tally["calls"] <= planned, role


def test_the_fake_sometimes_proposes_the_rewarded_instruction() -> None:
    from sp_dspy._lm._fake import PLAIN_INSTRUCTION, PROPOSED_INSTRUCTION

    lm = make_lm(INSTRUCTED)
    propose = dspy.Predict("basic_instruction -> proposed_instruction", n=3)  # three samples of one request
    with dspy.context(lm=lm):
        answers = propose(basic_instruction="Name the violated rules.").completions.proposed_instruction
    assert answers == [PROPOSED_INSTRUCTION, PLAIN_INSTRUCTION, PROPOSED_INSTRUCTION]
    advise = dspy.Predict("module_names: list[str] -> module_advice: dict[str, str]")
    with dspy.context(lm=lm):
        advice = advise(module_names=["predict", "judge"]).module_advice
    assert advice == {"predict": PROPOSED_INSTRUCTION, "judge": PROPOSED_INSTRUCTION}


def test_compile_never_shows_a_test_case_to_any_lm(tmp_path: Path) -> None:
    outcome, lms = run_compile("copro", tmp_path / "art")
    assert outcome.manifest is not None
    test_ids = set(json.loads((tmp_path / "art" / "splits.json").read_text())["test"])
    test_conversations = [c.conversation for c in sample_cases() if c.id in test_ids]
    sent = [m["content"] for lm in lms.values() for call in fake_engine(lm).calls for m in call.messages]  # type: ignore[union-attr]
    assert sent and not any(conv in text for conv in test_conversations for text in sent)


@pytest.mark.parametrize("optimizer", list(TINY))
def test_per_rule_compiles_the_judge_and_loads_as_a_per_rule_guard(optimizer: str, tmp_path: Path) -> None:
    outcome, _ = run_compile(optimizer, tmp_path / "art", protocol="per-rule")
    assert outcome.manifest is not None and outcome.manifest.protocol == "per-rule"
    loaded = load_program(tmp_path / "art")
    assert type(loaded).__name__ == "PerRuleGuard"
    assert outcome.manifest.dev.after.complete and outcome.manifest.dev.after.n == 3


def test_chain_of_thought_variant_is_recorded_and_reloaded(tmp_path: Path) -> None:
    outcome, _ = run_compile("copro", tmp_path / "art", cot=True)
    assert outcome.manifest is not None and outcome.manifest.program == "dspy-cot"
    assert type(load_program(tmp_path / "art")).__name__ == "PerPolicyGuardCoT"


def test_same_seed_gives_the_same_artifact(tmp_path: Path) -> None:
    run_compile("mipro", tmp_path / "a", seed=3)
    run_compile("mipro", tmp_path / "b", seed=3)
    assert (tmp_path / "a" / "program.json").read_text() == (tmp_path / "b" / "program.json").read_text()


class _Stop(Exception):
    """Raised by the spies once they have seen what the recipe passes on."""


def _job(seed: int) -> CompileJob:
    from sp_dspy.optimizers import case_metric, policy_examples, policy_feedback
    from sp_dspy.programs import make_program

    examples = policy_examples(sample_cases()[:9])
    lm = make_lm(INSTRUCTED)
    return CompileJob(
        make_program("dspy"), examples[:6], examples[6:], case_metric, policy_feedback, lm, lm, lm, seed
    )


def test_recipes_pass_the_seed_where_dspy_takes_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from dspy.teleprompt import GEPA, SIMBA, BootstrapFewShotWithRandomSearch, MIPROv2

    seen: dict[str, Any] = {}

    def spy(name: str, attr: str) -> Any:
        def compile_spy(self: Any, student: Any, **kwargs: Any) -> Any:
            seen[name] = (getattr(self, attr, None), kwargs)
            raise _Stop

        return compile_spy

    monkeypatch.setattr(MIPROv2, "compile", spy("mipro", "seed"))
    monkeypatch.setattr(GEPA, "compile", spy("gepa", "seed"))
    monkeypatch.setattr(SIMBA, "compile", spy("simba", "bsize"))
    monkeypatch.setattr(BootstrapFewShotWithRandomSearch, "compile", spy("bootstrap", "metric"))
    recipes: tuple[Recipe[Any], ...] = (MIPRO_RECIPE, GEPA_RECIPE, SIMBA_RECIPE, BOOTSTRAP_RECIPE)
    for recipe in recipes:
        with pytest.raises(_Stop):
            recipe.compile(_job(0), recipe.settings_model())
    assert seen["mipro"][0] == 0 and seen["mipro"][1]["seed"] == 0  # 0 reaches both (DSPy's `seed or 9`)
    assert seen["gepa"][0] == 0
    assert seen["simba"][1]["seed"] == 0

    orders = []
    for seed in (1, 2, 1):
        with pytest.raises(_Stop):
            BOOTSTRAP_RECIPE.compile(_job(seed), BOOTSTRAP_RECIPE.settings_model())
        orders.append([example.uid for example in seen["bootstrap"][1]["trainset"]])
    assert orders[0] == orders[2] and orders[0] != orders[1]


def test_a_demonstration_listing_several_rules_instructs_the_fake_to_check_them_all() -> None:
    from sp_dspy._runner._fake_gold import teach_fake
    from sp_dspy.programs import make_program, run_case

    cases = [c for c in sample_cases() if len(c.ground_truth_violations) >= 2][:2]
    lm = make_lm(INSTRUCTED)
    teach_fake(lm, cases)
    demo, case = cases
    program = make_program("dspy")
    plain = asyncio.run(run_case(program, case, lm))
    assert len(plain.violated_rules) == 1  # no instruction, no demonstration: the first violation only
    program.predict.demos = [
        dspy.Example(
            policy=demo.policy,
            conversation=demo.conversation,
            violated_rules=list(demo.ground_truth_violations),
        )
    ]
    shown = asyncio.run(run_case(program, case, lm))
    assert sorted(shown.violated_rules) == sorted(case.ground_truth_violations)
