"""A run is scored on the cases it selected, by every command, from any directory, even when killed.

``eval`` records its dataset and selection (``--split``, ``--limit``, ...) in its manifest as
it starts; ``score``, ``compare``, ``report`` and ``show`` re-apply that selection, so their N
and RMR are eval's. The fake LM answers; the dataset is written per test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sp_dspy.cli import app
from tests._factories import raw_case, write_dataset

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("isolated_run")]

#: Four conversations at three levels each: a split keeps a conversation on one side.
CASES = [
    raw_case(f"own-{conversation:03d}-l{level}", level=f"L{level}", gt=[1 + (conversation + level) % 3])
    for conversation in range(1, 5)
    for level in range(3)
]


def cli(*args: str | Path, fails: bool = False) -> Result:
    result = CliRunner().invoke(app, [str(arg) for arg in args], env={"COLUMNS": "200"})
    if fails:
        assert result.exit_code != 0, result.output
    else:
        assert result.exit_code == 0, (result.output, result.exception)
    return result


def evaluate(run_id: str, *args: str | Path, lm: str = "fake/random", out: Path = Path("runs")) -> Path:
    cli("eval", "--lm", lm, "--output-dir", out, "--run-id", run_id, "-q", "--no-cache", *args)
    return out / f"results_{run_id}_{lm.removeprefix('fake/')}.jsonl"


def manifest_of(results: Path, run_id: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((results.parent / f"manifest_{run_id}.json").read_text("utf-8"))
    return document


def score_json(*args: str | Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(cli("score", *args, "--json", "-", "--n-boot", "0").stdout)
    return document


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "own.json", CASES)


def test_score_compare_report_and_show_agree_with_eval_on_a_split(tmp_path: Path, dataset: Path) -> None:
    cli("split", "--dataset", dataset, "--ratios", "0.25,0.25,0.5", "--out", "splits.json")
    test_ids = json.loads(Path("splits.json").read_text(encoding="utf-8"))["test"]
    assert 0 < len(test_ids) < len(CASES)
    results = evaluate("s", "--dataset", dataset, "--split", "splits.json:test")
    ran = manifest_of(results, "s")["runs"]["random"]["metrics"]["ALL"]
    assert ran["total"] == len(test_ids)

    scored = score_json(results)["ALL"]
    assert {k: scored[k] for k in ran} == ran  # N, excluded, RMR, strict RMR: eval's

    compared = json.loads(cli("compare", results, results, "--json", "-", "--n-boot", "0").stdout)
    assert (compared["compared"], compared["in_neither"]) == (len(test_ids), 0)

    cli("report", results, "--json", "summary.json", "--out", "report.html", "--n-boot", "0")
    summary = json.loads(Path("summary.json").read_text(encoding="utf-8"))
    (variant,) = summary["variants"]
    assert summary["n_cases"] == len(test_ids)
    assert variant["settings"]["split"] == "splits.json:test"  # as typed; the manifest resolves its file
    assert (variant["cells"]["ALL"]["rmr"], variant["cells"]["ALL"]["excluded_pct"]) == (
        ran["rmr_avg"],
        ran["refusal"],
    )
    shown = cli("show", results).output
    assert f"of {len(test_ids)} with results ({len(test_ids)} selected" in shown


def test_a_limited_run_is_scored_on_its_own_cases_none_excluded(tmp_path: Path) -> None:
    results = evaluate("demo", "--limit", "3", lm="fake")  # the bundled sample, as `make demo`
    scored = score_json(results)["ALL"]
    assert (scored["total"], scored["excluded"], scored["refusal"]) == (3, 0, 0.0)
    printed = cli("score", results, "--n-boot", "0").output
    assert "Scored 3 cases of " in printed and "the run's selection: --limit 3" in printed


def test_a_run_killed_before_its_end_is_scored_on_its_own_data(
    tmp_path: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed outright (SIGKILL) after a few records: no end of run, no manifest update."""
    from sp_dspy._runner import _engine

    class Killed(BaseException):
        """What SIGKILL leaves: nothing after this point runs."""

    original = _engine.UnitEngine.run

    async def killed_after_two(self: Any, units: Any) -> Any:
        await original(self, list(units)[:2])
        raise Killed

    with monkeypatch.context() as patch, pytest.raises(Killed):
        patch.setattr(_engine.UnitEngine, "run", killed_after_two)
        CliRunner().invoke(
            app,
            ["eval", "--lm", "fake", "--output-dir", "runs", "--run-id", "k", "-q", "--dataset", str(dataset),
             "--limit", "5"],
            catch_exceptions=False,
        )  # fmt: skip
    results = Path("runs/results_k_fake.jsonl")
    manifest = manifest_of(results, "k")
    assert manifest["runs"]["fake"]["status"] == "running" and manifest["runs"]["fake"]["finished_at"] is None
    scored = score_json(results)["ALL"]
    assert (scored["total"], scored["n_eval"], scored["excluded"]) == (5, 2, 3)  # its 5 cases, 2 answered
    assert str(dataset) in cli("score", results, "--n-boot", "0").output


def test_a_results_file_without_a_manifest_gets_a_note_naming_the_dataset(tmp_path: Path) -> None:
    results = evaluate("n", "--limit", "2", lm="fake")
    lone = tmp_path / "lone" / "results.jsonl"
    lone.parent.mkdir()
    lone.write_bytes(results.read_bytes())
    scored = cli("score", lone, "--n-boot", "0")
    notes = [line for line in scored.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and f"no run manifest beside {lone}" in notes[0]
    assert "safepyramid_sample.json" in notes[0] and "--dataset" in notes[0]
    assert "note:" not in cli("score", results, "--n-boot", "0").stderr  # its manifest names it


def test_selection_flags_score_a_file_without_a_manifest(tmp_path: Path, dataset: Path) -> None:
    results = tmp_path / "hand.jsonl"
    results.write_text(
        "".join(json.dumps({"id": case["id"], "violated_rules": case["ground_truth_violations"]}) + "\n"
                for case in CASES[:4]),
        encoding="utf-8",
    )  # fmt: skip
    assert score_json(results, "--dataset", dataset)["ALL"]["total"] == len(CASES)  # every case
    limited = score_json(results, "--dataset", dataset, "--limit", "4")["ALL"]
    assert (limited["total"], limited["excluded"]) == (4, 0)
    assert (
        score_json(results, "--dataset", dataset, "--start-idx", "2", "--limit", "4")["ALL"]["excluded"] == 2
    )
    assert score_json(results, "--dataset", dataset, "--shard", "0/2")["ALL"]["total"] == len(CASES) // 2
    cli("split", "--dataset", dataset, "--ratios", "0.25,0.25,0.5", "--out", "splits.json")
    test_ids = json.loads(Path("splits.json").read_text(encoding="utf-8"))["test"]
    split = score_json(results, "--dataset", dataset, "--split", "splits.json:test")["ALL"]
    assert split["total"] == len(test_ids)
    compared = json.loads(
        cli(
            "compare", results, results, "--dataset", dataset, "--limit", "4", "--json", "-", "--n-boot", "0"
        ).stdout
    )
    assert (compared["compared"], compared["in_neither"]) == (4, 0)
    bad = cli("score", results, "--dataset", dataset, "--shard", "3/2", fails=True)
    assert "--shard: need 0 <= I < N" in str(bad.exception)


def test_runs_with_different_selections_scored_together_say_which_cases(
    tmp_path: Path, dataset: Path
) -> None:
    two = evaluate("two", "--dataset", dataset, "--limit", "2")
    five = evaluate("five", "--dataset", dataset, "--limit", "5")
    together = cli("score", two, five, "--json", "-", "--n-boot", "0")
    assert json.loads(together.stdout)["ALL"]["total"] == 5  # one variant: the cases any file's run selected
    assert "note: the runs selected different cases" in together.stderr
    assert "--limit 2 (2)" in together.stderr and "--limit 5 (5)" in together.stderr
    assert "scored on the 5 case(s) any of them selected" in together.stderr

    compared = cli("compare", two, five, "--json", "-", "--n-boot", "0")
    document = json.loads(compared.stdout)
    assert (document["compared"], document["only_b"], document["in_neither"]) == (2, 0, 0)
    assert "scored on the 2 case(s) every side selected" in compared.stderr

    reported = cli("report", two, five, "--json", "summary.json", "--out", "r.html", "--n-boot", "0")
    summary = json.loads(Path("summary.json").read_text(encoding="utf-8"))
    assert summary["n_cases"] == 2 and "scored on the 2 case(s) every side selected" in summary["notes"][0]
    assert reported.stderr.count("every side selected") == 1  # once, with the report's notes
    assert "every side selected" in Path("r.html").read_text(encoding="utf-8")

    same = cli("score", two, evaluate("again", "--dataset", dataset, "--limit", "2"), "--n-boot", "0")
    assert "note:" not in same.stderr and "the run's selection: --limit 2" in same.stdout


def test_a_run_is_scored_from_another_directory(
    tmp_path: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    write_dataset(work / "mine.json", CASES[:9])
    cli("split", "--dataset", "mine.json", "--ratios", "0.34,0.33,0.33", "--out", "parts.json")
    test_ids = json.loads((work / "parts.json").read_text(encoding="utf-8"))["test"]
    results = work / evaluate("rel", "--dataset", "mine.json", "--split", "parts.json:test")
    manifest = manifest_of(results, "rel")
    assert (
        manifest["dataset"]["source"] == str(work / "mine.json")
        and manifest["dataset"]["typed"] == "mine.json"
    )
    assert manifest["settings"]["data"]["split"] == f"{work / 'parts.json'}:test"
    assert manifest["split"]["spec"] == "parts.json:test"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    scored = score_json(results)["ALL"]
    assert (scored["total"], scored["excluded"]) == (len(test_ids), 0)
    assert f"{len(test_ids)} selected" in cli("show", results).output


def test_report_on_an_ablations_results_agrees_with_its_summary(tmp_path: Path, dataset: Path) -> None:
    cli("split", "--dataset", dataset, "--ratios", "0.25,0.25,0.5", "--out", "splits.json")
    variants = "official-per-policy,official-per-rule"
    cli("ablate", "--lm", "fake/random", "--dataset", dataset, "--split", "splits.json:test", "--variants",
        variants, "--out", "ablation", "--n-boot", "0", "-q")  # fmt: skip
    ablated = json.loads(Path("ablation/summary.json").read_text(encoding="utf-8"))
    labelled = [
        f"{label}={next(Path('ablation/results').glob(f'*-{label}_*.jsonl'))}"
        for label in variants.split(",")
    ]
    cli("report", *labelled, "--json", "again.json", "--out", "again.html", "--n-boot", "0")
    again = json.loads(Path("again.json").read_text(encoding="utf-8"))
    assert (
        again["n_cases"]
        == ablated["n_cases"]
        == len(json.loads(Path("splits.json").read_text("utf-8"))["test"])
    )
    cells = {v["label"]: v["cells"]["ALL"] for v in ablated["variants"]}
    for variant in again["variants"]:
        assert variant["cells"]["ALL"] == cells[variant["label"]]


def test_an_ablation_resumes_from_another_directory(
    tmp_path: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    write_dataset(work / "mine.json", CASES)
    cli("split", "--dataset", "mine.json", "--ratios", "0.25,0.25,0.5", "--out", "parts.json")
    common = ("--variants", "official-per-policy", "--n-boot", "0", "-q")
    cli(
        "ablate",
        "--lm",
        "fake",
        "--dataset",
        "mine.json",
        "--split",
        "parts.json:test",
        "--out",
        "abl",
        *common,
    )
    plan = json.loads((work / "abl" / "plan.json").read_text(encoding="utf-8"))
    assert plan["data"]["dataset"] == str(work / "mine.json")
    assert plan["data"]["split"] == f"{work / 'parts.json'}:test"

    monkeypatch.chdir(tmp_path)
    resumed = cli("ablate", "--out", work / "abl", "--resume", *common)
    assert "finished earlier, not run again" in resumed.output


def test_a_run_recorded_with_its_split_as_typed_still_resumes(tmp_path: Path, dataset: Path) -> None:
    cli("split", "--dataset", dataset, "--ratios", "0.25,0.25,0.5", "--out", "splits.json")
    args = ("--dataset", dataset, "--split", "splits.json:test", "--limit", "2")
    results = evaluate("old", *args, lm="fake")
    manifest_file = results.parent / "manifest_old.json"
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    manifest["settings"]["data"]["split"] = "splits.json:test"  # as versions before resolving wrote it
    manifest_file.write_text(json.dumps(manifest), encoding="utf-8")
    evaluate("old", *args, "--resume", lm="fake")
    other = tmp_path / "other.json"
    other.write_bytes(Path("splits.json").read_bytes())
    refused = cli("eval", "--lm", "fake", "--output-dir", "runs", "--run-id", "old", "-q", "--dataset", dataset,
                  "--split", f"{other}:test", "--limit", "2", "--resume", fails=True)  # fmt: skip
    assert "--resume: run old ran with --split" in str(refused.exception)
