"""Transient failures are retried (honouring Retry-After); lasting ones become excluded records.

The stub fails its first requests on purpose (``fail_plan``) with 429 + Retry-After,
500 and dropped connections, over real HTTP through sp-dspy's HTTP engine (the default
for one OpenAI-compatible endpoint) and, where marked, through DSPy's own engine.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from sp_dspy import load_benchmark
from sp_dspy._executor import run_eval
from sp_dspy._lm import LMConfig
from sp_dspy._protocol import build_targets
from sp_dspy._runner import DataSelection, EvalConfig, EvalOutcome
from sp_dspy._runner._fake_gold import teach_fake
from tests._results import iter_records
from tests._stub_server import StubServer

pytestmark = [pytest.mark.usefixtures("restore_dspy_cache"), pytest.mark.network, pytest.mark.timeout(120)]

SAMPLE = load_benchmark().cases
GOLD = {case.id: sorted(case.ground_truth_violations) for case in SAMPLE}


def stub(*fail_plan: str) -> StubServer:
    server = StubServer(fail_plan=fail_plan)
    teach_fake(SimpleNamespace(engine=server.fake), SAMPLE)
    return server


def evaluate(
    server: StubServer,
    out: Path,
    *,
    retries: int,
    retry_errors: bool = False,
    transport: str = "auto",
    **settings: object,
) -> EvalOutcome:
    config = EvalConfig.model_validate(
        {"output_dir": out, "run_id": "r", "concurrency": 1, "data": DataSelection(limit=3), **settings}
    )
    lm_config = LMConfig.model_validate(
        {
            "model": "openai/stub",
            "api_base": server.url,
            "num_retries": retries,
            "cache": False,
            "transport": transport,
        }
    )
    return run_eval(config, lm_config, show_progress=False, retry_errors=retry_errors)


@pytest.mark.parametrize("transport", ["direct", "dspy"])
def test_429_500_and_dropped_connections_are_retried_to_correct_results(
    tmp_path: Path, transport: str
) -> None:
    with stub("drop", "429:0.3", "500:0.05") as server:
        started = time.monotonic()
        outcome = evaluate(server, tmp_path, retries=3, transport=transport)
        elapsed = time.monotonic() - started
        failures = [request.failure for request in server.chat_requests]
    # One case took four attempts, the other two one each; nothing else was sent.
    assert failures == ["drop", "429:0.3", "500:0.05", None, None, None]
    # Backoff (DSPy's, whichever engine): 1 s after the drop, then the server's Retry-After
    # (0.3 s, 0.05 s); exponential backoff alone (1 + 2 + 4 s) takes > 7 s.
    assert 1.0 + 0.35 <= elapsed < 5
    records = list(iter_records(outcome.results_file))
    assert [r["id"] for r in records] == [case.id for case in SAMPLE[:3]]
    for record in records:
        assert "error" not in record and record["parse_status"] == "clean"
        assert record["violated_rules"] == GOLD[record["id"]]
    assert outcome.report is not None and outcome.report.cells["ALL"]["excluded"] == 0


@pytest.mark.parametrize(
    ("failure", "error_class", "transport"),
    [
        ("500:0.01", "server_error", "direct"),
        ("500:0.01", "server_error", "dspy"),
        # sp-dspy's engine waits a 429 out instead (tests/test_lm_rate.py); DSPy's retries it.
        ("429:0.01", "rate_limit", "dspy"),
    ],
)
def test_a_lasting_failure_is_an_excluded_record_and_the_run_goes_on(
    tmp_path: Path, failure: str, error_class: str, transport: str
) -> None:
    with stub(failure, failure) as server:
        outcome = evaluate(server, tmp_path, retries=1, transport=transport)
        assert len(server.chat_requests) == 2 + 2
    first, *others = list(iter_records(outcome.results_file))
    assert first["id"] == SAMPLE[0].id
    assert first["error_class"] == error_class
    assert (first["parse_status"], first["violated_rules"]) == ("error", None)
    assert first["error"] and "\n" not in first["error"]
    assert [(r["id"], r["violated_rules"]) for r in others] == [(c.id, GOLD[c.id]) for c in SAMPLE[1:3]]
    assert outcome.report is not None
    assert (outcome.report.cells["ALL"]["excluded"], outcome.report.cells["ALL"]["n_eval"]) == (1, 2)
    manifest = outcome.paths.manifest.read_text(encoding="utf-8")
    assert '"errors": 1' in manifest


def test_resume_keeps_errored_units_unless_asked_to_retry_them(tmp_path: Path) -> None:
    with stub("500:0.01", "500:0.01") as server:
        evaluate(server, tmp_path, retries=1)
    with stub() as healthy:
        again = evaluate(healthy, tmp_path, retries=1, resume=True)
        assert healthy.chat_requests == [] and again.skipped_on_resume == 3
        retried = evaluate(healthy, tmp_path, retries=1, resume=True, retry_errors=True)
        assert len(healthy.chat_requests) == 1 and retried.skipped_on_resume == 2
    lines = list(iter_records(retried.results_file))
    assert [r["id"] for r in lines] == [SAMPLE[0].id, SAMPLE[1].id, SAMPLE[2].id, SAMPLE[0].id]
    # The scorer takes the latest record of a case: nothing is excluded any more.
    assert retried.report is not None and retried.report.cells["ALL"]["excluded"] == 0


def test_a_failed_judgment_is_recorded_with_its_class_and_the_others_run(tmp_path: Path) -> None:
    case = SAMPLE[0]
    with stub("503:0.01", "503:0.01") as server:
        outcome = evaluate(server, tmp_path, retries=1, protocol="per-rule", data=DataSelection(limit=1))
    judgments = list(iter_records(outcome.results_file))
    targets = build_targets(case)
    assert sorted(j["rule"] for j in judgments) == sorted(t.rule for t in targets)
    failed = [j for j in judgments if j.get("error_class")]
    assert len(failed) == 1 and failed[0]["error_class"] == "server_error"
    assert (failed[0]["pred"], failed[0]["refused"], failed[0]["parse_status"]) == (None, True, "error")
    gold = {t.rule: t.gold for t in targets}
    assert all(j["pred"] is gold[j["rule"]] for j in judgments if not j.get("error_class"))
