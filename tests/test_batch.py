"""``sp-dspy eval --batch``: every unit answered through the provider's batch API, exactly once.

A loopback batch server (``tests._batch_server``) speaks OpenAI's files + batches and
Anthropic's Message Batches; each batched body must be the body the run sends one at a time,
no request may go to the one-at-a-time endpoint, and a run killed between submitting and
collecting resumes by polling what it submitted, never submitting it again.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from sp_dspy import load_benchmark
from sp_dspy._errors import SpDspyError
from sp_dspy._lm import LMConfig
from sp_dspy._protocol import per_policy_messages
from sp_dspy._runner import EvalConfig, plan_run
from sp_dspy._runner._fake_gold import teach_fake
from sp_dspy.cli import app
from tests._batch_server import BatchServer
from tests._lm_fixtures import oracle_stub
from tests._results import iter_records

pytestmark = [pytest.mark.usefixtures("isolated_run"), pytest.mark.network, pytest.mark.timeout(180)]

SAMPLE = load_benchmark().cases
LIMIT = "3"


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SP_DSPY_BATCH_POLL_S", "0.01")


def batch_server(**options: Any) -> BatchServer:
    server = BatchServer(**options)
    teach_fake(SimpleNamespace(engine=server.fake), SAMPLE)
    return server


def eval_args(url: str, out: Path, *args: str, lm: str = "openai/stub") -> list[str]:
    return ["eval", "--lm", lm, "--api-base", url, "--output-dir", str(out), "-q", "--limit", LIMIT, *args]


def invoke(args: list[str], code: int = 0) -> Any:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == code, (result.output, result.exception)
    return result


def fails(args: list[str]) -> str:
    """The one-line error of a command that must fail on bad input or a lost batch (exit 2)."""
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, SpDspyError), (result.output, result.exception)
    assert result.exception.exit_code == 2
    return str(result.exception)


def canonical(bodies: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(body, sort_keys=True) for body in bodies)


def one_at_a_time_bodies(tmp_path: Path, *args: str, lm: str = "openai/stub") -> list[dict[str, Any]]:
    """The bodies the same run posts without --batch."""
    with oracle_stub() as stub:
        invoke(eval_args(stub.url, tmp_path / "single", *args, lm=lm))
        return [r.body for r in stub.chat_requests if r.body is not None]


def records(out: Path) -> list[dict[str, Any]]:
    (results,) = [p for p in out.glob("*.jsonl")]
    return list(iter_records(results))


@pytest.fixture
def server() -> Iterator[BatchServer]:
    with batch_server() as stub:
        yield stub


@pytest.mark.parametrize(
    ("lm", "args"),
    [
        ("openai/stub", ()),
        ("openai/stub", ("--program", "dspy")),
        ("openai/stub", ("--protocol", "per-rule")),
        ("openai/stub", ("--protocol", "per-rule", "--per-rule-layout", "prefix")),
        ("anthropic/stub", ()),
        ("anthropic/stub", ("--program", "dspy", "--protocol", "per-rule")),
    ],
    ids=["official", "dspy", "per-rule", "per-rule-prefix", "anthropic-official", "anthropic-dspy-per-rule"],
)
def test_batched_run_sends_each_one_at_a_time_body_once_through_the_batch_api(
    server: BatchServer, tmp_path: Path, lm: str, args: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    out = tmp_path / "batched"
    invoke(eval_args(server.url, out, "--batch", *args, lm=lm))
    assert server.chat_requests == []  # nothing went to /chat/completions or /v1/messages
    assert {batch.wire for batch in server.created} == {lm.partition("/")[0]}
    batched = canonical(server.answered_bodies)
    assert len(batched) == len(set(batched))  # identical requests (a rule judged alike twice) go once
    assert set(batched) == set(canonical(one_at_a_time_bodies(tmp_path, *args, lm=lm)))
    lines = records(out)
    assert lines and not any(line.get("error_class") for line in lines)
    unit_keys = [(line.get("cid") or line.get("id"), line.get("rule")) for line in lines]
    assert len(unit_keys) == len(set(unit_keys))  # every unit exactly once


def test_partly_failed_batch_records_error_classes_and_retry_errors_resubmits_only_those(
    tmp_path: Path,
) -> None:
    failing = [per_policy_messages(SAMPLE[1])]

    def fail(body: dict[str, Any]) -> int | None:
        return 500 if body.get("messages") in failing else None

    with batch_server(fail_status=fail) as server:
        out = tmp_path / "out"
        invoke(eval_args(server.url, out, "--batch"), code=3)
        errors = [line for line in records(out) if line.get("error_class")]
        assert [(e["id"], e["error_class"]) for e in errors] == [(SAMPLE[1].id, "server_error")]
        failing.clear()
        invoke(eval_args(server.url, out, "--batch", "--resume", "--retry-errors"))
        assert [len(batch.lines) for batch in server.created] == [3, 1]
        latest = {line["id"]: line for line in records(out)}
        assert not any(line.get("error_class") for line in latest.values())
    assert server.chat_requests == []


@pytest.mark.parametrize("lm", ["openai/stub", "anthropic/stub"])
def test_expired_batch_says_so_keeps_its_answers_and_resume_submits_the_rest(
    tmp_path: Path, lm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    out = tmp_path / "out"
    with batch_server(expire_after=1) as server:
        error = fails(eval_args(server.url, out, "--batch", lm=lm))
        assert "batch batch-1 expired: 2 of 3 request(s) unanswered (1 answer(s) kept)" in error
        assert "--resume --run-id" in error
        (manifest,) = out.glob("manifest_*.json")
        assert json.loads(manifest.read_text())["runs"]["stub"]["status"] == "failed"
        server.expire_after = None
        invoke(eval_args(server.url, out, "--batch", "--resume", lm=lm))
        assert [len(batch.lines) for batch in server.created] == [3, 2]
        assert len(records(out)) == 3
    assert server.chat_requests == []


def test_show_request_batch_prints_the_batch_line_of_the_first_request(server: BatchServer) -> None:
    single = json.loads(invoke(eval_args(server.url, Path("o"), "--show-request")).stdout)
    line = json.loads(invoke(eval_args(server.url, Path("o"), "--show-request", "--batch")).stdout)
    assert line["method"] == "POST" and line["url"] == "/v1/chat/completions"
    assert line["body"] == single["body"]
    assert server.chat_requests == [] and server.created == []


def test_provider_without_a_batch_api_is_one_line_before_anything_is_sent(
    server: BatchServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XAI_API_KEY", "xai-test")
    error = fails(eval_args(server.url, Path("o"), "--batch", lm="xai/stub"))
    assert "provider 'xai' has no batch API sp-dspy can use" in error
    assert server.requests == [] and server.created == []


def test_caps_are_refused_with_batch(server: BatchServer) -> None:
    error = fails(eval_args(server.url, Path("o"), "--batch", "--max-calls", "5"))
    assert "--batch: --max-calls stop a run call by call" in error
    assert server.created == []


def test_run_config_batch_true_batches_the_run(server: BatchServer, tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("batch: true\n", encoding="utf-8")
    invoke(eval_args(server.url, tmp_path / "out", "--run-config", str(config)))
    assert len(server.created) == 1 and server.chat_requests == []


def test_batched_answers_are_priced_at_the_batch_rate(server: BatchServer, tmp_path: Path) -> None:
    """The same answers cost half through the batch API (the price map's batch prices of gpt-5-mini)."""
    invoke(eval_args(server.url, tmp_path / "batched", "--batch", lm="openai/gpt-5-mini"))
    with oracle_stub() as stub:
        invoke(eval_args(stub.url, tmp_path / "single", lm="openai/gpt-5-mini"))
    batched = {line["id"]: line for line in records(tmp_path / "batched")}
    single = {line["id"]: line for line in records(tmp_path / "single")}
    assert batched.keys() == single.keys()
    for case_id, line in single.items():
        assert batched[case_id]["usage"]["prompt_tokens"] == line["usage"]["prompt_tokens"] > 0
        assert batched[case_id]["cost"] == pytest.approx(line["cost"] / 2)


@pytest.mark.parametrize(
    ("model", "basis"),
    [
        ("openai/gpt-5-mini", "the price map's batch prices"),
        ("openai/gpt-3.5-turbo", "batch discount (50% of"),
    ],
)
def test_dry_run_batch_shows_both_prices_and_where_the_batch_price_comes_from(model: str, basis: str) -> None:
    output = invoke(["eval", "--dry-run", "--batch", "--lm", model, "--protocol", "per-rule"]).output
    assert "USD batched" in output and basis in output
    plan = plan_run(EvalConfig(protocol="per-rule", batch=True), LMConfig(model=model))
    assert plan.batch_usd == pytest.approx(plan.estimate.usd / 2)


def test_ablate_batch_batches_every_variant(server: BatchServer, tmp_path: Path) -> None:
    variants = "official-per-policy,dspy-per-policy"
    args = ["ablate", "--out", str(tmp_path / "abl"), "--lm", "openai/stub", "--api-base", server.url]
    invoke([*args, "--variants", variants, "--limit", LIMIT, "--batch", "-q", "--n-boot", "0"])
    assert server.chat_requests == []
    assert [len(batch.lines) for batch in server.created] == [3, 3]


FAKE_RUN_BATCH = """
import json, sys
args = sys.argv[1:]
source, out = args[args.index("-i") + 1], args[args.index("-o") + 1]
with open(out + ".argv", "w") as handle:
    json.dump(args, handle)
with open(out, "w") as handle:
    for text in open(source):
        line = json.loads(text)
        body = {"id": "x", "object": "chat.completion", "model": line["body"]["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "[]"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}
        answer = {"id": "r", "custom_id": line["custom_id"], "response": {"status_code": 200, "body": body}, "error": None}
        handle.write(json.dumps(answer) + "\\n")
"""


def test_hosted_vllm_batch_runs_vllm_run_batch_on_the_openai_batch_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "fake_run_batch.py"
    script.write_text(FAKE_RUN_BATCH, encoding="utf-8")
    monkeypatch.setenv("SP_DSPY_VLLM_RUN_BATCH", f"{sys.executable} {script}")
    out = tmp_path / "out"
    lm = "hosted_vllm/Qwen/Qwen3-8B"
    invoke(eval_args("http://127.0.0.1:9/v1", out, "--batch", lm=lm))  # no server: offline
    assert len(records(out)) == 3
    (batch_dir,) = out.glob("*.batch")
    (argv_file,) = batch_dir.glob("vllm-1.out.jsonl.argv")
    argv = json.loads(argv_file.read_text())
    assert argv == ["-i", str(batch_dir / "vllm-1.in.jsonl"), "-o", str(batch_dir / "vllm-1.out.jsonl"),
                    "--model", "Qwen/Qwen3-8B"]  # fmt: skip
    lines = [json.loads(text) for text in (batch_dir / "vllm-1.in.jsonl").read_text().splitlines()]
    shown = json.loads(invoke(eval_args("http://127.0.0.1:9/v1", out, "--show-request", lm=lm)).stdout)
    assert lines[0]["url"] == "/v1/chat/completions"
    assert shown["body"] in [line["body"] for line in lines]


EXPERIMENT_TINY = ["--optimizers", "copro", "--seeds", "1", "--set", "copro.breadth=2", "--set", "copro.depth=1",
                   "--set", "copro.num_threads=2", "--ratios", "0.25,0.25,0.5", "--n-boot", "20", "-q"]  # fmt: skip


def experiment_args(url: str, out: Path, *args: str) -> list[str]:
    return ["experiment", "--out", str(out), "--lm", "openai/stub", "--api-base", url, "--num-retries", "0",
            *EXPERIMENT_TINY, *args]  # fmt: skip


def test_experiment_batch_sends_the_test_evaluations_as_batches_and_compiles_one_call_at_a_time(
    tmp_path: Path,
) -> None:
    out = tmp_path / "exp"
    with batch_server(behaviour="instructed") as server:
        invoke(experiment_args(server.url, out, "--batch"))
        n_cases = json.loads((out / "summary.json").read_text(encoding="utf-8"))["comparison"]["n_cases"]
        assert [len(batch.lines) for batch in server.created] == [n_cases, n_cases]  # baseline, artifact
        compiled = canonical([r.body for r in server.chat_requests if r.body is not None])
        assert compiled  # the compile called one at a time
        assert not set(compiled) & set(canonical(server.answered_bodies))  # no test call went alone
    assert json.loads((out / "experiment.json").read_text(encoding="utf-8"))["batch"] is True


def test_experiment_dry_run_batch_prices_the_test_evaluations_both_ways(tmp_path: Path) -> None:
    args = ["experiment", "--out", str(tmp_path / "exp"), "--lm", "openai/gpt-5-mini", *EXPERIMENT_TINY]
    output = " ".join(invoke([*args, "--dry-run", "--batch"], code=0).output.split())
    assert "USD batched" in output and "(not batched)" in output
    assert "batched USD: the test evaluations at the price map's batch prices" in output
    from sp_dspy._ablate import build_experiment, price_experiment

    settings = {"lm": {"model": "openai/gpt-5-mini"}, "optimizers": ["copro"], "seeds": [1],
                "ratios": [0.25, 0.25, 0.5], "batch": True}  # fmt: skip
    price = price_experiment(build_experiment(settings), tmp_path / "exp")
    tests = [step for step in price.steps if step.step == "test"]
    assert len(tests) == 2 and all(s.batch_usd == pytest.approx((s.estimate.usd or 0) / 2) for s in tests)
    compiles = sum(step.estimate.usd or 0 for step in price.steps if step.step == "compile")
    assert price.total_batch_usd == pytest.approx(compiles + sum(s.batch_usd or 0 for s in tests))
    assert not (tmp_path / "exp").exists()


def test_experiment_batch_submits_no_test_evaluation_its_cap_cannot_cover(tmp_path: Path) -> None:
    """A batch is paid as a whole: a step whose projection exceeds what is left of the cap is not sent."""
    with batch_server(behaviour="instructed") as server:
        invoke(experiment_args(server.url, tmp_path / "a", "--batch"))
        manifest = tmp_path / "a" / "artifacts" / "copro-s1" / "manifest.json"
        compile_calls = json.loads(manifest.read_text(encoding="utf-8"))["usage"]["calls"]
        n_cases = len(server.created[0].lines)
        cap = str(compile_calls + n_cases - 1)  # the compile fits, the baseline's batch does not
        result = CliRunner().invoke(
            app, experiment_args(server.url, tmp_path / "b", "--batch", "--max-calls", cap)
        )
        assert result.exit_code == 3, (result.output, result.exception)
        assert len(server.created) == 2  # the first experiment's two batches only
        assert (
            f"--max-calls {cap} would be overrun: the batched test evaluation of official-per-policy may "
            f"take up to {n_cases} call(s) at the batch rate ({n_cases} unit(s) left, each at its prompt and "
            f"output limit), more than the {n_cases - 1} left of the cap; a batch is paid as a whole, so it "
            "was not submitted"
        ) in " ".join(result.output.split())


def manifest_run(out: Path) -> dict[str, Any]:
    (manifest,) = out.glob("manifest_*.json")
    (run,) = json.loads(manifest.read_text(encoding="utf-8"))["runs"].values()
    return dict(run)


@pytest.mark.parametrize("program", ["official", "dspy"])
def test_batched_answers_count_as_batched_not_as_cache_hits_and_their_replays_as_cache_hits(
    server: BatchServer, tmp_path: Path, program: str
) -> None:
    batched = invoke(eval_args(server.url, tmp_path / "batched", "--batch", "--program", program)).output
    assert [(line["cache_hits"], line["batched"]) for line in records(tmp_path / "batched")] == [(0, 1)] * 3
    run = manifest_run(tmp_path / "batched")
    assert (run["totals"]["cache_hits"], run["totals"]["batched"]) == (0, 3)
    assert run["endpoint_requests"] == {f"{server.url} (batch)": 3, server.url: 0}
    assert "batch: 3 LM answer(s) came from the provider's batch API, priced at" in batched
    assert "response cache" not in batched

    replayed = invoke(eval_args(server.url, tmp_path / "replayed", "--program", program)).output
    again = invoke(eval_args(server.url, tmp_path / "again", "--batch", "--program", program)).output
    assert len(server.created) == 1 and server.chat_requests == []  # both from the response cache
    for out, output in ((tmp_path / "replayed", replayed), (tmp_path / "again", again)):
        lines = records(out)
        assert [line["cache_hits"] for line in lines] == [1] * 3 and not any(
            "batched" in line for line in lines
        )
        assert manifest_run(out)["totals"]["cache_hits"] == 3 and "batched" not in manifest_run(out)["totals"]
        assert "3 LM answer(s) came from the response cache" in output and "batch API" not in output


def test_an_ablation_report_says_its_answers_came_by_batch(server: BatchServer, tmp_path: Path) -> None:
    out = tmp_path / "abl"
    args = ["ablate", "--out", str(out), "--lm", "openai/stub", "--api-base", server.url, "--batch", "-q"]
    invoke([*args, "--variants", "official-per-policy,dspy-per-policy", "--limit", LIMIT, "--n-boot", "0"])
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    notes = " ".join(summary["notes"])
    # One note for the variants it applies to, naming them all.
    assert (
        "official-per-policy, dspy-per-policy: 3 of 3 LM answers came from the provider's batch API" in notes
    )
    assert "response cache" not in notes


def test_an_experiment_counts_a_batched_evaluation_at_the_batch_rate_against_its_cap(tmp_path: Path) -> None:
    """Admitted at its worst case at the batch rate: a cap between that and the list rate's lets it run."""
    from sp_dspy._ablate._experiment import batch_caps
    from sp_dspy._budget import BudgetCaps
    from sp_dspy._executor import CapReached
    from sp_dspy._runner._admission import unit_worst_case
    from sp_dspy._runner._cost import run_pricing
    from sp_dspy._runner._eval import build_program, select_cases
    from sp_dspy._runner._units import units_of

    lm = LMConfig(model="openai/gpt-5-mini", max_tokens=16000)
    config = EvalConfig(output_dir=tmp_path, run_id="experiment-official-per-policy", protocol="per-policy",
                        batch=True)  # fmt: skip
    _, cases = select_cases(config)
    program, protocol, _ = build_program(config, cases=cases)

    def worst_usd(batch: bool) -> float:
        worst = unit_worst_case(program, protocol, run_pricing(program, protocol, lm, batch=batch))
        return sum(worst(unit).usd for unit in units_of(cases, protocol))

    batched, listed = worst_usd(True), worst_usd(False)
    assert 0 < batched < listed
    assert (
        batch_caps(config, lm, BudgetCaps(max_usd=(batched + listed) / 2)) == BudgetCaps()
    )  # no per-call caps
    with pytest.raises(CapReached) as reached:
        batch_caps(config, lm, BudgetCaps(max_usd=batched * 0.9))
    assert reached.value.cap == "max_usd"
    assert f"official-per-policy may take up to {batched:.4f} USD at the batch rate" in str(reached.value.why)
    with pytest.raises(SpDspyError, match="has no batch price"):
        batch_caps(config, LMConfig(model="openai/stub"), BudgetCaps(max_usd=1.0))


def test_an_experiment_resumed_over_an_open_batch_collects_it_whatever_its_cap_left(tmp_path: Path) -> None:
    """A batch submitted before a kill is paid already: its collection is not refused by the cap."""
    from sp_dspy._ablate._experiment import batch_caps
    from sp_dspy._batch import AnswerBook
    from sp_dspy._budget import BudgetCaps
    from sp_dspy._executor import CapReached
    from sp_dspy._runner._paths import RunPaths

    lm = LMConfig(model="openai/gpt-5-mini")
    config = EvalConfig(output_dir=tmp_path, run_id="experiment-official-per-policy", protocol="per-policy",
                        batch=True)  # fmt: skip
    tight = BudgetCaps(max_usd=1e-9)
    with pytest.raises(CapReached):
        batch_caps(config, lm, tight)
    paths = RunPaths(tmp_path, "experiment-official-per-policy", lm.short_name())
    book = AnswerBook(paths.batch_dir_for("per-policy"))
    book.note_submitted("batch-1", book.note_intent(["a", "b"]))
    assert batch_caps(config, lm, tight) == BudgetCaps()


def test_experiment_batch_on_a_provider_without_a_batch_api_is_one_line_before_any_compile(
    tmp_path: Path,
) -> None:
    out = tmp_path / "exp"
    error = fails(["experiment", "--out", str(out), "--lm", "fake/instructed", *EXPERIMENT_TINY, "--batch"])
    assert "provider 'fake' has no batch API sp-dspy can use" in error
    assert not out.exists()


def test_each_unit_runs_once_per_round_and_every_record_built_is_written(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One round notes the requests, the next answers them: each case's prompt built twice (not once
    per capture pass and once more to finish), and no record built and thrown away."""
    from sp_dspy._runner import _units
    from sp_dspy.programs import _official

    built: list[str] = []
    recorded: list[str] = []
    prompts, record = _official.per_policy_messages, _units.policy_record

    def counting_prompts(case: Any) -> Any:
        built.append(case.id)
        return prompts(case)

    def counting_records(case: Any, *args: Any, **kwargs: Any) -> Any:
        recorded.append(case.id)
        return record(case, *args, **kwargs)

    monkeypatch.setattr(_official, "per_policy_messages", counting_prompts)
    monkeypatch.setattr(_units, "policy_record", counting_records)
    out = tmp_path / "out"
    invoke(eval_args(server.url, out, "--batch"))
    ids = [case.id for case in SAMPLE[: int(LIMIT)]]
    assert sorted(built) == sorted(ids * 2) and sorted(recorded) == sorted(ids)
    assert len(records(out)) == int(LIMIT) and len(server.created) == 1
