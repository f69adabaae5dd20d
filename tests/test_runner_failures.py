"""Loud failures: lasting ones stop a run early, every run ends with its error summary.

The loopback stub answers 401 (bad key), 404 (unknown model), a plain 400 (bad
request) or nothing at all (a closed port); each must stop the run after its first
failures with one line naming the cause and the fix, and keep every record written.
Transient failures (5xx) and one case's context overflow never stop a run: they end
as error records, summarised at the end with exit status 3.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from sp_dspy import load_benchmark
from sp_dspy._ablate import run_ablation
from sp_dspy._ablate._plan import AblationPlan
from sp_dspy._executor import run_eval
from sp_dspy._lm import LMConfig
from sp_dspy._metrics import PolicyRecord
from sp_dspy._runner import DataSelection, EvalConfig, EvalOutcome
from sp_dspy._runner._failures import BAD_REQUEST_STREAK, EarlyStop, RunStopped
from sp_dspy._runner._fake_gold import teach_fake
from sp_dspy.cli import main
from tests._results import iter_records
from tests._stub_server import StubServer

pytestmark = [pytest.mark.usefixtures("restore_dspy_cache"), pytest.mark.network, pytest.mark.timeout(120)]

SAMPLE = load_benchmark().cases


def stub(*fail_plan: str) -> StubServer:
    server = StubServer(fail_plan=fail_plan)
    teach_fake(SimpleNamespace(engine=server.fake), SAMPLE)
    return server


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def evaluate(
    api_base: str,
    out: Path,
    *,
    transport: str = "auto",
    limit: int = 6,
    retry_errors: bool = False,
    **settings: object,
) -> EvalOutcome:
    config = EvalConfig.model_validate(
        {"output_dir": out, "run_id": "r", "concurrency": 1, "data": DataSelection(limit=limit), **settings}
    )
    lm = LMConfig(model="openai/stub", api_base=api_base, num_retries=0, cache=False, transport=transport)
    return run_eval(config, lm, show_progress=False, retry_errors=retry_errors)


@pytest.mark.parametrize("transport", ["direct", "dspy"])
@pytest.mark.parametrize(
    ("failure", "kind", "sent", "fix"),
    [
        ("401", "auth", 1, "the API key is missing or refused"),
        ("404", "not_found", 1, "check --lm and --api-base"),
        ("400-invalid", "bad_request", BAD_REQUEST_STREAK, "check the model's settings"),
        ("closed", "unreachable", 1, "nothing answers at http://127.0.0.1:"),
    ],
)
def test_a_lasting_failure_stops_the_run_early_and_keeps_its_records(
    tmp_path: Path, failure: str, kind: str, sent: int, fix: str, transport: str
) -> None:
    if failure == "closed":
        with pytest.raises(RunStopped) as caught:
            evaluate(closed_port_url(), tmp_path, transport=transport)
    else:
        with stub(*[failure] * 6) as server, pytest.raises(RunStopped) as caught:
            evaluate(server.url, tmp_path, transport=transport)
        assert len(server.chat_requests) == sent  # not all six cases
    stopped = caught.value
    message = str(stopped)
    assert stopped.kind == kind and stopped.exit_code == 2 and "\n" not in message
    assert fix in message and "--resume --retry-errors --run-id r" in message
    records = list(iter_records(tmp_path / "results_r_stub.jsonl"))
    assert [r["error_class"] for r in records] == [kind] * sent
    assert f"{sent} record(s) kept in {tmp_path / 'results_r_stub.jsonl'}" in message
    manifest = json.loads((tmp_path / "manifest_r.json").read_text(encoding="utf-8"))
    assert manifest["runs"]["stub"]["status"] == "stopped"


@pytest.mark.parametrize("program", ["official", "dspy"])
def test_per_rule_judgments_stop_early_too(tmp_path: Path, program: str) -> None:
    with stub(*["401"] * 50) as server, pytest.raises(RunStopped):
        evaluate(server.url, tmp_path, protocol="per-rule", program=program, limit=1)
    assert len(server.chat_requests) == 1
    assert [j["error_class"] for j in iter_records(tmp_path / "per_rule_r_stub.jsonl")] == ["auth"]


@pytest.mark.parametrize("failure", ["404", "closed"])
def test_dspy_programs_stop_early_too(tmp_path: Path, failure: str) -> None:
    if failure == "closed":
        with pytest.raises(RunStopped) as caught:
            evaluate(closed_port_url(), tmp_path, program="dspy")
    else:
        with stub(*[failure] * 6) as server, pytest.raises(RunStopped) as caught:
            evaluate(server.url, tmp_path, program="dspy")
        assert len(server.chat_requests) == 1
    assert caught.value.kind == ("unreachable" if failure == "closed" else "not_found")
    assert len(list(iter_records(tmp_path / "results_r_stub.jsonl"))) == 1


@pytest.mark.parametrize("transport", ["direct", "dspy"])
def test_transient_failures_and_one_case_overflow_never_stop_a_run(tmp_path: Path, transport: str) -> None:
    # Three units fail with 500 (no retries left), one with a context overflow; the rest answer.
    with stub("500", "500", "400", "500") as server:
        outcome = evaluate(server.url, tmp_path, transport=transport, limit=6)
        assert len(server.chat_requests) == 6
    summary = outcome.errors
    assert (summary.units, summary.errors) == (6, 4)
    assert [(c.error_class, c.count) for c in summary.classes] == [("server_error", 3), ("context_length", 1)]
    assert "500" in summary.classes[0].first_error
    manifest = json.loads(outcome.paths.manifest.read_text(encoding="utf-8"))
    assert manifest["runs"]["stub"]["errors"] == summary.model_dump(mode="json")
    lines = summary.lines("RETRY")
    assert (
        lines[0] == "errors: 4 of 6 unit(s) ended in error" and lines[-2] == "  re-send the others with RETRY"
    )
    # An overflow is lasting for its prompt: not re-sent, but what shrinks it (the stub states its window).
    assert lines[-1].startswith("  1 prompt(s) do not fit the model's context window of 4,096 tokens")


def test_a_bad_request_streak_is_broken_by_a_success() -> None:
    stop = EarlyStop()
    bad = PolicyRecord(id="c", error_class="bad_request", error="HTTP 400: no")
    for _ in range(BAD_REQUEST_STREAK - 1):
        assert not stop.observe(bad)
    assert not stop.observe(PolicyRecord(id="ok"))
    assert not stop.observe(bad) and not stop.observe(PolicyRecord(id="c", error_class="server_error"))
    assert not stop.observe(bad) and not stop.observe(bad)
    assert stop.observe(bad)
    assert stop.observe(PolicyRecord(id="c", error_class="auth", error="HTTP 401")) and stop.kind == "auth"


def test_resume_counts_errored_units_and_retry_errors_completes_a_stopped_run(tmp_path: Path) -> None:
    with stub("500", "401", *["401"] * 10) as server, pytest.raises(RunStopped):
        evaluate(server.url, tmp_path, limit=4)
    with stub() as healthy:
        kept = evaluate(healthy.url, tmp_path, limit=4, resume=True)
        assert (kept.skipped_on_resume, kept.skipped_errors, len(healthy.chat_requests)) == (2, 2, 2)
        assert kept.errors.errors == 2
        fixed = evaluate(healthy.url, tmp_path, limit=4, resume=True, retry_errors=True)
        assert (fixed.skipped_on_resume, fixed.skipped_errors, len(healthy.chat_requests)) == (2, 0, 4)
    assert fixed.errors.errors == 0 and fixed.report is not None
    assert fixed.report.cells["ALL"]["excluded"] == 0


def run_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["sp-dspy", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    return int(exited.value.code or 0), capsys.readouterr().err


@pytest.mark.usefixtures("isolated_run")
def test_cli_exit_codes_error_summary_and_resume_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--limit", "3", "--concurrency", "1", "--num-retries", "0", "--no-cache", "-q"]
    common += ["--output-dir", str(tmp_path / "out"), "--run-id", "r"]
    with stub("401") as server:
        code, err = run_cli(
            monkeypatch, capsys, "eval", "--lm", "openai/stub", "--api-base", server.url, *common
        )
    assert code == 2
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert "run stopped early: 1 unit(s) failed with auth" in line and "[openai/stub]" in line

    with stub("500") as server:
        args = ["eval", "--lm", "openai/stub", "--api-base", server.url, *common, "--resume"]
        code, err = run_cli(monkeypatch, capsys, *args)
        assert code == 3
        assert "resumed: 1 unit(s) already done were not sent again (1 of them ended in error;" in err
        assert "errors: 2 of 3 unit(s) ended in error" in err
        assert "  auth: 1 (first: LMAuthError: [openai/stub] HTTP 401: Incorrect API key provided)" in err
        assert "  server_error: 1 (first: LMServerError: [openai/stub] HTTP 500: stub planned 500)" in err
        assert "re-send them with the same command plus --resume --retry-errors --run-id r" in err
        code, err = run_cli(monkeypatch, capsys, *args, "--retry-errors")
    assert code == 0 and "errors:" not in err


def ablation_plan(api_base: str) -> AblationPlan:
    lm = LMConfig(model="openai/stub", api_base=api_base, num_retries=0, cache=False)
    variants = ["official-per-policy", "dspy-per-policy"]
    return AblationPlan(lm=lm, variants=variants, data=DataSelection(limit=3), n_boot=20, concurrency=1)


@pytest.fixture
def no_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sp_dspy._report._plots.render_plots", lambda summary: [])


@pytest.mark.usefixtures("no_plots")
def test_ablate_stops_at_the_first_variant_and_names_its_own_resume(tmp_path: Path) -> None:
    with stub(*["404"] * 20) as server, pytest.raises(RunStopped) as caught:
        run_ablation(ablation_plan(server.url), tmp_path / "abl", show_progress=False)
    assert len(server.chat_requests) == 1  # the second variant never started
    assert str(caught.value).endswith(
        f"continue with sp-dspy ablate --out {tmp_path / 'abl'} --resume --retry-errors"
    )


@pytest.mark.usefixtures("no_plots")
def test_ablate_reports_errored_units_per_variant_and_retry_errors_resends_only_them(tmp_path: Path) -> None:
    out = tmp_path / "abl"
    with stub("500") as server:
        first = run_ablation(ablation_plan(server.url), out, show_progress=False)
    assert [run.errors.errors for run in first.runs] == [1, 0] and first.units_failed == 1
    assert first.runs[0].errors.classes[0].error_class == "server_error"
    with stub() as healthy:
        again = run_ablation(ablation_plan(healthy.url), out, resume=True, show_progress=False)
        assert healthy.chat_requests == [] and again.units_failed == 1  # finished variants: not re-run
        fixed = run_ablation(
            ablation_plan(healthy.url), out, resume=True, retry_errors=True, show_progress=False
        )
        assert len(healthy.chat_requests) == 1
    assert fixed.units_failed == 0 and [run.status for run in fixed.runs] == ["complete", "skipped"]


@pytest.mark.parametrize("protocol", ["per-policy", "per-rule"])
def test_check_names_the_fix_of_a_lasting_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    from typer.testing import CliRunner

    from tests.test_cli_check import POLICY, TEXT, make_app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.txt").write_text(POLICY, encoding="utf-8")
    (tmp_path / "chat.txt").write_text(TEXT, encoding="utf-8")
    base = closed_port_url()
    args = ["check", "--policy", "policy.txt", "--conversation", "chat.txt", "--protocol", protocol]
    args += ["--lm", "openai/stub", "--api-base", base, "--num-retries", "0", "--no-cache"]
    result = CliRunner().invoke(make_app(), args)
    assert result.exit_code != 0
    assert (
        f"fix: nothing answers at {base}: start the server (sp-dspy serve) or fix --api-base" in result.output
    )


def test_a_missing_key_is_an_auth_failure_with_the_keys_fix() -> None:
    import dspy

    from sp_dspy._lm import classify_error
    from sp_dspy._runner._failures import fix_for

    # DSPy's engines raise this before sending when no key is set (sp-dspy's checks a key first).
    missing = dspy.LMNotConfiguredError("no API key found for provider 'openai'", model="m")
    assert classify_error(missing) == "auth"
    fix = fix_for("auth", LMConfig(model="openai/gpt-4o-mini"))
    assert fix.startswith("the API key is missing or refused: set the provider's key variable")
    assert fix_for("auth", LMConfig(model="openai/x", api_key_env="MY_KEY")).endswith(
        "check the key in $MY_KEY"
    )


@pytest.mark.usefixtures("isolated_run", "no_plots")
def test_ablate_cli_prints_each_variants_errors_and_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "abl"
    args = [
        "ablate",
        "--out",
        str(out),
        "--lm",
        "openai/stub",
        "--variants",
        "official-per-policy,dspy-per-policy",
    ]
    args += ["--limit", "3", "--concurrency", "1", "--num-retries", "0", "--no-cache", "-q", "--n-boot", "20"]
    with stub("500") as server:
        code, err = run_cli(monkeypatch, capsys, *args, "--api-base", server.url)
    assert code == 3
    assert "official-per-policy: errors: 1 of 3 unit(s) ended in error" in err
    assert f"re-send them with sp-dspy ablate --out {out} --resume --retry-errors" in err
    assert "dspy-per-policy: errors" not in err
