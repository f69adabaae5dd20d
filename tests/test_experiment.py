"""``sp-dspy experiment``: split, compiles per optimizer x seed, the baseline and every artifact on
test, the seeds' spread and verdict; killed and resumed, priced without a call, capped as a whole.

The ``fake/instructed`` guard reports every violation only when its instructions say "check every
rule", and proposes that phrase itself on some optimizer seeds: a seed whose compiled program holds
the phrase must score RMR 100 on test, any other seed exactly what the baseline scores.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sp_dspy._ablate import ExperimentPlan, build_experiment, price_experiment, run_experiment
from sp_dspy._ablate._experiment import LOCK_FILE, spent_so_far
from sp_dspy._ablate._seeds import SeedResult, verdict
from sp_dspy._budget import BudgetCaps, Ledger
from sp_dspy._compile._artifact import write_json
from sp_dspy._data._source import sample_path
from sp_dspy._errors import ConfigError
from sp_dspy._executor import caps_left
from sp_dspy._lm import LMConfig, fake_engine, make_lm
from sp_dspy._lm._fake import INSTRUCTION_PHRASE
from sp_dspy._runner._failures import RunStopped
from sp_dspy._writer_lock import WriterLock, WriterLockedError
from sp_dspy.cli._experiment import register
from sp_dspy.cli._lm_options import LOCAL_CONCURRENCY
from tests._compile_support import improving_stub
from tests._factories import command_app

CLI = [sys.executable, "-c", "from sp_dspy.cli import main; main()"]
#: The cheapest settings that still let each optimizer propose an instruction.
TINY = [
    "--set", "copro.breadth=2", "--set", "copro.depth=1", "--set", "copro.num_threads=2",
    "--set", "mipro.num_candidates=2", "--set", "mipro.num_trials=2",
    "--set", "mipro.max_bootstrapped_demos=0", "--set", "mipro.max_labeled_demos=0",
]  # fmt: skip
SETTINGS = {
    "copro": {"breadth": 2, "depth": 1, "num_threads": 2},
    "mipro": {"num_candidates": 2, "num_trials": 2, "max_bootstrapped_demos": 0, "max_labeled_demos": 0},
}
FAST = ["--ratios", "0.25,0.25,0.5", "--n-boot", "50", "-q"]


@pytest.fixture(autouse=True)
def no_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plots are the report package's job (its own tests); here they would only cost seconds."""
    monkeypatch.setattr("sp_dspy._report._plots.render_plots", lambda summary: [])


def invoke(*args: str) -> Result:
    return CliRunner().invoke(command_app(register), ["experiment", *args], env={"COLUMNS": "200"})


def experiment_args(out: Path, *args: str) -> list[str]:
    return ["--out", str(out), "--lm", "fake/instructed", "--optimizers", "copro,mipro", "--seeds", "0,1,2",
            *TINY, *FAST, *args]  # fmt: skip


def wide_sample(folder: Path, copies: int = 4) -> Path:
    """The bundled sample's 8 conversations copied ``copies`` times under new ids: a test part of
    more than 10 conversations, so each seed's paired interval is informative."""
    document = json.loads(sample_path().read_text(encoding="utf-8"))
    cases = [
        {**case, "id": case["id"][:-3] + f"-r{copy}" + case["id"][-3:]}
        for copy in range(copies)
        for case in document["data"]
    ]
    path = folder / "wide.json"
    path.write_text(json.dumps({"metadata": {**document["metadata"], "n_cases": len(cases)}, "data": cases}))
    return path


def finished(out: Path) -> dict[str, int]:
    """Each finished compile's manifest and its modification time (ns)."""
    return {path.parent.name: path.stat().st_mtime_ns for path in (out / "artifacts").glob("*/manifest.json")}


def wait_for_a_compile(process: subprocess.Popen[str], out: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not finished(out):
        if process.poll() is not None:
            _, err = process.communicate()
            pytest.fail(
                f"experiment ended (rc {process.returncode}) before a compile finished: {err[-2000:]}"
            )
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"no compile finished in {out} after {timeout} s")
        time.sleep(0.01)


def check_figures(summary: dict[str, Any], out: Path) -> None:
    """Every figure is what the fake implies: 100 with the instruction, the baseline's without."""
    base = summary["baseline_test"]
    assert base["rmr_avg"] < 100
    for result in summary["optimizers"]:
        assert [seed["seed"] for seed in result["seeds"]] == [0, 1, 2]
        instructed = []
        for seed in result["seeds"]:
            program = (out / "artifacts" / seed["label"] / "program.json").read_text(encoding="utf-8")
            told = INSTRUCTION_PHRASE in program.lower()
            instructed.append(told)
            expected = 100.0 if told else base["rmr_avg"]
            assert seed["test"]["rmr_avg"] == expected, seed["label"]
            assert seed["diff"]["rmr_avg"] == pytest.approx(expected - base["rmr_avg"])
            assert seed["beats_baseline"] is told and not seed["worse_than_baseline"]
            assert (
                seed["compile"]["calls"] > 0
                and seed["evaluation"]["calls"] == summary["comparison"]["n_cases"]
            )
            assert seed["prompt"].startswith("# Compiled guard")
        gains = [(100.0 - base["rmr_avg"]) if told else 0.0 for told in instructed]
        assert result["seeds_beating"] == sum(instructed)
        assert result["diff"]["rmr_avg"]["mean"] == pytest.approx(sum(gains) / 3, abs=1e-3)
        assert result["diff"]["rmr_avg"]["min"] == min(gains) and result["diff"]["rmr_avg"]["max"] == max(
            gains
        )
        gain = result["gain"]
        assert gain["mean"] == pytest.approx(sum(gains) / 3, abs=0.01) and gain["n_seeds"] == 3
        assert gain["unit"] == "conversation" and gain["n_units"] * 3 == gain["n_pairs"]
        assert (
            result["verdict"].startswith(
                f"{result['optimizer']} against {summary['baseline']}: mean RMR gain"
            )
            and f"per seed: {sum(instructed)} of 3 seeds beat" in result["verdict"]
        )
        if len(summary["optimizers"]) > 1 and gain["ci"] is not None:
            assert "Holm-adjusted across 2 optimizers" in result["verdict"]


def test_an_experiment_killed_mid_way_resumes_without_redoing_finished_work(tmp_path: Path) -> None:
    out = tmp_path / "exp"
    wide = ["--dataset", str(wide_sample(tmp_path))]
    process = subprocess.Popen(
        [*CLI, "experiment", *experiment_args(out, *wide)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_for_a_compile(process, out)
    assert process.poll() is None, "the experiment ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.communicate()
    before = finished(out)
    assert 0 < len(before) < 6 and not (out / "summary.json").exists()

    resumed = invoke(*experiment_args(out, *wide, "--resume"))
    assert resumed.exit_code == 0, (resumed.output, resumed.exception)
    assert resumed.output.count("finished earlier, not run again") == len(before)
    after = finished(out)
    assert len(after) == 6 and all(after[name] == mtime for name, mtime in before.items())
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    check_figures(summary, out)
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "Across optimizer seeds" in report and summary["optimizers"][0]["verdict"] in report
    assert "copro-s0 beside copro-s1" in report  # the prompts side by side
    assert "id=sp-cases" in report  # the per-case viewer: every case, every seed's answer

    results = sorted((out / "results").glob("results_*.jsonl"))
    lines = {path.name: path.read_bytes() for path in results}
    again = invoke(*experiment_args(out, *wide, "--resume"))  # everything finished: nothing is run again
    assert again.exit_code == 0, again.output
    assert again.output.count("finished earlier, not run again") == 6 + 7
    assert again.output.count("[compile ") == 6 and "[compile 6/6]" in again.output  # heads are not markup
    assert {path.name: path.read_bytes() for path in results} == lines
    assert (
        json.loads((out / "summary.json").read_text(encoding="utf-8"))["optimizers"] == summary["optimizers"]
    )


def test_a_dry_run_prices_every_compile_and_test_evaluation_and_sends_nothing(tmp_path: Path) -> None:
    out = tmp_path / "exp"
    with improving_stub() as stub:
        result = invoke(
            "--out", str(out), "--lm", "openai/stub", "--api-base", stub.url, "--optimizers", "copro,mipro",
            "--seeds", "0,1,2", *TINY, *FAST, "--dry-run", "--max-calls", "5",
        )  # fmt: skip
        assert result.exit_code == 0, (result.output, result.exception)
        assert stub.requests == []
    assert not out.exists()
    assert "Estimated experiment" in result.output and "mipro-s2" in result.output
    assert "--max-calls 5 is below the estimate" in result.output


def test_a_dry_run_of_a_priced_model_totals_every_step(tmp_path: Path) -> None:
    plan = build_experiment(
        {
            "lm": {"model": "openai/gpt-4o-mini"},
            "optimizers": "copro,mipro",
            "seeds": "0,1,2",
            "settings": SETTINGS,
            "ratios": [0.25, 0.25, 0.5],
        }
    )
    price = price_experiment(plan, tmp_path / "exp")
    assert [(s.step, s.name) for s in price.steps][:7] == [
        *(("compile", f"{o}-s{s}") for o in ("copro", "mipro") for s in (0, 1, 2)),
        ("test", "official-per-policy"),
    ]
    assert len(price.steps) == 13 and not any(step.done for step in price.steps)
    assert price.total.calls == sum(step.estimate.calls for step in price.steps)
    assert price.total.usd == pytest.approx(sum(step.estimate.usd or 0 for step in price.steps))
    assert price.total.usd and price.left == price.total
    assert not (tmp_path / "exp").exists()


def manifest(out: Path, name: str) -> dict[str, Any]:
    return json.loads((out / "artifacts" / name / "manifest.json").read_text(encoding="utf-8"))


def fake_plan(**changes: Any) -> ExperimentPlan:
    settings = {"lm": {"model": "fake/instructed"}, "optimizers": "copro,mipro", "seeds": "0,1,2",
                "settings": SETTINGS, "ratios": [0.25, 0.25, 0.5], "n_boot": 20, **changes}  # fmt: skip
    return build_experiment(settings)


@pytest.mark.parametrize("cap", [60, 170])  # stopped within the compiles; within the test evaluations
def test_the_cap_holds_for_the_whole_experiment_and_a_raised_cap_resumes(tmp_path: Path, cap: int) -> None:
    out = tmp_path / "exp"
    lm = make_lm(LMConfig(model="fake/instructed"))
    engine = fake_engine(lm)
    assert engine is not None
    lms = {"task": lm, "prompt": lm}
    plan = fake_plan(seeds=[0, 1], caps={"max_calls": cap})
    stopped = run_experiment(plan, out, lms=lms, show_progress=False)
    assert stopped.capped_by == "max_calls" and stopped.summary is None
    assert len(engine.calls) <= cap  # no call past the cap, across compiles and evaluations
    sent = len(engine.calls)
    done = finished(out)
    limited = {name for name in done if manifest(out, name)["budget_limited"]}
    assert len(limited) <= 1  # the compile the cap stopped, if the cap stopped a compile
    if cap == 170:  # every compile finished within the cap: it stopped in the test evaluations
        assert len(done) == 4 and not limited and stopped.ablation is not None
    priced = {step.name: step.done for step in price_experiment(plan, out).steps if step.step == "compile"}
    assert {name for name, finished_earlier in priced.items() if finished_earlier} == set(done) - limited

    resumed = run_experiment(fake_plan(seeds=[0, 1]), out, resume=True, lms=lms, show_progress=False)
    assert resumed.summary is not None and resumed.capped_by is None
    after = finished(out)
    assert all(after[name] == done[name] for name in done if name not in limited)  # not compiled again
    assert all(not manifest(out, name)["budget_limited"] for name in after)
    price = price_experiment(fake_plan(seeds=[0, 1]), out)  # what is left to run: nothing
    assert all(step.done for step in price.steps) and price.left.calls == 0 < price.total.calls
    assert len(engine.calls) > sent


def test_resuming_asks_for_the_same_setup_and_a_saved_experiment_needs_resume(tmp_path: Path) -> None:
    out = tmp_path / "exp"
    run_experiment(fake_plan(seeds=[0], optimizers=["copro"]), out, show_progress=False)
    with pytest.raises(ConfigError, match="already holds an experiment"):
        run_experiment(fake_plan(seeds=[0], optimizers=["copro"]), out, show_progress=False)
    with pytest.raises(
        ConfigError, match=r"--resume: .*experiment.json ran with seeds=\[0\], this run asks for \[0, 1\]"
    ):
        run_experiment(fake_plan(seeds=[0, 1], optimizers=["copro"]), out, resume=True, show_progress=False)
    with pytest.raises(ConfigError, match="no experiment to continue"):
        run_experiment(fake_plan(), tmp_path / "other", resume=True, show_progress=False)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--optimizers", "mipro,nope"], "flags: field optimizers: unknown optimizer 'nope'"),
        (["--seeds", "0,0"], "a seed is listed twice"),
        (["--set", "num_trials=2"], "expected OPTIMIZER.KEY=VALUE"),
        (["--set", "mipro.bogus=2"], "field 'bogus'"),
        (["--ratios", "0.5,0.5,0.5"], "--ratios"),
    ],
)
def test_bad_input_is_one_line_before_anything_runs(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "exp"
    result = invoke("--out", str(out), "--lm", "fake/instructed", *args, "-q")
    assert result.exception is not None and message in str(result.exception), (
        result.output,
        result.exception,
    )
    assert "\n" not in str(result.exception) and not out.exists()


def seed(diff: float, ci: list[float] | None, number: int = 0) -> SeedResult:
    return SeedResult(
        optimizer="mipro", seed=number, label=f"mipro-s{number}", artifact="", test={}, diff={"rmr_avg": diff},
        ci={"rmr_avg": ci}, beats_baseline=bool(ci) and ci[0] > 0, worse_than_baseline=bool(ci) and ci[1] < 0,
    )  # fmt: skip


def test_the_verdict_says_how_many_seeds_beat_the_baseline_and_their_range() -> None:
    seeds = [seed(1.0, [-0.5, 2.5]), seed(7.2, [3.0, 11.0], 1), seed(4.1, [0.4, 7.9], 2)]
    assert verdict("mipro", seeds, "official-per-policy") == (
        "mipro: 2 of 3 seeds beat official-per-policy (RMR, 95% paired CI excluding 0); "
        "the mean gain +4.1 RMR, seeds ranging +1.0 to +7.2."
    )
    worse = verdict("mipro", [seed(-3.0, [-5.0, -1.0]), seed(0.5, [-1.0, 2.0], 1)], "b")
    assert (
        worse
        == "mipro: 0 of 2 seeds beat b (RMR, 95% paired CI excluding 0), 1 did worse; the mean difference -1.2 RMR, seeds ranging -3.0 to +0.5."
    )
    one = verdict("gepa", [seed(5.0, None)], "b")
    assert one.startswith("gepa: none of 1 seed has a confidence interval") and "luck of one compile" in one


def test_a_second_writer_of_the_same_experiment_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "exp"
    out.mkdir()
    with (
        WriterLock(out / LOCK_FILE, "the experiment", "one writer"),
        pytest.raises(WriterLockedError, match="the experiment"),
    ):
        run_experiment(fake_plan(seeds=[0], optimizers=["copro"]), out, show_progress=False)
    assert not (out / "splits.json").exists() and not (out / "artifacts").exists()


def test_a_plan_file_says_what_the_flags_say_and_seed_lm_sends_each_compile_its_seed(tmp_path: Path) -> None:
    out = tmp_path / "exp"
    plan = tmp_path / "plan.yaml"
    with improving_stub() as stub:
        plan.write_text(
            f"lm: {{model: openai/stub, api_base: '{stub.url}', num_retries: 0, cache: false}}\n"
            "optimizers: [copro]\nseeds: [3, 4]\nseed_lm: true\nratios: [0.25, 0.25, 0.5]\nn_boot: 20\n"
            "settings: {copro: {breadth: 2, depth: 1, num_threads: 2}}\n",
            encoding="utf-8",
        )
        result = invoke("--out", str(out), "--plan", str(plan), "-q")
        assert result.exit_code == 0, (result.output, result.exception)
        seeds = [(request.body or {}).get("seed") for request in stub.chat_requests]
    saved = json.loads((out / "experiment.json").read_text(encoding="utf-8"))
    assert saved["seeds"] == [3, 4] and saved["settings"] == {
        "copro": {"breadth": 2, "depth": 1, "num_threads": 2}
    }
    assert {manifest(out, name)["seed"] for name in ("copro-s3", "copro-s4")} == {3, 4}
    assert seeds.count(3) > 0 and seeds.count(4) > 0  # each compile's calls carry its seed
    test_calls = 3 * json.loads((out / "summary.json").read_text(encoding="utf-8"))["comparison"]["n_cases"]
    assert seeds.count(None) == test_calls  # the test evaluations are not seeded: one LM for every variant


def test_rerunning_a_seed_from_the_cache_gives_the_same_artifact_and_sends_nothing(tmp_path: Path) -> None:
    with improving_stub() as stub:
        args = ["--lm", "openai/stub", "--api-base", stub.url, "--num-retries", "0", "--optimizers", "copro",
                "--seeds", "1", *TINY[:6], *FAST]  # fmt: skip
        first = invoke("--out", str(tmp_path / "a"), *args)
        assert first.exit_code == 0, (first.output, first.exception)
        sent = len(stub.requests)
        again = invoke("--out", str(tmp_path / "b"), *args)
        assert again.exit_code == 0, (again.output, again.exception)
        assert len(stub.requests) == sent  # every compile and test call answered from the response cache

    def program(out: Path) -> dict[str, Any]:
        state = json.loads((out / "artifacts" / "copro-s1" / "program.json").read_text(encoding="utf-8"))
        return {key: value for key, value in state.items() if key != "metadata"}

    assert program(tmp_path / "a") == program(tmp_path / "b")
    assert (
        manifest(tmp_path / "b", "copro-s1")["usage"]["cache_hits"]
        == manifest(tmp_path / "b", "copro-s1")["usage"]["calls"]
    )


def test_a_capped_experiment_exits_3_and_says_how_to_continue(tmp_path: Path) -> None:
    out = tmp_path / "exp"
    result = invoke(*experiment_args(out, "--max-calls", "10"))
    assert result.exit_code == 3, (result.output, result.exception)
    assert (
        f"--max-calls 10 was reached: finished compiles and evaluations are kept; raise the cap and continue with sp-dspy experiment --out {out} --resume"
        in " ".join(result.output.split())
    )
    assert (
        manifest(out, "copro-s0")["budget"]["refused_by"] == "max_calls"
        and not (out / "summary.json").exists()
    )
    assert "copro seed 0: warning: --max-calls 10 is below the" in " ".join(result.output.split())


def test_the_embedded_model_runs_one_call_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[ExperimentPlan] = []

    def capture(plan: ExperimentPlan, *args: Any, **kwargs: Any) -> None:
        seen.append(plan)
        raise SystemExit(0)

    monkeypatch.setattr("sp_dspy.cli._experiment.lmo.is_local", lambda config: True)
    monkeypatch.setattr("sp_dspy.cli._experiment.lmo.context_window", lambda config: 4096)
    monkeypatch.setattr("sp_dspy._ablate.run_experiment", capture)
    invoke("--out", str(tmp_path / "exp"), "--lm", "fake/instructed", "--concurrency", "16", "-q")
    assert seen[0].concurrency == LOCAL_CONCURRENCY


def test_resume_works_from_another_directory_with_a_relative_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.jsonl").write_bytes(
        (Path(__file__).parent / "fixtures" / "pku" / "rows.jsonl").read_bytes()
    )
    monkeypatch.chdir(data)
    args = ["--benchmark", "pku-saferlhf", "--optimizers", "copro", "--seeds", "0", *TINY[:6], *FAST]
    first = invoke("--out", "../exp", "--lm", "fake/instructed", "--dataset", "rows.jsonl", *args)
    assert first.exit_code == 0, (first.output, first.exception)
    assert json.loads((tmp_path / "exp" / "experiment.json").read_text())["data"]["dataset"] == str(
        data / "rows.jsonl"
    )
    monkeypatch.chdir(tmp_path)
    resumed = invoke("--out", "exp", "--resume", "-q")
    assert resumed.exit_code == 0, (resumed.output, resumed.exception)
    assert resumed.output.count("finished earlier, not run again") == 3  # one compile, two evaluations


def test_a_compile_the_cap_cut_short_does_not_count_twice_against_the_cap(tmp_path: Path) -> None:
    out = tmp_path / "exp"
    plan = fake_plan(optimizers=["copro"], seeds=[0, 1])
    for seed, limited in ((0, False), (1, True)):
        write_json(
            out / "artifacts" / f"copro-s{seed}" / "manifest.json",
            {
                "budget_limited": limited,
                "usage": {"calls": 10 + seed, "prompt_tokens": 5, "completion_tokens": 1},
            },
        )
    spent = spent_so_far(plan, out)  # copro-s1 is compiled again: its replays count in its own budget
    assert (spent.calls, spent.tokens) == (10, 6)
    assert caps_left(Ledger(BudgetCaps(max_calls=25), earlier=spent)).max_calls == 15


def test_a_stopped_test_evaluation_names_the_experiment_command_that_continues_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def stopped(step: Any, context: Any, *args: Any) -> None:
        seen["retry_errors"] = context.retry_errors
        raise RunStopped("auth", "the key was refused", "sp-dspy eval --resume --retry-errors --run-id X")

    monkeypatch.setattr("sp_dspy._executor._steps.EvaluateStep.run", stopped)
    out = tmp_path / "exp"
    with pytest.raises(RunStopped) as raised:
        run_experiment(fake_plan(optimizers=["copro"], seeds=[0]), out, show_progress=False)
    assert str(raised.value) == (
        f"the key was refused; after the fix, continue with sp-dspy experiment --out {out} --resume --retry-errors"
    )
    run = invoke("--out", str(out), "--resume", "--retry-errors", "-q")
    assert isinstance(run.exception, RunStopped) and seen["retry_errors"] is True


def test_split_per_seed_compiles_each_seed_on_its_own_split_and_tests_on_cases_none_saw(
    tmp_path: Path,
) -> None:
    out = tmp_path / "exp"
    plan = fake_plan(optimizers=["copro"], seeds=[0, 1], split_per_seed=True)
    price = price_experiment(plan, out)  # the dry run prices the common test part
    outcome = run_experiment(plan, out, show_progress=False)
    assert outcome.summary is not None
    splits = {seed: json.loads((out / f"splits-s{seed}.json").read_text(encoding="utf-8")) for seed in (0, 1)}
    assert splits[0]["test"] != splits[1]["test"] and (splits[0]["seed"], splits[1]["seed"]) == (0, 1)
    common = json.loads((out / "splits.json").read_text(encoding="utf-8"))
    assert set(common["test"]) == set(splits[0]["test"]) & set(splits[1]["test"]) and not common["train"]
    for seed in (0, 1):
        compiled = manifest(out, f"copro-s{seed}")["split"]
        assert compiled["seed"] == seed and not set(compiled["train"] + compiled["dev"]) & set(common["test"])
    assert outcome.summary.comparison.n_cases == len(common["test"]) > 0
    tested = next(step for step in price.steps if step.name == "official-per-policy")
    assert tested.estimate.calls == len(common["test"])
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "a train/dev split of its own" in report
