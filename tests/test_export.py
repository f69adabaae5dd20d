"""``sp-dspy export`` and ``--mlflow-uri``: the logs and runs hold the numbers ``sp-dspy score`` prints.

inspect_ai's logs are read back with its own ``read_eval_log``; MLflow runs are queried from a
local SQLite store (nothing is started) with MLflow's own client.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sp_dspy._errors import ConfigError
from sp_dspy._metrics._official import TAUS
from sp_dspy.cli import app
from tests._factories import raw_case, write_dataset

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("isolated_run")]

inspect_log = pytest.importorskip("inspect_ai.log")
mlflow = pytest.importorskip("mlflow")


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [*map(str, args)])


def ok(*args: str | Path) -> Result:
    result = invoke(*args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """Six cases over three levels of two conversations, five rules each."""
    rules = {n: f"Rule number {n} of the test policy." for n in range(1, 6)}
    cases = [
        raw_case("conv-001-l0", level="L0", gt=[1], rules=rules),
        raw_case("conv-001-l1", level="L1", gt=[1, 2], rules=rules),
        raw_case("conv-001-l2", level="L2", gt=[2, 3, 4], rules=rules),
        raw_case("conv-002-l0", level="L0", gt=[], domain="fraud", rules=rules),
        raw_case("conv-002-l1", level="L1", gt=[3], domain="fraud", rules=rules),
        raw_case("conv-002-l2", level="L2", gt=[1, 3], domain="fraud", rules=rules),
    ]
    return write_dataset(tmp_path / "bench.json", cases)


def write_lines(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """Exact, one-off, refused, unparseable and missing cases, with usage."""
    usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    return write_lines(
        tmp_path / "results_a_model.jsonl",
        [
            {"id": "conv-001-l0", "violated_rules": [1], "usage": usage, "cost": 0.002},
            {"id": "conv-001-l1", "violated_rules": [1], "usage": usage, "cost": 0.002},
            {"id": "conv-001-l2", "violated_rules": [2, 3, 4, 5], "usage": usage, "cost": 0.002},
            {"id": "conv-002-l0", "violated_rules": None, "refused": True},
            {"id": "conv-002-l1", "violated_rules": None, "parse_failed": True, "answer": "no json here"},
        ],
    )


def score_json(*args: str | Path) -> dict[str, Any]:
    return json.loads(ok("score", *args, "--json", "-").stdout)


def exported_and_scored(
    results: Path, dataset: Path, out: Path, *, n_boot: str
) -> tuple[Any, dict[str, Any]]:
    """The one log ``export --to inspect`` writes for ``results``, read back, and ``score --json``'s report."""
    ok("export", results, "--to", "inspect", "--out", out, "--dataset", dataset, "--n-boot", n_boot)
    [log_file] = out.glob("*.eval")
    return inspect_log.read_eval_log(str(log_file)), score_json(
        results, "--dataset", dataset, "--n-boot", n_boot
    )


def cell_from_samples(samples: list[Any]) -> dict[str, float | None]:
    """RMR@tau and exact match recomputed from the exported per-sample scores (the reference's rounding)."""
    values = [sample.scores["safepyramid"].value for sample in samples]
    scored = [value for value in values if not value["excluded"]]
    cell: dict[str, float | None] = {}
    for tau, _ in TAUS:
        key = f"rmr_tau_{round(tau * 10)}"
        cell[key] = round(100 * sum(v[key] for v in scored) / len(scored), 2) if scored else None
    return cell


def test_inspect_logs_hold_each_sample_and_the_cells_score_prints(
    tmp_path: Path, dataset: Path, results: Path
) -> None:
    log, scored = exported_and_scored(results, dataset, tmp_path / "logs", n_boot="50")

    assert log.status == "success" and log.samples is not None and len(log.samples) == 6
    by_id = {sample.id: sample for sample in log.samples}
    first = by_id["conv-001-l0"]
    assert [message.role for message in first.input] == ["system", "user"]  # type: ignore[union-attr]
    assert first.target == ["1"]
    assert first.scores["safepyramid"].value["exact_match"] == 1
    assert by_id["conv-001-l2"].scores["safepyramid"].value["fp"] == 1
    refused = by_id["conv-002-l0"].scores["safepyramid"]
    assert refused.value["excluded"] is True and refused.explanation == "excluded: refused"
    assert by_id["conv-002-l1"].metadata["exclusion"] == "unparseable"
    assert by_id["conv-002-l1"].output.completion == "no json here"
    assert by_id["conv-002-l2"].metadata["exclusion"] == "no record"
    assert first.model_usage and next(iter(first.model_usage.values())).total_cost == 0.002
    # Every cell's RMR@tau recomputed from the samples is score's, and the log's metrics are score's.
    for cell in ("L0", "L1", "L2", "ALL"):
        members = [s for s in log.samples if cell == "ALL" or s.metadata["level"] == cell]
        expected = {key: scored[cell][key] for key in cell_from_samples(members)}
        assert cell_from_samples(members) == expected
    assert log.results is not None
    cells = {score.name: score for score in log.results.scores}
    assert log.results.scores[0].name == "ALL"
    for cell in ("L0", "L1", "L2", "ALL"):
        assert cells[cell].metrics["rmr_avg"].value == scored[cell]["rmr_avg"]
        assert cells[cell].metrics["rdr"].value == scored[cell]["rdr"]
    assert cells["ALL"].metrics["rmr_avg"].metadata == {"ci95": scored["ci"]["ALL"]["rmr_avg"]}


def test_a_per_rule_run_exports_one_sample_per_case_with_its_judgments(tmp_path: Path, dataset: Path) -> None:
    lines = []
    for cid, gold, flagged in (("conv-001-l0", {1}, {1}), ("conv-001-l1", {1, 2}, {2})):
        for rule in (1, 2, 3):
            lines.append(
                {"kind": "judgment", "cid": cid, "rule": rule, "gt": rule in gold, "pred": rule in flagged}
            )
    results = write_lines(tmp_path / "per_rule_b_model.jsonl", lines)
    log, scored = exported_and_scored(results, dataset, tmp_path / "logs", n_boot="0")
    assert log.samples is not None and len(log.samples) == 6
    by_id = {sample.id: sample for sample in log.samples}
    assert [j["rule"] for j in by_id["conv-001-l1"].metadata["judgments"]] == [1, 2, 3]
    assert by_id["conv-001-l1"].scores["safepyramid"].value["fn"] == 1
    assert log.eval.task == "safepyramid/per-rule/results"
    assert cell_from_samples(log.samples) == {
        key: scored["ALL"][key] for key in cell_from_samples(log.samples)
    }


def test_an_eval_run_exports_with_its_model_settings_and_usage(tmp_path: Path) -> None:
    ok("eval", "--lm", "fake", "--output-dir", tmp_path / "out", "--run-id", "r1", "--limit", "6", "-q")
    results = tmp_path / "out" / "results_r1_fake.jsonl"
    ok("export", results, "--to", "inspect", "--out", tmp_path / "logs")
    [log_file] = (tmp_path / "logs").glob("*.eval")
    log = inspect_log.read_eval_log(str(log_file))
    assert log.eval.model == "fake" and log.eval.run_id == "r1"  # the model string as given
    assert log.eval.task == "safepyramid/per-policy/official"
    assert log.eval.task_args["protocol"] == "per-policy"
    assert log.stats.model_usage["fake"].input_tokens > 0
    assert log.eval.dataset.samples == 6


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """The installed command as a user runs it: one ``error:`` line and the exit status."""
    code = "from sp_dspy.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_export_refuses_results_of_another_dataset_like_score(tmp_path: Path, dataset: Path) -> None:
    foreign = write_lines(tmp_path / "results_x.jsonl", [{"id": "other-001-l0", "violated_rules": [1]}])
    exported = cli("export", foreign, "--to", "inspect", "--out", tmp_path / "logs", "--dataset", dataset)
    scored = cli("score", foreign, "--dataset", dataset)
    assert exported.returncode == scored.returncode == 2
    assert exported.stderr.strip() == scored.stderr.strip() and len(exported.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "logs").exists()


def test_without_the_extra_the_flag_names_it_in_one_line(
    tmp_path: Path, results: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    monkeypatch.setitem(sys.modules, "mlflow", None)
    result = invoke("export", results, "--to", "inspect", "--out", tmp_path / "logs", "--dataset", dataset)
    assert isinstance(result.exception, ConfigError)
    assert str(result.exception) == "--to inspect needs inspect_ai: pip install 'sp-dspy[inspect]'"
    result = invoke(
        "eval", "--lm", "fake", "--output-dir", tmp_path / "out", "--mlflow-uri", "sqlite:///x.db"
    )
    assert isinstance(result.exception, ConfigError)
    assert str(result.exception) == "--mlflow-uri needs MLflow: pip install 'sp-dspy[mlflow]'"
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One SQLite tracking store for the module (creating its tables takes seconds); each test
    logs into an experiment of its own."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


def mlflow_runs(uri: str, experiment_name: str) -> dict[str, Any]:
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(experiment_name)
    return {run.info.run_name: run for run in client.search_runs([experiment.experiment_id])}


def test_eval_logs_a_run_with_score_s_metrics(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    uri, experiment = store, request.node.name
    ok("eval", "--lm", "fake/random", "--output-dir", tmp_path / "out", "--run-id", "r1", "--limit", "9", "-q",
       "--mlflow-uri", uri, "--mlflow-experiment", experiment)  # fmt: skip
    results = tmp_path / "out" / "results_r1_random.jsonl"
    scored = score_json(results)
    [run] = mlflow_runs(uri, experiment).values()
    metrics, params = run.data.metrics, run.data.params
    for cell in ("L0", "L1", "L2", "ALL"):
        assert metrics[f"{cell}/rmr"] == scored[cell]["rmr_avg"]
        assert metrics[f"{cell}/rmr_at_1.0"] == scored[cell]["rmr_exact"]
        assert metrics[f"{cell}/rdr"] == scored[cell]["rdr"]
    assert [metrics["ALL/rmr_ci_low"], metrics["ALL/rmr_ci_high"]] == scored["ci"]["ALL"]["rmr_avg"]
    assert metrics["calls"] == 9
    assert params["model"] == "fake/random" and params["program"] == "official"
    assert params["protocol"] == "per-policy"
    artifacts = {a.path for a in mlflow.MlflowClient(tracking_uri=uri).list_artifacts(run.info.run_id)}
    assert artifacts == {"results_r1_random.jsonl", "manifest_r1.json"}


def test_an_experiment_is_one_parent_with_its_variants_and_compiles(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    uri, experiment = store, request.node.name
    ok("experiment", "--lm", "fake/instructed", "--optimizers", "bootstrap", "--seeds", "0", "--out",
       tmp_path / "exp", "-q", "--n-boot", "0", "--mlflow-uri", uri, "--mlflow-experiment", experiment)  # fmt: skip
    runs = mlflow_runs(uri, experiment)
    parent = runs.pop("experiment exp")
    assert {name: run.data.tags.get("mlflow.parentRunId") for name, run in runs.items()} == {
        "official-per-policy": parent.info.run_id,
        "bootstrap-s0": parent.info.run_id,
        "compile bootstrap-s0": parent.info.run_id,
    }
    client = mlflow.MlflowClient(tracking_uri=uri)
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} == {
        "summary.json",
        "report.html",
        "experiment.json",
    }
    params = parent.data.params  # the plan's data settings a param each (the plan nests them under data)
    assert params["benchmark"] == "safepyramid" and params["lenient"] == "false" and "data" not in params
    assert params["optimizers"] == '["bootstrap"]' and "dataset" not in params  # None: not logged
    compiled = runs["compile bootstrap-s0"]
    assert compiled.data.params["optimizer"] == "bootstrap" and compiled.data.params["seed"] == "0"
    manifest = json.loads((tmp_path / "exp" / "artifacts" / "bootstrap-s0" / "manifest.json").read_text())
    history = client.get_metric_history(compiled.info.run_id, "dev_candidate_score")
    assert [m.value for m in sorted(history, key=lambda m: m.step)] == [
        c["dev"]["score"] for c in manifest["dev"]["candidates"]
    ]
    summary = json.loads((tmp_path / "exp" / "summary.json").read_text())
    test_rmr = summary["optimizers"][0]["seeds"][0]["test"]["rmr_avg"]
    assert runs["bootstrap-s0"].data.metrics["ALL/rmr"] == test_rmr
    assert runs["bootstrap-s0"].data.params["seed"] == "0"


def test_an_unusable_tracking_uri_is_one_line_before_any_lm_call(tmp_path: Path) -> None:
    for uri in ("http://127.0.0.1:9", f"sqlite:///{tmp_path / 'missing' / 'mlflow.db'}"):
        result = cli("eval", "--lm", "fake", "--output-dir", tmp_path / "out", "-q", "--mlflow-uri", uri)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: --mlflow-uri {uri}: "), result.stderr
        assert not (tmp_path / "out").exists()


def test_an_ablation_is_one_parent_with_a_child_per_variant(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    uri, experiment = store, request.node.name
    ok("ablate", "--lm", "fake", "--limit", "6", "--out", tmp_path / "abl", "-q", "--n-boot", "0",
       "--mlflow-uri", uri, "--mlflow-experiment", experiment)  # fmt: skip
    runs = mlflow_runs(uri, experiment)
    parent = runs.pop("ablation abl")
    summary = json.loads((tmp_path / "abl" / "summary.json").read_text())
    assert set(runs) == {variant["label"] for variant in summary["variants"]}
    for variant in summary["variants"]:
        run = runs[variant["label"]]
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.metrics["ALL/rmr"] == variant["score"]["ALL"]["rmr_avg"]
        assert run.data.params["protocol"] == variant["protocol"]


def test_export_to_mlflow_logs_existing_results(
    tmp_path: Path, dataset: Path, results: Path, store: str, request: pytest.FixtureRequest
) -> None:
    uri, experiment = store, request.node.name
    ok("export", results, "--to", "mlflow", "--mlflow-uri", uri, "--mlflow-experiment", experiment,
       "--dataset", dataset, "--n-boot", "0")  # fmt: skip
    scored = score_json(results, "--dataset", dataset, "--n-boot", "0")
    [run] = mlflow_runs(uri, experiment).values()
    assert run.info.run_name == "results_a_model"
    assert run.data.metrics["ALL/rmr"] == scored["ALL"]["rmr_avg"]
    assert run.data.metrics["ALL/excluded_pct"] == scored["ALL"]["refusal"]
    assert run.data.metrics["cost_usd"] == 0.006
