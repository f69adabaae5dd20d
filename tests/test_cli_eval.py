"""``sp-dspy eval`` flags through typer's test runner, on the in-process fake LM.

The fake oracle knows every gold answer of the bundled sample (the runner teaches
it), so a correct run scores 100% and each flag's effect shows in which records are
written, how they are labelled and what the manifest says.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sp_dspy import load_benchmark
from sp_dspy._data import make_split
from sp_dspy._errors import ConfigError, DataError
from sp_dspy._protocol import build_targets
from sp_dspy.cli import app
from tests._results import iter_records

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("isolated_run")]

LOADED = load_benchmark()
SAMPLE = LOADED.cases
IDS = [case.id for case in SAMPLE]


def invoke(out: Path, *args: str, lm: str = "fake") -> Result:
    return CliRunner().invoke(app, ["eval", "--lm", lm, "--output-dir", str(out), "-q", *args])


def ok(out: Path, *args: str, lm: str = "fake") -> Result:
    result = invoke(out, *args, lm=lm)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def records(path: Path) -> list[dict[str, Any]]:
    assert path.exists(), f"missing {path.name}; have {[p.name for p in path.parent.iterdir()]}"
    return list(iter_records(path))


def ids(path: Path) -> list[str]:
    return sorted(r["id"] for r in records(path))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--level", "L0"), [c.id for c in SAMPLE if c.level == "L0"]),
        (("--domain", "privacy"), [c.id for c in SAMPLE if c.domain == "privacy"]),
        (
            ("--level", "L1,L2", "--domain", "fraud"),
            [c.id for c in SAMPLE if c.level != "L0" and c.domain == "fraud"],
        ),
        (("--start-idx", "2", "--limit", "3"), IDS[2:5]),
        (("--shard", "1/3"), IDS[1::3]),
        (("--start-idx", "3", "--limit", "12", "--shard", "0/4"), IDS[3:15][0::4]),
    ],
)
def test_data_selection_flags_choose_the_cases(
    tmp_path: Path, args: tuple[str, ...], expected: list[str]
) -> None:
    ok(tmp_path, "--run-id", "s", *args)
    assert expected and ids(tmp_path / "results_s_fake.jsonl") == sorted(expected)


def test_split_flag_runs_one_part_and_the_manifest_hashes_the_split_file(tmp_path: Path) -> None:
    split = make_split(SAMPLE, seed=3, ratios=(0.25, 0.25, 0.5), dataset_hash=LOADED.content_hash)
    split_file = tmp_path / "splits.json"
    split.save(split_file)
    ok(tmp_path, "--run-id", "sp", "--split", f"{split_file}:dev")
    assert ids(tmp_path / "results_sp_fake.jsonl") == sorted(split.dev)
    manifest = json.loads((tmp_path / "manifest_sp.json").read_text(encoding="utf-8"))
    assert manifest["split"] == {
        "spec": f"{split_file}:dev",
        "sha256": hashlib.sha256(split_file.read_bytes()).hexdigest(),
    }
    bad = invoke(tmp_path, "--run-id", "sp2", "--split", f"{split_file}:holdout")
    assert isinstance(bad.exception, DataError) and "train, dev or test" in str(bad.exception)


def test_run_config_yaml_is_merged_under_the_flags(tmp_path: Path) -> None:
    run_config = tmp_path / "run.yaml"
    run_config.write_text(
        "protocol: per-rule\nconcurrency: 3\nrun_id: fromyaml\ndata:\n  level: L1\n  limit: 2\n",
        encoding="utf-8",
    )
    ok(tmp_path, "--run-config", str(run_config), "--limit", "1")
    judgments = records(tmp_path / "per_rule_fromyaml_fake.jsonl")
    first_l1 = next(c for c in SAMPLE if c.level == "L1")
    assert {j["cid"] for j in judgments} == {first_l1.id}
    assert len(judgments) == len(build_targets(first_l1))
    settings = json.loads((tmp_path / "manifest_fromyaml.json").read_text(encoding="utf-8"))["settings"]
    assert (settings["protocol"], settings["concurrency"]) == ("per-rule", 3)
    assert (settings["data"]["level"], settings["data"]["limit"]) == ("L1", 1)

    run_config.write_text("protocol: per-rule\ndata:\n  levle: L1\n", encoding="utf-8")
    bad = invoke(tmp_path, "--run-config", str(run_config))
    assert isinstance(bad.exception, ConfigError)
    assert str(run_config) in str(bad.exception) and "data.levle" in str(bad.exception)


def test_an_existing_results_file_is_refused_without_resume(tmp_path: Path) -> None:
    ok(tmp_path, "--run-id", "dup", "--limit", "2")
    again = invoke(tmp_path, "--run-id", "dup", "--limit", "2")
    assert isinstance(again.exception, ConfigError)
    message = str(again.exception)
    assert "results_dup_fake.jsonl exists" in message and "--resume" in message and "\n" not in message
    assert len(records(tmp_path / "results_dup_fake.jsonl")) == 2


def test_console_script_turns_config_errors_into_one_line_and_exit_2(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "from sp_dspy.cli import main; main()", "eval", "--lm", "fake", "-q"]
    command += ["--output-dir", str(tmp_path), "--limit", "1"]
    (tmp_path / "results_x_fake.jsonl").write_text('{"id": "priv-101-l0"}\n', encoding="utf-8")
    for extra in (["--run-id", "x"], ["--shard", "4/4"]):
        failed = subprocess.run([*command, *extra], capture_output=True, text=True, timeout=120)
        assert failed.returncode == 2, (extra, failed.stderr)
        lines = failed.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), failed.stderr


def test_resume_needs_an_earlier_run_and_finds_the_newest_one(tmp_path: Path) -> None:
    missing = invoke(tmp_path, "--resume")
    assert isinstance(missing.exception, ConfigError) and "no earlier run of fake" in str(missing.exception)
    ok(tmp_path, "--run-id", "older", "--limit", "1")
    ok(tmp_path, "--run-id", "newer", "--limit", "2")
    resumed = ok(tmp_path, "--resume", "--limit", "4")
    assert ids(tmp_path / "results_newer_fake.jsonl") == sorted(IDS[:4])
    assert ids(tmp_path / "results_older_fake.jsonl") == IDS[:1]
    assert "resumed: 2 unit(s) already done" in resumed.output


def test_results_file_names_and_run_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ok(tmp_path, "--run-id", "n1", "--limit", "1", lm="fake/oracle")
    # One manifest per run id, one setup: the other protocol is another run.
    mixed = invoke(tmp_path, "--run-id", "n1", "--limit", "1", "--protocol", "per-rule", lm="fake/oracle")
    assert isinstance(mixed.exception, ConfigError) and "ran with --protocol per-policy" in str(
        mixed.exception
    )
    ok(tmp_path, "--run-id", "n2", "--limit", "1", "--protocol", "per-rule", lm="fake/oracle")
    monkeypatch.setenv("RUN_ID", "fromenv")
    ok(tmp_path, "--limit", "1")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "manifest_fromenv.json",
        "manifest_n1.json",
        "manifest_n2.json",
        "per_rule_n2_oracle.jsonl",
        "results_fromenv_fake.jsonl",
        "results_n1_oracle.jsonl",
    ]
    bad = invoke(tmp_path, "--run-id", "../escape")
    assert isinstance(bad.exception, ConfigError) and "--run-id" in str(bad.exception)


def test_manifest_records_what_produced_the_run_and_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_KEY", "sk-gateway-7788")
    api_base = "http://bob:sk-gateway-7788@127.0.0.1:9/v1,http://eve:pw-not-in-env@127.0.0.1:9/v1"
    args = ["--run-id", "m", "--api-base", api_base]
    # The manifest records the command line as the console script sees it.
    monkeypatch.setattr(sys, "argv", ["sp-dspy", "eval", "--lm", "fake", *args])
    ok(tmp_path, *args)
    text = (tmp_path / "manifest_m.json").read_text(encoding="utf-8")
    assert "sk-gateway-7788" not in text and "pw-not-in-env" not in text
    manifest = json.loads(text)
    assert manifest["dataset"] == {
        "source": LOADED.source,
        "typed": None,  # no --dataset: the bundled sample
        "sha256": hashlib.sha256(Path(LOADED.source).read_bytes()).hexdigest(),
        "benchmark": "safepyramid",
        "cases": len(SAMPLE),
    }
    assert manifest["versions"]["sp-dspy"] and manifest["versions"]["dspy"].startswith("3.4")
    assert manifest["command"][manifest["command"].index("--api-base") + 1].count("***@") == 2
    run = manifest["runs"]["fake"]
    lines = records(tmp_path / "results_m_fake.jsonl")
    assert run["status"] == "complete" and run["units_total"] == len(SAMPLE)
    assert run["totals"]["records"] == len(lines) == len(SAMPLE) and run["totals"]["errors"] == 0
    assert run["totals"]["prompt_tokens"] == sum(r["usage"]["prompt_tokens"] for r in lines) > 0
    assert run["totals"]["completion_tokens"] == sum(r["usage"]["completion_tokens"] for r in lines) > 0
    assert run["totals"]["cost_usd"] is None  # the fake is not priced
    assert run["metrics"]["ALL"]["rmr_exact"] == 100.0
    assert manifest["settings"]["run_id"] == "m" and "api_key" not in set(run["lm"])


@pytest.mark.parametrize("layout", ["official", "prefix"])
def test_per_rule_layout_is_labelled_on_every_judgment(tmp_path: Path, layout: str) -> None:
    ok(tmp_path, "--run-id", "l", "--protocol", "per-rule", "--per-rule-layout", layout, "--limit", "2")
    judgments = records(tmp_path / "per_rule_l_fake.jsonl")
    assert len(judgments) == sum(len(build_targets(c)) for c in SAMPLE[:2])
    assert {(j["layout"], j["official_protocol"], j["protocol"]) for j in judgments} == {
        (layout, layout == "official", "per-rule")
    }
    assert all(j["pred"] is j["gt"] for j in judgments)


def test_parser_flag_is_recorded(tmp_path: Path) -> None:
    ok(tmp_path, "--run-id", "r", "--parser", "robust", "--limit", "2")
    assert {(r["parser"], r["parse_status"]) for r in records(tmp_path / "results_r_fake.jsonl")} == {
        ("robust", "clean")
    }
    bad = invoke(tmp_path, "--run-id", "r2", "--parser", "lenient")
    assert isinstance(bad.exception, ConfigError) and "parser" in str(bad.exception)


@pytest.mark.parametrize(
    ("behaviour", "status", "refused", "parse_failed"),
    [("refuse", "refused", True, False), ("garbage", "failed", False, True)],
)
def test_fake_refusals_and_garbage_are_excluded(
    tmp_path: Path, behaviour: str, status: str, refused: bool, parse_failed: bool
) -> None:
    result = ok(tmp_path, "--run-id", "b", "--limit", "3", lm=f"fake/{behaviour}")
    lines = records(tmp_path / f"results_b_{behaviour}.jsonl")
    assert {(r["parse_status"], r["refused"], r["parse_failed"], r["violated_rules"]) for r in lines} == {
        (status, refused, parse_failed, None)
    }
    manifest = json.loads((tmp_path / "manifest_b.json").read_text(encoding="utf-8"))
    metrics = manifest["runs"][behaviour]["metrics"]
    assert (metrics["ALL"]["excluded"], metrics["ALL"]["n_eval"]) == (3, 0)
    assert "results:" in result.output


def test_fake_refusals_per_rule_are_refused_judgments(tmp_path: Path) -> None:
    ok(tmp_path, "--run-id", "pr", "--protocol", "per-rule", "--limit", "1", lm="fake/refuse")
    judgments = records(tmp_path / "per_rule_pr_refuse.jsonl")
    assert judgments and {(j["refused"], j["pred"], j["parse_status"]) for j in judgments} == {
        (True, None, "refused")
    }


@pytest.mark.parametrize("protocol", ["per-policy", "per-rule"])
def test_dspy_program_runs_and_is_labelled(tmp_path: Path, protocol: str) -> None:
    ok(tmp_path, "--run-id", "d", "--program", "dspy", "--protocol", protocol, "--limit", "1")
    prefix = "results" if protocol == "per-policy" else "per_rule"
    lines = records(tmp_path / f"{prefix}_d_fake.jsonl")
    assert {(r["program"], r["parser"], r["protocol"]) for r in lines} == {("dspy", "dspy-adapter", protocol)}
    if protocol == "per-policy":
        assert lines[0]["violated_rules"] == sorted(SAMPLE[0].ground_truth_violations)
    else:
        assert len(lines) == len(build_targets(SAMPLE[0])) and all(j["pred"] is j["gt"] for j in lines)
    bad = invoke(tmp_path, "--run-id", "d2", "--program", "gpt-guard")
    assert isinstance(bad.exception, ConfigError) and "--program" in str(bad.exception)


def test_verbose_lists_each_unit_and_the_lm_settings(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["eval", "--lm", "fake", "--output-dir", str(tmp_path), "-q", "-v", "--run-id", "v", "--limit", "2"],
    )
    assert result.exit_code == 0, result.exception
    assert "LM settings:" in result.output
    for case_id in IDS[:2]:
        assert f"{case_id}  clean" in result.output or f"{case_id} clean" in result.output


def test_models_of_one_invocation_share_a_run_id_and_a_manifest(tmp_path: Path) -> None:
    (tmp_path / "models.yaml").write_text(
        "models:\n  first: fake/oracle\n  second: fake/empty\n", encoding="utf-8"
    )
    args = ["--config", "models.yaml", "--models", "first,second", "--limit", "2"]
    result = CliRunner().invoke(app, ["eval", *args, "-q", "--output-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, (result.output, result.exception)
    (manifest_path,) = (tmp_path / "out").glob("manifest_*.json")
    run_id = manifest_path.stem.removeprefix("manifest_")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    assert sorted(manifest["runs"]) == ["first", "second"]
    assert manifest["runs"]["first"]["results_file"].endswith(f"results_{run_id}_oracle.jsonl")
    assert manifest["runs"]["second"]["results_file"].endswith(f"results_{run_id}_empty.jsonl")
    assert manifest["runs"]["first"]["metrics"]["ALL"]["rmr_exact"] == 100.0
    assert manifest["runs"]["second"]["metrics"]["ALL"]["rmr_exact"] < 100.0


def test_bad_flag_value_names_the_flag() -> None:
    from sp_dspy._errors import ConfigError
    from sp_dspy._runner import build_eval_config

    with pytest.raises(ConfigError, match=r"^--protocol: Input should be 'per-policy' or 'per-rule'$"):
        build_eval_config({"protocol": "per-foo"})
    with pytest.raises(ConfigError, match=r"^--level: "):
        build_eval_config({"data": {"level": 3}})


@pytest.mark.parametrize("protocol", ["per-policy", "per-rule"])
def test_eval_reads_its_results_file_once_after_the_units(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    """Score, totals, errors, the verbose listing and the tables come from one read; a resume reads once more, before its units."""
    from sp_dspy._metrics import _reader

    reads: list[str] = []
    read_lines = _reader.read_regular_lines

    def counted(path: Path, what: str) -> Iterator[tuple[int, str]]:
        reads.append(path.name)
        return read_lines(path, what)

    monkeypatch.setattr(_reader, "read_regular_lines", counted)
    args = ("--protocol", protocol, "--limit", "3", "--run-id", "once", "--verbose")
    assert invoke(tmp_path, *args).exit_code == 0
    assert len(reads) == 1
    assert invoke(tmp_path, *args, "--resume").exit_code == 0
    assert len(reads) == 3


@pytest.mark.parametrize(
    ("args", "setting"),
    [
        (("--dataset", "other.json"), "--dataset"),
        (("--program", "dspy"), "--program"),
        (("--protocol", "per-rule"), "--protocol"),
        (("--parser", "robust"), "--parser"),
        (("--level", "L1"), "--level"),
        (("--limit", "1"), "--limit"),
        (("--temperature", "0.5"), "the model's temperature"),
    ],
)
def test_a_resume_with_other_settings_is_refused_naming_the_setting(
    tmp_path: Path, args: tuple[str, ...], setting: str
) -> None:
    from sp_dspy._data._source import sample_path

    (tmp_path / "other.json").write_bytes(sample_path().read_bytes() + b"\n")  # the same cases, another file
    ok(tmp_path, "--run-id", "r", "--limit", "2")
    results = tmp_path / "results_r_fake.jsonl"
    before = results.read_bytes()
    resumed = invoke(tmp_path, "--run-id", "r", "--limit", "2", "--resume", *args)
    assert isinstance(resumed.exception, ConfigError), (resumed.output, resumed.exception)
    message = str(resumed.exception)
    assert "\n" not in message and message.startswith(f"--resume: run r ran with {setting} ")
    assert "resuming would mix two setups in one results file" in message
    assert results.read_bytes() == before


def test_a_resume_may_extend_the_run_to_more_cases(tmp_path: Path) -> None:
    ok(tmp_path, "--run-id", "r", "--limit", "2")
    ok(tmp_path, "--run-id", "r", "--limit", "4", "--resume")
    assert ids(tmp_path / "results_r_fake.jsonl") == sorted(IDS[:4])
    ok(tmp_path, "--run-id", "r", "--resume")  # every case
    assert ids(tmp_path / "results_r_fake.jsonl") == sorted(IDS)


def test_a_model_joining_a_run_id_must_share_its_dataset_and_program(tmp_path: Path) -> None:
    """One manifest per run id: a second model may join it, but not with another setup it would mislabel."""
    from sp_dspy._data._source import sample_path

    (tmp_path / "other.json").write_bytes(sample_path().read_bytes() + b"\n")  # the same cases, another file
    ok(tmp_path, "--run-id", "r", "--limit", "2")
    manifest = tmp_path / "manifest_r.json"
    before = manifest.read_bytes()
    for args, setting in (
        (("--dataset", "other.json"), "--dataset"),
        (("--program", "dspy"), "--program"),
        (("--level", "L1"), "--level"),
    ):
        joined = invoke(tmp_path, "--run-id", "r", "--limit", "2", *args, lm="fake/random")
        assert isinstance(joined.exception, ConfigError), (joined.output, joined.exception)
        message = str(joined.exception)
        assert "\n" not in message and message.startswith(f"--run-id r: run r ran with {setting} ")
        assert "its one manifest would mislabel the models already in it" in message
        assert manifest.read_bytes() == before
        assert not (tmp_path / "results_r_random.jsonl").exists()
    assert invoke(tmp_path, "--run-id", "r", "--limit", "2", lm="fake/random").exit_code == 0
    runs = json.loads(manifest.read_text())["runs"]
    assert sorted(runs) == ["fake", "random"]
