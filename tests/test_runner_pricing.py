"""Dollar cost per record and per run, from the price table bundled with DSPy/LiteLLM.

The stub answers as ``gpt-4o-mini`` (a priced model) or as ``stub`` (unpriced, like
any self-hosted model). sp-dspy's HTTP engine looks its rates up once per client;
DSPy's own pricing functions are left as DSPy wrote them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sp_dspy._executor import run_eval
from sp_dspy._lm import LMConfig
from sp_dspy._run_manifest import RunManifest
from sp_dspy._runner import DataSelection, EvalConfig, EvalOutcome
from tests._results import iter_records
from tests._stub_server import StubServer

pytestmark = [pytest.mark.usefixtures("restore_dspy_cache"), pytest.mark.network, pytest.mark.timeout(120)]


def evaluate(out: Path, model: str) -> EvalOutcome:
    with StubServer() as server:
        config = EvalConfig(output_dir=out, run_id="p", data=DataSelection(limit=3))
        return run_eval(config, LMConfig(model=model, api_base=server.url, cache=False), show_progress=False)


def test_a_priced_model_gets_a_cost_per_record_and_a_run_total(tmp_path: Path) -> None:
    from dspy.clients import model_metadata

    outcome = evaluate(tmp_path, "openai/gpt-4o-mini")
    prices = model_metadata.model_info("openai", "gpt-4o-mini")
    records = list(iter_records(outcome.results_file))
    assert len(records) == 3
    for record in records:
        usage = record["usage"]
        expected = (
            usage["prompt_tokens"] * prices["input_cost_per_token"]
            + usage["completion_tokens"] * prices["output_cost_per_token"]
        )
        assert record["cost"] == pytest.approx(expected, rel=1e-9) and record["cost"] > 0
    manifest = RunManifest.model_validate_json(outcome.paths.manifest.read_text(encoding="utf-8"))
    total = manifest.runs["gpt-4o-mini"].totals.usage.cost
    assert total == pytest.approx(sum(r["cost"] for r in records), abs=1e-6)


def test_an_unpriced_model_has_no_cost_rather_than_zero(tmp_path: Path) -> None:
    outcome = evaluate(tmp_path, "openai/stub")
    assert {r["cost"] for r in iter_records(outcome.results_file)} == {None}
    manifest = RunManifest.model_validate_json(outcome.paths.manifest.read_text(encoding="utf-8"))
    assert manifest.runs["stub"].totals.usage.cost is None


def test_a_run_leaves_dspys_pricing_functions_as_dspy_wrote_them(tmp_path: Path) -> None:
    from dspy.clients import costs, model_metadata

    evaluate(tmp_path, "openai/gpt-4o-mini")
    assert costs.model_info is model_metadata.model_info  # no replaced DSPy function
