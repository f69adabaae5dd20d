"""Bad inputs through the command line: one ``error:`` line naming where and what, exit 2.

Each case here used to end in a traceback, hang, or quietly give a result it should
not (a table of zeros, ``true`` read as rule 1). In-process runs check the error's
type and its one line; the console-script runs check what a user sees: exactly one
``error: ...`` line on stderr and exit status 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from sp_dspy import load_benchmark, make_split
from sp_dspy._errors import ConfigError, DataError, OutputError, SpDspyError
from sp_dspy.cli import app, main
from tests._factories import raw_case, write_dataset

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("isolated_run")]

DEEP = "[" * 5000 + "]" * 5000


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(arg) for arg in args])


def refused(result: Result, kind: type[SpDspyError], message: str) -> None:
    """The command stopped with ``kind`` and exactly ``message`` (one line)."""
    assert isinstance(result.exception, kind), (result.output, result.exception)
    assert str(result.exception) == message


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_dataset(
        tmp_path / "bench.json", [raw_case("a-1-l0"), raw_case("a-1-l1", level="L1", domain="fraud")]
    )


@pytest.fixture
def predictions(tmp_path: Path) -> Path:
    path = tmp_path / "preds.jsonl"
    path.write_text(json.dumps({"id": "a-1-l0", "violated_rules": [1]}) + "\n", encoding="utf-8")
    return path


def _bad_dataset(tmp_path: Path, mutate: Callable[[dict[str, object]], object]) -> Path:
    case = raw_case("bad-1-l0")
    mutate(case)
    return write_dataset(tmp_path / "bad.json", [case])


@pytest.mark.parametrize(
    ("mutate", "what"),
    [
        (
            lambda c: c.update(policy=str(c["policy"]) + "\n2. Rule two again."),
            "field policy: rule number(s) [2]",
        ),
        (
            lambda c: c["rubric"]["non_violations"].append(c["rubric"]["non_violations"][0]),  # type: ignore[index]
            "field rubric: rule(s) [2] listed more than once",
        ),
        (
            lambda c: c.update(ground_truth_violations=[True]),
            "field ground_truth_violations.0: expected a rule number, got the boolean true",
        ),
        (lambda c: c.update(id="bad-\ud800-l0"), "field id: unpaired surrogate \\ud800 at character 4"),
        (lambda c: c.update(domain="\udfff"), "field domain: unpaired surrogate \\udfff at character 0"),
    ],
)
@pytest.mark.parametrize("command", ["score", "eval"])
def test_a_malformed_case_is_refused_by_every_command(
    tmp_path: Path, predictions: Path, mutate: Callable[[dict[str, object]], object], what: str, command: str
) -> None:
    path = _bad_dataset(tmp_path, mutate)
    if command == "score":
        result = invoke("score", predictions, "--dataset", path)
    else:
        result = invoke("eval", "--lm", "fake", "-q", "--dataset", path, "--output-dir", tmp_path / "out")
    assert isinstance(result.exception, DataError), (result.output, result.exception)
    message = str(result.exception)
    assert message.startswith(f"{path}:") and what in message and "\n" not in message
    message.encode("utf-8")  # printable, a surrogate in an id included


def test_bytes_that_are_not_utf8_name_the_line(tmp_path: Path, predictions: Path) -> None:
    path = write_dataset(tmp_path / "latin.json", [raw_case("a-1-l0")])
    path.write_bytes(path.read_bytes().replace(b"Dana lives", b"Dana \xe9 lives"))
    line = next(i for i, text in enumerate(path.read_bytes().split(b"\n"), 1) if b"\xe9" in text)
    column = path.read_bytes().split(b"\n")[line - 1].index(b"\xe9") + 1
    expected = f"{path}:{line}:{column}: not UTF-8 (byte 0xe9); save the file as UTF-8"
    refused(invoke("score", predictions, "--dataset", path), DataError, expected)
    refused(invoke("eval", "--lm", "fake", "-q", "--dataset", path), DataError, expected)


def test_json_nested_too_deeply_is_one_line(tmp_path: Path, dataset: Path, predictions: Path) -> None:
    deep_data = tmp_path / "deep.json"
    deep_data.write_text('{"data": [\n' + DEEP + "\n]}", encoding="utf-8")
    preds = tmp_path / "deep.jsonl"
    preds.write_text(json.dumps({"id": "a-1-l0"}) + "\n" + '{"id": "a-1-l1", "x": ' + DEEP + "}\n")
    refused(
        invoke("score", predictions, "--dataset", deep_data),
        DataError,
        f"{deep_data}:2: invalid JSON: arrays and objects nested more than 500 levels deep",
    )
    refused(
        invoke("score", preds, "--dataset", dataset),
        DataError,
        f"{preds}:2: invalid JSON: arrays and objects nested too deeply",
    )


def test_an_empty_prediction_file_is_an_error_for_score(tmp_path: Path, dataset: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    refused(
        invoke("score", empty, "--dataset", dataset),
        DataError,
        f"{empty}: empty result file (no records to score)",
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--domain", "privcy"], "--domain: no case in domain privcy (the dataset has: fraud, privacy)"),
        (["--level", "L2"], "--level: no case at level L2 (the dataset has: L0, L1)"),
        (["--level", "L1", "--domain", "privacy"], "--level L1 --domain privacy: no case has both"),
        (["--start-idx", "2"], "--start-idx 2: only 2 case(s) selected, so it must be below 2"),
    ],
)
def test_a_selection_of_no_case_is_refused(
    tmp_path: Path, dataset: Path, predictions: Path, flags: list[str], message: str
) -> None:
    out = tmp_path / "out"
    refused(
        invoke("eval", "--lm", "fake", "-q", "--dataset", dataset, "--output-dir", out, *flags),
        DataError,
        message,
    )
    assert not out.exists() or not any(out.iterdir())  # refused before any record
    if "--start-idx" not in flags:  # score selects by level and domain only
        refused(invoke("score", predictions, "--dataset", dataset, *flags), DataError, message)


def test_a_split_of_another_dataset_is_refused(tmp_path: Path, dataset: Path) -> None:
    loaded = load_benchmark(str(dataset))
    split_file = tmp_path / "split.json"
    make_split(loaded.cases, seed=0, ratios=(0.5, 0.0, 0.5), dataset_hash="0" * 64).save(split_file)
    result = invoke("eval", "--lm", "fake", "-q", "--dataset", dataset, "--split", f"{split_file}:test")
    refused(
        result,
        DataError,
        f"{split_file}: field dataset_hash: 000000000000 is not the hash of the dataset "
        f"({loaded.content_hash[:12]}); the split was made for other data: pass the --benchmark and --dataset "
        "it was made on",
    )
    make_split(loaded.cases, seed=0, ratios=(0.5, 0.0, 0.5), dataset_hash=loaded.content_hash).save(
        split_file
    )
    ok = invoke("eval", "--lm", "fake", "-q", "--dataset", dataset, "--split", f"{split_file}:test")
    assert ok.exit_code == 0, (ok.output, ok.exception)


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (
            lambda p: p.write_text("data:\n  - L1\n"),
            "{p}: field data: expected a mapping of data settings, got list",
        ),
        (
            lambda p: p.write_text("data: L1\n"),
            "{p}: field data: expected a mapping of data settings, got str",
        ),
        (lambda p: p.mkdir(), "{p}: run config is a directory, not a regular file"),
        (lambda p: p.write_text("data: " + DEEP), "{p}: invalid YAML: nested too deeply"),
        (
            lambda p: p.write_bytes(b"program: official\nrun_id: caf\xe9\n"),
            "{p}:2:12: not UTF-8 (byte 0xe9); save the file as UTF-8",
        ),
    ],
)
def test_a_bad_run_config_is_one_line(tmp_path: Path, write: Callable[[Path], object], message: str) -> None:
    path = tmp_path / "run.yaml"
    write(path)
    refused(invoke("eval", "--lm", "fake", "-q", "--run-config", path), ConfigError, message.format(p=path))


def test_a_model_defined_twice_in_models_yaml_is_refused(tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text("models:\n  mini: openai/gpt-5-mini\n  mini: openai/gpt-5.5\n", encoding="utf-8")
    refused(
        invoke("list-models", "--config", models),
        ConfigError,
        f"{models}:3: model 'mini' is defined twice (first on line 2)",
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda p: p.symlink_to("/dev/zero"),
            "{p}: artifact program state is a device or socket, not a regular file",
        ),
        (lambda p: os.mkfifo(p), "{p}: artifact program state is a FIFO, not a regular file"),
        (
            lambda p: p.write_text(DEEP),
            "{p}:1: invalid JSON: arrays and objects nested more than 500 levels deep",
        ),
    ],
)
def test_a_program_json_that_is_not_a_bounded_json_file_is_refused(
    tmp_path: Path, make: Callable[[Path], object], message: str
) -> None:
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / "manifest.json").write_text(json.dumps({"program": "dspy", "protocol": "per-policy"}))
    state = artifact / "program.json"
    make(state)
    (tmp_path / "policy.txt").write_text("Rules:\n1. The chatbot must not swear.\n", encoding="utf-8")
    (tmp_path / "chat.txt").write_text("Turn 1 - User: hi\nTurn 1 - Chatbot: hello\n", encoding="utf-8")
    for command in (
        ["eval", "--lm", "fake", "-q", "--program", artifact],
        [
            "check",
            "--lm",
            "fake",
            "--program",
            artifact,
            "--policy",
            "policy.txt",
            "--conversation",
            "chat.txt",
        ],
    ):
        refused(invoke(*command), DataError, message.format(p=state))


@pytest.mark.parametrize("case", ["deep dataset", "surrogate id", "deep program.json"])
def test_the_console_script_prints_one_error_line_and_exits_2(tmp_path: Path, case: str) -> None:
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"id": "a-1-l0"}) + "\n", encoding="utf-8")
    data = tmp_path / "data.json"
    if case == "deep dataset":
        data.write_text(DEEP, encoding="utf-8")
        args: list[str | Path] = ["score", preds, "--dataset", data]
    elif case == "surrogate id":
        data.write_text(json.dumps({"data": [raw_case("x-\ud800-l0")]}), encoding="utf-8")
        args = ["score", preds, "--dataset", data]
    else:
        artifact = tmp_path / "artifact"
        artifact.mkdir()
        (artifact / "manifest.json").write_text(json.dumps({"program": "dspy", "protocol": "per-policy"}))
        (artifact / "program.json").write_text(DEEP, encoding="utf-8")
        args = ["eval", "--lm", "fake", "-q", "--program", artifact, "--limit", "1"]
    command = [sys.executable, "-c", "from sp_dspy.cli import main; main()", *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr


def test_a_usage_error_never_echoes_a_key(tmp_path: Path) -> None:
    """A key pasted as a stray argument is masked in the usage error, as in every other line."""
    key = "sk-test-0123456789abcdef0123"
    command = [
        sys.executable,
        "-c",
        "from sp_dspy.cli import main; main()",
        "split",
        key,
    ]
    env = {**os.environ, "OPENAI_API_KEY": key}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    assert "unexpected extra argument" in done.stderr and key not in done.stderr


def test_split_out_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("", encoding="utf-8")
    result = CliRunner().invoke(app, ["split", "--out", str(taken / "splits.json")])
    assert isinstance(result.exception, OutputError), result.output
    assert str(result.exception).startswith(f"{taken / 'splits.json'}: cannot write the split (")


def _fifo_inputs(tmp_path: Path) -> dict[str, tuple[list[str | Path], Path]]:
    """Each input the tool reads, made a FIFO: the command, and the FIFO it must refuse."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "policy.txt").write_text("Rules:\n1. The chatbot must not swear.\n", encoding="utf-8")
    (tmp_path / "chat.txt").write_text("Turn 1 - User: hi\nTurn 1 - Chatbot: hello\n", encoding="utf-8")
    run = tmp_path / "run"
    assert (
        invoke("eval", "--lm", "fake", "-q", "--limit", "1", "--run-id", "r1", "--output-dir", run).exit_code
        == 0
    )
    (run / "manifest_r1.json").unlink()
    os.mkfifo(run / "manifest_r1.json")
    ablation = tmp_path / "ablation"
    ablation.mkdir()
    os.mkfifo(ablation / "plan.json")
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    os.mkfifo(resumed / "results_r2_fake.jsonl")
    check = ["check", "--lm", "fake"]
    return {
        "--dataset": (["eval", "--lm", "fake", "-q", "--dataset", fifo], fifo),
        "custom --dataset": (
            ["eval", "--lm", "fake", "-q", "--benchmark", "custom", "--dataset", fifo],
            fifo,
        ),
        "score's results": (["score", fifo], fifo),
        "check --policy": ([*check, "--policy", fifo, "--conversation", "chat.txt"], fifo),
        "check --conversation": ([*check, "--policy", "policy.txt", "--conversation", fifo], fifo),
        "check --batch": ([*check, "--batch", fifo], fifo),
        "a run's manifest": (["score", run / "results_r1_fake.jsonl"], run / "manifest_r1.json"),
        "plan.json": (
            ["ablate", "--lm", "fake", "-q", "--out", ablation, "--resume"],
            ablation / "plan.json",
        ),
        "a results file found by --resume": (
            ["eval", "--lm", "fake", "-q", "--output-dir", resumed, "--resume"],
            resumed / "results_r2_fake.jsonl",
        ),
    }


@pytest.mark.parametrize(
    "which",
    [
        "--dataset",
        "custom --dataset",
        "score's results",
        "check --policy",
        "check --conversation",
        "check --batch",
        "a run's manifest",
        "plan.json",
        "a results file found by --resume",
    ],
)
def test_a_fifo_as_any_input_is_one_line_at_once(tmp_path: Path, which: str) -> None:
    args, fifo = _fifo_inputs(tmp_path)[which]
    command = [sys.executable, "-c", "from sp_dspy.cli import main; main()", *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=tmp_path)  # a hang fails
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert (
        len(lines) == 1
        and lines[0].startswith(f"error: {fifo}: ")
        and "is a FIFO, not a regular file" in lines[0]
    )


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_dev_zero_as_the_dataset_is_one_line(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "from sp_dspy.cli import main; main()", "eval", "--lm", "fake", "-q"]
    done = subprocess.run(
        [*command, "--dataset", "/dev/zero"], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "error: /dev/zero: dataset is a device or socket, not a regular file"


def _custom_line(
    policy: str = "Rules:\n1. Be polite.\n2. Never swear.", violated: tuple[int, ...] = (2,)
) -> str:
    """One case of a custom JSONL dataset."""
    conversation = "Turn 1 - User: hi\nTurn 1 - Chatbot: damn you"
    row = {"id": "c-1", "policy": policy, "conversation": conversation, "violated_rules": list(violated)}
    return json.dumps(row) + "\n"


def _artifact(root: Path, *, state: dict[str, object] | None = None, kind: str | None = None) -> Path:
    """An artifact directory as ``compile`` writes it, with ``state`` keys added to its program.json."""
    from sp_dspy.programs import make_program

    out = root / "artifact"
    out.mkdir()
    make_program("dspy", "per-policy").save(str(out / "program.json"))
    saved = json.loads((out / "program.json").read_text(encoding="utf-8"))
    (out / "program.json").write_text(json.dumps({**saved, **(state or {})}), encoding="utf-8")
    manifest = {"program": "dspy", "protocol": "per-policy", **({"kind": kind} if kind else {})}
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return out


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _empty_split(tmp: Path) -> list[str]:
    loaded = load_benchmark()
    split = make_split(loaded.cases, seed=0, ratios=(1.0, 0.0, 0.0), dataset_hash=loaded.content_hash)
    split.save(tmp / "split.json")
    return ["eval", "--lm", "fake", "--split", "split.json:dev"]


EVAL = ["eval", "--lm", "fake", "-q"]
#: (argv from a scratch directory, what the one line says): each was accepted silently, or ended
#: in a usage box, before.
REFUSED: list[tuple[str, Callable[[Path], list[str]], str]] = [
    (
        "empty dataset",
        lambda t: [*EVAL, "--dataset", str(_write(t / "d.json", '{"data": []}'))],
        "d.json: no cases (the file's list of cases is empty)",
    ),
    (
        "empty dataset, score",
        lambda t: [
            "score",
            str(_write(t / "p.jsonl", '{"id": "x"}\n')),
            "--dataset",
            str(_write(t / "d.json", "[]")),
        ],
        "d.json: no cases (the file's list of cases is empty)",
    ),
    (
        "empty PKU file",
        lambda t: [*EVAL, "--benchmark", "pku-saferlhf", "--dataset", str(_write(t / "pku.jsonl", "\n"))],
        "pku.jsonl: no rows (expected one PKU-SafeRLHF JSON object per line)",
    ),
    ("empty split part", _empty_split, "--split split.json:dev: the dev part is empty"),
    ("--limit 0", lambda t: [*EVAL, "--limit", "0"], "--limit: Input should be greater than or equal to 1"),
    ("--limit -1", lambda t: [*EVAL, "--limit", "-1"], "--limit: Input should be greater than or equal to 1"),
    (
        "--concurrency 0",
        lambda t: [*EVAL, "--concurrency", "0"],
        "--concurrency: Input should be greater than or equal to 1",
    ),
    (
        "--concurrency -1",
        lambda t: [*EVAL, "--concurrency", "-1"],
        "--concurrency: Input should be greater than or equal to 1",
    ),
    (
        "--models ,,",
        lambda t: ["eval", "--models", ",,", "--dry-run"],
        "--models ',,': no model name (give comma-separated configured names)",
    ),
    (
        "--lm ''",
        lambda t: ["eval", "--lm", "", "--dry-run"],
        "--lm '': empty model name (give a model string or a configured name)",
    ),
    (
        "empty run config",
        lambda t: [*EVAL, "--run-config", str(_write(t / "run.yaml", "# nothing yet\n"))],
        "run.yaml: empty run config (it sets nothing)",
    ),
    (
        "empty ablation plan",
        lambda t: ["ablate", "--lm", "fake", "--plan", str(_write(t / "plan.yaml", "{}\n")), "--out", "abl"],
        "plan.yaml: empty ablation plan (it sets nothing)",
    ),
    (
        "--optimizer-config without the optimizer",
        lambda t: [
            "compile",
            "--lm",
            "fake",
            "--optimizer",
            "bootstrap",
            "--out",
            "art",
            "--dry-run",
            "--optimizer-config",
            str(_write(t / "opt.yaml", "gepa:\n  auto: light\n")),
        ],
        "opt.yaml: no section for optimizer 'bootstrap' (the file has: gepa)",
    ),
    (
        "artifact with an extra predictor",
        lambda t: [*EVAL, "--program", str(_artifact(t, state={"judge.predict": {}}))],
        "program.json: predictor 'judge.predict' is not one of a dspy per-policy program (it has 'predict')",
    ),
    (
        "artifact with a foreign manifest kind",
        lambda t: [*EVAL, "--program", str(_artifact(t, kind="sp-dspy-run"))],
        "manifest.json: field 'kind' is 'sp-dspy-run', expected 'sp-dspy-compiled-guard' (not an artifact)",
    ),
    (
        "custom violated_rules listing a rule twice",
        lambda t: [
            *EVAL,
            "--benchmark",
            "custom",
            "--dataset",
            str(_write(t / "c.jsonl", _custom_line(violated=(2, 2)))),
        ],
        "c.jsonl:1: case c-1: violated_rules: rule(s) [2] listed more than once",
    ),
    (
        "custom policy with a rule 0",
        lambda t: [
            *EVAL,
            "--benchmark",
            "custom",
            "--dataset",
            str(_write(t / "c.jsonl", _custom_line("Rules:\n0. Be polite.\n1. Never swear.", (1,)))),
        ],
        "c.jsonl:1: case c-1: policy line 2: rule 0: rules are numbered from 1",
    ),
    (
        "dataset rubric with a rule 0",
        lambda t: [
            *EVAL,
            "--dataset",
            str(write_dataset(t / "d.json", [raw_case("z-1-l0", rules={0: "Zero.", 1: "One."}, gt=[1])])),
        ],
        "field rubric.non_violations.0.rule: rule 0: rules are numbered from 1",
    ),
    (
        "judgment verdict 'yes'",
        lambda t: [
            "score",
            str(_judgments(t, pred="yes")),
        ],
        "j.jsonl:1: record demo-001-l0: field pred: expected true (violated), false (not violated) or null, got 'yes'",
    ),
    (
        "judgment verdict 1",
        lambda t: [
            "score",
            str(_judgments(t, gt=1)),
        ],
        "field gt: expected true (violated), false (not violated) or null, got 1",
    ),
    (
        "--run-id ''",
        lambda t: [*EVAL, "--run-id", ""],
        "--run-id: '' is not a run id: use letters, digits, '.', '_' and '-', starting with a letter or digit",
    ),
    (
        "--run-id ..",
        lambda t: [*EVAL, "--run-id", ".."],
        "--run-id: '..' is not a run id: use letters, digits, '.', '_' and '-', starting with a letter or digit",
    ),
    (
        "ablate --run-id ..",
        lambda t: ["ablate", "--lm", "fake", "--run-id", "..", "--out", "abl"],
        "field run_id: '..' is not a run id",
    ),
    (
        "results path is a directory",
        lambda t: ["score", str(_dir(t / "runs"))],
        "runs: a directory, not a result file (name the results_*.jsonl in it)",
    ),
    (
        "results path is a directory, compare",
        lambda t: ["compare", str(_dir(t / "runs")), str(_dir(t / "runs"))],
        "runs: a directory, not a result file",
    ),
    (
        "results path is a directory, report",
        lambda t: ["report", str(_dir(t / "runs"))],
        "runs: a directory, not a result file",
    ),
]


def _judgments(tmp: Path, **fields: object) -> Path:
    """A result file of one per-rule judgment of the sample's first case, with ``fields``."""
    line = {"kind": "judgment", "cid": "demo-001-l0", "rule": 1, **fields}
    return _write(tmp / "j.jsonl", json.dumps(line) + "\n")


def _dir(path: Path) -> Path:
    path.mkdir(exist_ok=True)
    return path


@pytest.mark.parametrize(("make", "says"), [row[1:] for row in REFUSED], ids=[row[0] for row in REFUSED])
def test_each_bad_input_is_one_error_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Callable[[Path], list[str]], says: str
) -> None:
    """What the console script prints: exactly one ``error:`` line naming the flag, file or field."""
    argv = make(tmp_path)
    saved = sys.argv
    sys.argv = ["sp-dspy", *argv]
    try:
        with pytest.raises(SystemExit) as exit_info:
            main()
    finally:
        sys.argv = saved
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert exit_info.value.code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], err
    assert not (tmp_path / "output").exists()  # refused before any result was written
