"""The jobs of the commands that read recorded results (``compare``, ``report``, ``view``, ``export``,
and ``--mlflow-uri``'s logging) run from Python with the config object their CLI builds, through the
names ``sp_dspy`` re-exports, and give what the command writes for the same inputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import sp_dspy
from sp_dspy.cli import app

pytestmark = pytest.mark.usefixtures("isolated_run")

API = ("CompareConfig", "ComparedResults", "Comparison", "build_compare_config", "compare_results",
       "ReportConfig", "SummarisedResults", "ComparisonSummary", "build_report_config", "summarise_results",
       "write_html", "ExportConfig", "ExportOutcome", "ExportedRun", "build_export_config", "export_results",
       "MlflowConfig", "LoggedRun", "LoggedPlan", "mlflow_log_eval", "mlflow_log_compile",
       "mlflow_log_plan")  # fmt: skip


def test_the_jobs_are_public_names_and_import_sp_dspy_stays_light() -> None:
    assert set(API) <= set(sp_dspy.__all__)
    code = (
        "import sys, sp_dspy; sp_dspy.compare_results; sp_dspy.ReportConfig; sp_dspy.export_results; "
        "print(sorted(m for m in ('dspy', 'litellm', 'numpy', 'mlflow', 'inspect_ai') if m in sys.modules))"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "[]"


def _eval_run(tmp_path: Path, lm: str, run_id: str) -> Path:
    """The results file of ``sp-dspy eval`` on 6 sample cases, beside its run manifest."""
    out = tmp_path / run_id
    args = ["eval", "--lm", lm, "--limit", "6", "--output-dir", str(out), "--run-id", run_id, "-q"]
    assert CliRunner().invoke(app, args).exit_code == 0
    (written,) = out.glob("results_*.jsonl")
    return written


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    """Two runs on the same cases: the scripted fake and the random one."""
    return _eval_run(tmp_path, "fake", "a"), _eval_run(tmp_path, "fake/random", "b")


def test_compare_from_python_gives_the_document_and_warnings_the_command_writes(
    tmp_path: Path, runs: tuple[Path, Path]
) -> None:
    a, b = runs
    bad = tmp_path / "bad.jsonl"
    bad.write_text(a.read_text(encoding="utf-8") + '{"id": "nowhere-001-l0", "violated_rules": []}\n{x\n')
    args = ["compare", str(bad), str(b), "--n-boot", "50", "--seed", "2", "--skip-bad-lines"]
    shown = CliRunner().invoke(app, [*args, "--json", str(tmp_path / "c.json")])
    assert shown.exit_code == 0, shown.output
    config = sp_dspy.build_compare_config(
        {"results_a": [bad], "results_b": [b], "n_boot": 50, "seed": 2, "skip_bad_lines": True}
    )
    compared = sp_dspy.compare_results(config)
    assert (tmp_path / "c.json").read_text(encoding="utf-8") == compared.to_json() + "\n"
    assert compared.comparison.compared == 6 and compared.comparison.cells["ALL"].paired.ci
    assert compared.warnings == [
        "A: 1 result id(s) not in the dataset (e.g. nowhere-001-l0)",
        "A: 1 malformed result line(s) skipped",
    ]
    assert all(f"warning: {line}" in shown.stderr for line in compared.warnings)
    assert compared.notes[0].text.startswith("dataset from ")  # the run's manifest named the dataset


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"n_boot": -1}, "--n-boot: must be >= 0, got -1"),
        ({"results_a": []}, "RESULTS_A: no result file given"),
        ({"data": {"shard": "3/2"}}, "--shard: need 0 <= I < N, got '3/2'"),
        ({"data": {"limit": 0}}, "--limit: Input should be greater than or equal to 1"),
        ({"cap_awre": True}, "--cap-awre: Extra inputs are not permitted"),
    ],
)
def test_a_bad_compare_setting_is_one_line_naming_its_flag(settings: dict[str, object], message: str) -> None:
    with pytest.raises(sp_dspy.ConfigError) as error:
        sp_dspy.build_compare_config({"results_a": ["a.jsonl"], "results_b": ["b.jsonl"], **settings})
    assert str(error.value) == message


def test_compare_names_the_side_of_a_missing_file(tmp_path: Path, runs: tuple[Path, Path]) -> None:
    config = sp_dspy.CompareConfig(results_a=[runs[0]], results_b=[tmp_path / "none.jsonl"])
    with pytest.raises(sp_dspy.DataError, match=r"^RESULTS_B: .*none\.jsonl: no such file$"):
        sp_dspy.compare_results(config)


def test_report_and_view_from_python_give_the_summary_and_page_the_commands_write(
    tmp_path: Path, runs: tuple[Path, Path]
) -> None:
    a, b = runs
    common = ["--n-boot", "30", "--seed", "4", "--level", "L1"]
    report = ["report", str(a), f"random={b}", *common, "--out", "r.html", "--json", "r.json"]
    assert CliRunner().invoke(app, report).exit_code == 0
    view = ["view", str(a), f"random={b}", *common, "--out", "v.html"]
    assert CliRunner().invoke(app, view).exit_code == 0
    config = sp_dspy.build_report_config(
        {"variants": [(None, [a]), ("random", [b])], "n_boot": 30, "seed": 4, "data": {"level": "L1"}}
    )
    summarised = sp_dspy.summarise_results(config)
    summary = summarised.summary
    assert summary.model_dump(mode="json") == json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert [entry.label for entry in summary.variants][1] == "random" and summary.n_cases == 2
    title = f"sp-dspy view: {', '.join(entry.label for entry in summary.variants)}"
    page = sp_dspy.write_html(summary, tmp_path / "py.html", title=title, plots=[], command="sp-dspy view")
    assert page.read_text(encoding="utf-8") == (tmp_path / "v.html").read_text(encoding="utf-8")
    assert summarised.caveats() == summary.notes and summarised.skipped == 0


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"variants": []}, "RESULTS: no result files given"),
        ({"variants": [("x", [])]}, "RESULTS: variant x has no result files"),
        ({"n_boot": -2}, "--n-boot: must be >= 0, got -2"),
        ({"data": {"with_evidence": "maybe"}}, "--with-evidence: Input should be a valid boolean"),
    ],
)
def test_a_bad_report_setting_is_one_line_naming_its_flag(settings: dict[str, object], message: str) -> None:
    with pytest.raises(sp_dspy.ConfigError) as error:
        sp_dspy.build_report_config({"variants": [(None, ["a.jsonl"])], **settings})
    assert str(error.value).startswith(message)


def test_export_from_python_writes_the_log_the_command_writes(
    tmp_path: Path, runs: tuple[Path, Path]
) -> None:
    inspect_log = pytest.importorskip("inspect_ai.log")
    a, _ = runs
    shown = CliRunner().invoke(
        app, ["export", str(a), "--to", "inspect", "--out", "cli", "--n-boot", "20"], env={"COLUMNS": "300"}
    )
    assert shown.exit_code == 0, shown.output
    config = sp_dspy.build_export_config({"files": [a], "to": "inspect", "out": "py", "n_boot": 20})
    outcome = sp_dspy.export_results(config)
    [exported] = outcome.runs
    assert outcome.where == "py" and Path(exported.destination).parent == Path("py")
    [cli_log] = Path("cli").glob("*.eval")
    assert Path(exported.destination).name == cli_log.name
    assert f"{exported.scored.label}: {len(exported.scored.cases)} samples -> {cli_log}" in shown.stdout
    ours, theirs = inspect_log.read_eval_log(exported.destination), inspect_log.read_eval_log(str(cli_log))
    assert ours.results is not None and theirs.results is not None and ours.samples and theirs.samples
    assert ours.results.scores == theirs.results.scores
    assert [(s.id, s.scores, s.metadata) for s in ours.samples] == [
        (s.id, s.scores, s.metadata) for s in theirs.samples
    ]
    scored = sp_dspy.score_results(sp_dspy.ScoreConfig(files=[a], n_boot=20))
    assert exported.scored.report.cells == scored.report.cells  # the numbers `score` prints


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"to": "csv"}, "--to: Input should be 'inspect' or 'mlflow'"),
        ({"files": []}, "FILES: List should have at least 1 item"),
        ({"mlflow": {"url": "x"}}, "--mlflow-url: Extra inputs are not permitted"),
        ({"n_boot": -1}, "--n-boot: must be >= 0, got -1"),
    ],
)
def test_a_bad_export_setting_is_one_line_naming_its_flag(settings: dict[str, object], message: str) -> None:
    with pytest.raises(sp_dspy.ConfigError) as error:
        sp_dspy.build_export_config({"files": ["a.jsonl"], "to": "inspect", **settings})
    assert str(error.value).startswith(message)


def test_export_checks_its_target_before_scoring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    missing = tmp_path / "none.jsonl"  # never read: the target is refused first
    with pytest.raises(sp_dspy.ConfigError, match=r"^--to inspect needs --out DIR"):
        sp_dspy.export_results(sp_dspy.ExportConfig(files=[missing], to="inspect"))
    with pytest.raises(sp_dspy.ConfigError, match=r"^--to mlflow needs --mlflow-uri URI"):
        sp_dspy.export_results(sp_dspy.ExportConfig(files=[missing], to="mlflow"))
    assert sp_dspy.MlflowConfig().checked() is None  # no store named: nothing to log to


def test_mlflow_logging_from_python_logs_what_the_command_logs(
    tmp_path: Path, runs: tuple[Path, Path]
) -> None:
    mlflow = pytest.importorskip("mlflow")
    a, _ = runs
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["export", str(a), "--to", "mlflow", "--mlflow-uri", uri, "--mlflow-experiment", "cli"]
    assert CliRunner().invoke(app, args).exit_code == 0
    config = sp_dspy.MlflowConfig(uri=uri, experiment="py").checked()
    assert config is not None and config.uri == uri
    [logged] = sp_dspy.mlflow_log_eval(config, [a])
    client = mlflow.MlflowClient(tracking_uri=uri)
    by_experiment = {}
    for name in ("cli", "py"):
        experiment = client.get_experiment_by_name(name)
        [run] = client.search_runs([experiment.experiment_id])
        by_experiment[name] = run
    assert by_experiment["py"].info.run_id == logged.run_id and logged.label == a.stem
    cli_run, py_run = by_experiment["cli"].data, by_experiment["py"].data
    assert py_run.metrics == cli_run.metrics and py_run.params == cli_run.params
    assert "ALL/rmr_ci_low" in py_run.metrics  # eval's logging scores with score's intervals
