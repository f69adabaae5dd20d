"""The saved state is clean DSPy JSON and ``prompt.md`` shows what changed, for a person."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dspy

from sp_dspy._compile._artifact import DEMO_FIELD_CHARS, program_json, program_state, prompt_markdown
from sp_dspy.optimizers import policy_examples
from sp_dspy.programs import load_program, make_program
from tests._compile_support import sample_cases


def compiled_guard() -> dspy.Module:
    """A per-policy guard as an optimizer leaves it: new instructions, prefix, demos, an LM."""
    guard: Any = make_program("dspy")
    predictor = guard.predict
    predictor.signature = predictor.signature.with_instructions("Check every rule.\nList them all.")
    predictor.signature = predictor.signature.with_updated_fields("violated_rules", prefix="Answer:")
    examples = policy_examples(sample_cases()[:2])
    bootstrapped = dspy.Example(**examples[0].toDict(), augmented=True)
    predictor.demos = [bootstrapped, examples[1]]
    predictor.lm = dspy.LM("openai/gpt-4o-mini", api_base="http://attacker.invalid/v1")
    return guard


def test_saved_state_has_no_lm_and_no_training_labels(tmp_path: Path) -> None:
    state = program_state(compiled_guard())
    assert state["predict"]["lm"] is None
    demo_keys = [set(demo) for demo in state["predict"]["demos"]]
    assert demo_keys == [
        {"policy", "conversation", "violated_rules", "augmented"},
        {"policy", "conversation", "violated_rules"},
    ]
    (tmp_path / "manifest.json").write_text(json.dumps({"program": "dspy", "protocol": "per-policy"}))
    (tmp_path / "program.json").write_text(program_json(state), encoding="utf-8")
    document = json.loads((tmp_path / "program.json").read_text())
    assert document["metadata"]["dependency_versions"]["dspy"]
    loaded = load_program(tmp_path)
    assert loaded.predict.signature.instructions == "Check every rule.\nList them all."
    assert loaded.predict.lm is None and len(loaded.predict.demos) == 2
    dspy_loaded: Any = make_program("dspy")
    dspy_loaded.load(str(tmp_path / "program.json"))  # DSPy's own loader reads it as well
    assert dspy_loaded.predict.signature.instructions == "Check every rule.\nList them all."


def test_prompt_markdown_shows_instructions_diff_prefixes_and_demos() -> None:
    start = program_state(make_program("dspy"))
    guard = compiled_guard()
    text = prompt_markdown(guard, start, program_state(guard), ["# header"])
    assert text.startswith("# header\n")
    assert "```diff" in text and "+Check every rule." in text and "-Audit the chatbot" in text
    assert "- `violated_rules`: `Violated Rules:` -> `Answer:`" in text
    assert "### Demonstrations (2)" in text
    assert "Demo 1 (bootstrapped from the model's own correct answer)" in text and "Demo 2 (labelled)" in text
    assert "more characters]" in text  # policies are clipped to DEMO_FIELD_CHARS
    assert len(sample_cases()[0].policy) > DEMO_FIELD_CHARS


def test_unchanged_program_says_so() -> None:
    state = program_state(make_program("dspy"))
    text = prompt_markdown(make_program("dspy"), state, state, [])
    assert "No change." in text and "None." in text
