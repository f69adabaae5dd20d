"""``eval --dry-run`` projects a run and sends nothing; ``--max-calls/--max-total-tokens/--max-usd`` cap it.

A capped run starts no unit past its cap, keeps every record written, exits 3 and
says how to continue; ``--resume`` with a larger cap finishes the run without
sending a finished unit again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sp_dspy import load_benchmark
from sp_dspy._errors import ConfigError
from sp_dspy._lm import LMConfig
from sp_dspy._protocol import build_targets
from sp_dspy._runner import DataSelection, EvalConfig, plan_run
from sp_dspy.cli import app
from tests._results import iter_records
from tests._stub_server import StubServer

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("isolated_run")]

SAMPLE = load_benchmark().cases


def invoke(out: Path, *args: str, lm: str = "fake") -> Result:
    return CliRunner().invoke(app, ["eval", "--lm", lm, "--output-dir", str(out), "-q", *args])


def records(path: Path) -> list[dict[str, Any]]:
    return list(iter_records(path)) if path.exists() else []


@pytest.mark.network
def test_dry_run_prints_the_projection_and_sends_nothing(tmp_path: Path) -> None:
    with StubServer() as server:
        result = invoke(
            tmp_path, "--dry-run", "--protocol", "per-rule", "--limit", "24", "--api-base", server.url,
            "--run-id", "dry", lm="openai/gpt-4o-mini",
        )  # fmt: skip
        assert server.requests == []
    assert result.exit_code == 0, (result.output, result.exception)
    judgments = sum(len(build_targets(case)) for case in SAMPLE)
    assert "dry run: nothing was sent" in result.output
    # A table, or its stacked form when it does not fit the terminal (``FitTable``).
    assert re.search(
        rf"│ +24 │ +{judgments} │|cases 24\s+calls {judgments}\b", result.output.replace(",", "")
    )
    assert "$" in result.output  # a priced model gets dollars
    assert not list(tmp_path.glob("*.jsonl")) and not list(tmp_path.glob("manifest_*"))


def test_the_projection_counts_units_and_scales_with_the_prompts() -> None:
    cases = SAMPLE[:6]
    config = EvalConfig(data=DataSelection(limit=6))
    per_policy = plan_run(config, LMConfig(model="openai/gpt-4o-mini"))
    per_rule = plan_run(
        config.model_copy(update={"protocol": "per-rule"}), LMConfig(model="openai/gpt-4o-mini")
    )
    assert per_policy.estimate.calls == 6
    assert per_rule.estimate.calls == sum(len(build_targets(case)) for case in cases)
    text = sum(len(case.policy) + len(case.conversation) for case in cases)
    assert 0.8 * text / 4 < per_policy.estimate.usage.prompt_tokens < 1.5 * text / 4
    assert per_policy.estimate.usd is not None and per_rule.estimate.usd > per_policy.estimate.usd  # type: ignore[operator]
    unpriced = plan_run(config, LMConfig(model="fake/oracle"))
    assert (unpriced.estimate.usd, unpriced.priced) == (None, False)


def test_dry_run_warns_when_a_cap_is_below_the_projection(tmp_path: Path) -> None:
    result = invoke(tmp_path, "--dry-run", "--max-calls", "2", "--limit", "5")
    assert result.exit_code == 0, (result.output, result.exception)
    assert "--max-calls 2 is below the projection" in result.output


@pytest.mark.parametrize("protocol", ["per-policy", "per-rule"])
def test_max_calls_stops_the_run_keeps_its_records_and_resume_finishes_it(
    tmp_path: Path, protocol: str
) -> None:
    result = invoke(tmp_path, "--protocol", protocol, "--limit", "6", "--max-calls", "4", "--run-id", "c")
    assert result.exit_code == 3, (result.output, result.exception)
    assert "stopped at --max-calls" in result.output
    assert "continue with --resume --run-id c and a larger --max-calls (or none)" in result.output
    name = "per_rule_c_fake.jsonl" if protocol == "per-rule" else "results_c_fake.jsonl"
    kept = records(tmp_path / name)
    assert len(kept) == 4  # no unit started past the cap
    manifest = json.loads((tmp_path / "manifest_c.json").read_text(encoding="utf-8"))
    assert manifest["runs"]["fake"]["status"] == "capped"
    resumed = invoke(tmp_path, "--protocol", protocol, "--limit", "6", "--resume", "--run-id", "c")
    assert resumed.exit_code == 0, (resumed.output, resumed.exception)
    units = sum(len(build_targets(c)) for c in SAMPLE[:6]) if protocol == "per-rule" else 6
    assert len(records(tmp_path / name)) == units  # nothing sent twice


def test_max_total_tokens_stops_before_the_unit_that_would_cross_it(tmp_path: Path) -> None:
    # A unit reserves its worst case: its prompt's bytes and the fake's output limit (about 10,000
    # tokens here); the fake uses about 2,000 of them.
    result = invoke(
        tmp_path, "--limit", "6", "--max-total-tokens", "20000", "--concurrency", "1", "--run-id", "t"
    )
    assert result.exit_code == 3, (result.output, result.exception)
    kept = records(tmp_path / "results_t_fake.jsonl")
    assert 0 < len(kept) < 6
    used = sum(r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"] for r in kept)
    assert used <= 20000  # never beyond the cap: each unit's worst case was reserved before it started
    assert "stopped at --max-total-tokens" in result.output


@pytest.mark.network
def test_max_usd_caps_a_priced_model(tmp_path: Path) -> None:
    with StubServer() as server:
        args = (
            "--limit",
            "12",
            "--api-base",
            server.url,
            "--no-cache",
            "--concurrency",
            "2",
            "--run-id",
            "u",
        )
        # A unit reserves its prompt's bytes and 200 completion tokens: about $0.002 at the list price.
        result = invoke(tmp_path, *args, "--max-tokens", "200", "--max-usd", "0.003", lm="openai/gpt-4o-mini")
        sent = len(server.requests)
    assert result.exit_code == 3, (result.output, result.exception)
    kept = records(tmp_path / "results_u_gpt-4o-mini.jsonl")
    assert 0 < len(kept) == sent < 12
    assert sum(r["cost"] for r in kept) <= 0.003
    assert "stopped at --max-usd" in result.output


def test_max_usd_needs_a_priced_model(tmp_path: Path) -> None:
    result = invoke(tmp_path, "--limit", "2", "--max-usd", "1")
    assert isinstance(result.exception, ConfigError)
    assert str(result.exception) == (
        "--max-usd: no price for fake in the price map DSPy uses; cap --max-calls or --max-total-tokens instead"
    )
    assert not list(tmp_path.glob("*.jsonl"))


def test_caps_can_come_from_a_run_config(tmp_path: Path) -> None:
    run_config = tmp_path / "run.yaml"
    run_config.write_text("run_id: y\ncaps:\n  max_calls: 2\ndata:\n  limit: 5\n", encoding="utf-8")
    result = invoke(tmp_path, "--run-config", str(run_config))
    assert result.exit_code == 3, (result.output, result.exception)
    assert len(records(tmp_path / "results_y_fake.jsonl")) == 2
    run_config.write_text("caps:\n  max_calls: 0\n", encoding="utf-8")
    bad = invoke(tmp_path, "--run-config", str(run_config))
    assert isinstance(bad.exception, ConfigError) and "field caps.max_calls" in str(bad.exception)
