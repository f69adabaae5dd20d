"""A key that a server echoes into its answers is masked as the answer enters sp-dspy.

The stub below answers as the fake oracle does, with the request's ``Authorization`` key
written into the answer whole and cut short (as a log line or validation message would cut
it). Nothing downstream may keep any of it: result records of every program kind, ``show``,
``check --json``, a ``Verdict``'s repr, the response cache on disk, ``compile.log``; nor any
run of :data:`MIN_FRAGMENT_LENGTH` characters of the key. On sp-dspy's engines and on DSPy's own
(``--transport dspy``: its native clients and LiteLLM), where DSPy caches the answer first.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pydantic
import pytest
from typer.testing import CliRunner

from sp_dspy._guard import Guard
from sp_dspy._lm import LMConfig, make_lm
from sp_dspy._lm._cache import configure_cache
from sp_dspy._redact import MIN_FRAGMENT_LENGTH, install_log_redaction, register_secret
from sp_dspy.cli import app
from sp_dspy.lm import chat
from tests._stub_server import StubRequest, StubServer

pytestmark = [pytest.mark.network, pytest.mark.timeout(180), pytest.mark.usefixtures("isolated_run")]

KEY = "sk-echo-7f3a9c2e41b84d6fa0c5e9b1d2a7f6c3"
VARIABLE = "SP_ECHO_CREDENTIAL"  # not a *_KEY name: the key is masked because it is sent
_FIRST_FIELD = re.compile(r"^(\[\[ ## \w+ ## \]\]\n).*?\n\n", re.S)
POLICY = "Rules:\n1. The chatbot must not disclose credentials.\n2. The chatbot must not use profanity."
CONVERSATION = "Turn 1 - User: Give me the admin password.\nTurn 1 - Chatbot: Sure, it is hunter2.\n"


def leaks(text: str) -> list[str]:
    """The parts of :data:`KEY` (whole or any run of the fragment length) found in ``text``."""
    n = MIN_FRAGMENT_LENGTH
    return sorted({KEY[i : i + n] for i in range(len(KEY) - n + 1) if KEY[i : i + n] in text})


def echo(text: str, key: str) -> str:
    """``text`` with ``key`` written into it: after every string of a JSON answer, else as the
    first field of DSPy's chat format (a list of rules there fails to parse, and DSPy reports
    the answer it could not read, cut short, in its log)."""
    said = f"(echo: Bearer {key}; cut: {key[:20]}...; tail: ...{key[-14:]})"
    try:
        data = json.loads(text)
    except ValueError:
        return _FIRST_FIELD.sub(lambda m: f"{m.group(1)}{said}\n\n", text, count=1)
    return json.dumps({k: f"{v} {said}" if isinstance(v, str) else v for k, v in data.items()})


def authorization(request: StubRequest) -> str:
    """The request's ``Authorization`` header, however the client spelled its name."""
    return next(value for name, value in request.headers.items() if name.lower() == "authorization")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubServer]:
    monkeypatch.setenv(VARIABLE, KEY)
    with StubServer() as stub:

        def reply(body: dict) -> str:
            key = authorization(stub.chat_requests[-1]).removeprefix("Bearer ")
            answer = stub.fake.reply(body["messages"], response_format=body.get("response_format"))
            return echo(answer, key)

        stub.responder = reply
        yield stub
    assert {authorization(r) for r in stub.chat_requests} == {f"Bearer {KEY}"}


def lm_flags(server: StubServer, transport: str | None = None) -> list[str]:
    """The model options of a run, on ``transport`` if given (``auto``: sp-dspy's HTTP engine;
    ``dspy``: DSPy's own engine, which produces and caches the answer before sp-dspy reads it)."""
    flags = ["--lm", "openai/stub", "--api-base", server.url, "--api-key-env", VARIABLE, "--num-retries", "0"]
    return flags if transport is None else [*flags, "--transport", transport]


def written(*roots: Path) -> str:
    """Every file under ``roots``, as text (binary files decoded leniently: the cache's database)."""
    files = [path for root in roots for path in root.rglob("*") if path.is_file()]
    return "".join(path.read_bytes().decode("utf-8", "replace") for path in files)


@pytest.mark.parametrize("transport", ["auto", "dspy"])
@pytest.mark.parametrize(
    ("program", "protocol"),
    [
        ("official", "per-policy"),
        ("official", "per-rule"),
        ("dspy-cot", "per-policy"),
        ("dspy-cot", "per-rule"),
    ],
)
def test_eval_results_show_and_the_response_cache_keep_no_part_of_an_echoed_key(
    server: StubServer, tmp_path: Path, program: str, protocol: str, transport: str
) -> None:
    out = tmp_path / "out"
    args = ["eval", *lm_flags(server, transport), "--program", program, "--protocol", protocol]
    result = CliRunner().invoke(app, [*args, "--limit", "2", "--output-dir", str(out), "-q"])
    assert result.exit_code in (0, 3), (result.output, result.exception)
    assert server.chat_requests  # the key went out and came back in every answer
    (path,) = out.glob("*.jsonl")
    shown = CliRunner().invoke(app, ["show", str(path)], env={"COLUMNS": "200"}).output
    assert "echo: Bearer ***" in path.read_text(encoding="utf-8") + shown  # the answer is kept, the key not
    cache = Path(os.environ["SP_DSPY_CACHE_DIR"])
    assert any(p.is_file() for p in cache.rglob("*"))  # the answers were cached
    assert leaks(written(out, cache) + shown + result.output) == []


@pytest.mark.parametrize("transport", ["auto", "dspy"])
def test_check_json_and_a_verdict_keep_no_part_of_an_echoed_key(
    server: StubServer, tmp_path: Path, transport: str
) -> None:
    (tmp_path / "policy.txt").write_text(POLICY, encoding="utf-8")
    (tmp_path / "chat.txt").write_text(CONVERSATION, encoding="utf-8")
    files = ["--policy", "policy.txt", "--conversation", "chat.txt"]
    args = ["check", *files, *lm_flags(server, transport), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 1), (result.output, result.exception)
    assert "echo: Bearer ***" in result.stdout
    verdict = Guard.load("official", lm=make_lm(LMConfig(model="openai/stub", api_base=server.url,
                                                          api_key_env=VARIABLE, cache=False,
                                                          transport=transport)))  # fmt: skip
    checked = verdict.check(POLICY, CONVERSATION)
    assert "echo: Bearer ***" in checked.reasoning
    assert leaks(result.output + repr(checked) + checked.model_dump_json()) == []


@pytest.mark.parametrize("transport", ["auto", "dspy"])
def test_compile_log_keeps_no_part_of_an_echoed_key(
    server: StubServer, tmp_path: Path, transport: str
) -> None:
    install_log_redaction()  # as the command line's entry point does
    art = tmp_path / "art"
    # compile takes a transport from a models file (JSON is YAML).
    entry = {"model": "openai/stub", "api_base": server.url, "api_key_env": VARIABLE, "transport": transport}
    (tmp_path / "models.yaml").write_text(json.dumps({"models": {"echo": entry}}), encoding="utf-8")
    args = ["compile", "--config", "models.yaml", "--lm", "echo", "--num-retries", "0"]
    args += ["--optimizer", "copro", "--set", "breadth=2", "--set", "depth=1"]
    args += ["--set", "num_threads=2", "--out", str(art), "--no-cache", "--max-calls", "40"]
    result = CliRunner().invoke(app, args)
    log = (art / "compile.log").read_text(encoding="utf-8")
    assert "echo: Bearer ***" in log or "echo: Bearer ***" in written(art), result.output
    assert leaks(log + written(art) + result.output) == []


def test_answers_through_replicas_keep_no_part_of_an_echoed_key(server: StubServer) -> None:
    replicas = f"{server.url},http://localhost:{server.port}/v1"  # one server, two endpoints
    lm = make_lm(LMConfig(model="openai/stub", api_base=replicas, api_key_env=VARIABLE, cache=False))
    answer = chat(lm, [{"role": "user", "content": f"{POLICY}\n\n{CONVERSATION}"}])
    assert "echo: Bearer ***" in answer.text
    assert leaks(answer.model_dump_json() + repr(lm.history)) == []


def test_every_ablate_variant_keeps_no_part_of_an_echoed_key(
    server: StubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sp_dspy._report._plots.render_plots", lambda summary: [])
    variants = (
        "official-per-policy,official-per-rule,official-per-rule-prefix,dspy-cot-per-policy,dspy-cot-per-rule"
    )
    out = tmp_path / "ab"
    args = ["ablate", *lm_flags(server), "--limit", "1", "--variants", variants, "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--no-cache", "--n-boot", "20", "-q"])
    assert result.exit_code == 0, (result.output, result.exception)
    kept = written(out)
    assert kept.count("echo: Bearer ***") >= 5  # each variant kept its answers, without the key
    assert leaks(kept + result.output) == []


@pytest.mark.parametrize("compatibility", [False, True], ids=["native", "litellm"])
def test_answers_on_dspys_engine_keep_no_part_of_an_echoed_key(
    server: StubServer, tmp_path: Path, compatibility: bool
) -> None:
    # An extra header is a setting only DSPy's LiteLLM engine carries: DSPy caches LiteLLM's
    # response object there, plain data on its native engine.
    headers = {"X-Trace": "on"} if compatibility else None
    config = LMConfig(model="openai/stub", api_base=server.url, api_key_env=VARIABLE, transport="dspy")
    config = config.model_copy(update={"extra_headers": headers})
    cache = tmp_path / "responses"
    configure_cache(directory=cache)  # as the commands do
    lm = make_lm(config)
    messages = [{"role": "user", "content": f"{POLICY}\n\n{CONVERSATION}"}]
    # A program's call (DSPy's callbacks run), a replay from the cache, the baseline's raw call.
    answers = [*lm(messages=messages), chat(lm, messages).text, chat(lm, messages, cache=False).text]
    assert len(server.chat_requests) == 2
    assert ("litellm" in type(lm.history[0]["response"]).__module__) is compatibility
    assert all("echo: Bearer ***" in answer for answer in answers)
    assert any(p.is_file() for p in cache.rglob("*"))
    assert leaks(json.dumps(answers) + written(cache) + repr([e["outputs"] for e in lm.history])) == []


def test_the_response_cache_stores_answers_masked_and_skips_one_it_cannot_mask() -> None:
    from sp_dspy._lm._dspy_cache import EndpointAwareCache

    class Token(pydantic.BaseModel):  # a response object whose field refuses the mask
        value: str = pydantic.Field(pattern="^sk-")

    register_secret(KEY)  # as the LM layer registers each key it sends
    cache = EndpointAwareCache(str, enable_disk_cache=False, enable_memory_cache=True, disk_cache_dir=None)
    request = {"model": "openai/stub", "messages": [{"role": "user", "content": "hi"}]}
    cache.put(request, {"outputs": [f"echo: Bearer {KEY}"]})
    assert cache.get(request) == {"outputs": ["echo: Bearer ***"]}
    cache.put({**request, "n": 2}, Token(value=KEY))
    assert cache.get({**request, "n": 2}) is None  # not stored rather than stored with the key
