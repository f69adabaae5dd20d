"""The leaderboard presets send what the SafePyramid reference harness sends, on every wire.

Each preset of ``configs/models.yaml`` is pointed at a recording loopback server
(``StubServer`` answers OpenAI chat completions and Anthropic messages) and run on
the bundled sample, per-policy and per-rule; the recorded path, headers and body
fields must be the reference's (measured from the harness; keys aside).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sp_dspy._errors import ConfigError
from sp_dspy._executor import run_eval
from sp_dspy._lm import LMConfig, classify_error, import_dspy, make_lm
from sp_dspy._lm._compat import missing_uses
from sp_dspy._lm._config import load_model_configs
from sp_dspy._lm._direct import client_of
from sp_dspy._redact import MASK, redact
from sp_dspy._runner import DataSelection, EvalConfig
from sp_dspy.cli import app
from tests._stub_server import StubServer

pytestmark = [pytest.mark.usefixtures("isolated_run"), pytest.mark.network, pytest.mark.timeout(120)]

MODELS_FILE = Path(__file__).resolve().parents[1] / "sp_dspy" / "configs" / "models.yaml"
KEYS = {
    "OPENAI_API_KEY": "sk-openai-test-000001",
    "ANTHROPIC_API_KEY": "sk-ant-test-000002",
    "GEMINI_API_KEY": "gemini-test-000003",
    "XAI_API_KEY": "xai-test-000004",
    "OPENROUTER_API_KEY": "sk-or-test-000005",
}
# preset -> (path, body fields besides model/messages/system, headers that must be there)
REFERENCE: dict[str, tuple[str, dict[str, Any], dict[str, str]]] = {
    "gpt-5.5": (
        "/v1/chat/completions",
        {"max_completion_tokens": 65536, "reasoning_effort": "high"},
        {"Authorization": "Bearer sk-openai-test-000001"},
    ),
    "claude-opus-4.7": (
        "/v1/messages",
        {"max_tokens": 32768, "thinking": {"type": "adaptive"}},
        {"x-api-key": "sk-ant-test-000002", "anthropic-version": "2023-06-01"},
    ),
    "gemini-3.5-flash": (
        "/v1/chat/completions",
        {"reasoning_effort": "high"},
        {"Authorization": "Bearer gemini-test-000003"},
    ),
    "gpt-oss-safeguard-120b": (
        "/v1/chat/completions",
        {"max_tokens": 32768, "reasoning": {"effort": "high"}},
        {"Authorization": "Bearer sk-or-test-000005", "X-OpenRouter-Title": "SafePyramid Evaluation"},
    ),
    "grok-4.3": ("/v1/chat/completions", {}, {"Authorization": "Bearer xai-test-000004"}),
}
LITELLM_HEADERS = ("HTTP-Referer", "X-Title")


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)


def preset(name: str, server: StubServer, base_suffix: str = "/v1") -> LMConfig:
    config = load_model_configs(MODELS_FILE)[name]
    base = f"http://127.0.0.1:{server.port}{base_suffix}"
    return config.model_copy(update={"api_base": base, "cache": False})


@pytest.mark.parametrize("protocol", ["per-policy", "per-rule"])
@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_a_preset_sends_the_reference_request(name: str, protocol: str, keys: None, tmp_path: Path) -> None:
    path, fields, headers = REFERENCE[name]
    with StubServer() as server:
        settings = EvalConfig(output_dir=tmp_path, run_id="p", protocol=protocol, data=DataSelection(limit=1))
        outcome = run_eval(settings, preset(name, server), show_progress=False)
        requests = server.chat_requests
    assert outcome.report is not None and requests
    config = load_model_configs(MODELS_FILE)[name]
    for request in requests:
        body = request.body or {}
        assert request.path == path
        wire = {"model", "messages", "system"} if path == "/v1/messages" else {"model", "messages"}
        assert {k: v for k, v in body.items() if k not in wire} == fields
        assert body["model"] == config.model.split("/", 1)[1]
        assert all(request.headers.get(k) == v for k, v in headers.items()), request.headers
        assert not any(h in request.headers for h in LITELLM_HEADERS)
        if path == "/v1/messages":  # the system prompt is a top-level string, not a message
            assert isinstance(body["system"], str) and body["system"]
            assert all(m["role"] != "system" for m in body["messages"])


@pytest.mark.parametrize("suffix", ["", "/v1", "/v1/"])
def test_an_anthropic_base_is_accepted_with_or_without_v1(suffix: str, keys: None) -> None:
    with StubServer() as server:
        lm = make_lm(preset("claude-opus-4.7", server, suffix))
        answer = lm("Is rule 1 violated?")
        (request,) = server.chat_requests
    assert request.path == "/v1/messages" and answer


def test_show_request_prints_the_request_a_run_sends_and_sends_nothing(keys: None, tmp_path: Path) -> None:
    with StubServer() as server:
        base = f"http://127.0.0.1:{server.port}/v1"
        args = ["eval", "--config", str(MODELS_FILE), "--lm", "gpt-oss-safeguard-120b", "--api-base", base]
        shown = CliRunner().invoke(app, [*args, "--show-request", "--limit", "1"])
        assert shown.exit_code == 0, shown.output
        assert server.requests == []  # nothing sent
        run = CliRunner().invoke(
            app, [*args, "--limit", "1", "--no-cache", "-q", "--output-dir", str(tmp_path)]
        )
        assert run.exit_code == 0, run.output
        sent = server.chat_requests[0]
    printed = json.loads(shown.stdout)
    assert printed["url"] == base + "/chat/completions" and printed["method"] == "POST"
    assert printed["body"] == sent.body
    assert printed["headers"]["Authorization"] == "Bearer ***"
    assert printed["headers"]["X-OpenRouter-Title"] == "SafePyramid Evaluation"
    assert KEYS["OPENROUTER_API_KEY"] not in shown.stdout


def test_show_request_refuses_an_lm_it_does_not_build_requests_for() -> None:
    result = CliRunner().invoke(app, ["eval", "--lm", "fake", "--show-request"])
    assert isinstance(result.exception, ConfigError)  # the CLI's main prints it and exits 2
    assert "--show-request: model 'fake' does not go through sp-dspy's HTTP engine" in str(result.exception)


def test_a_provider_with_api_base_uses_its_usual_key_variable(keys: None) -> None:
    with StubServer() as server:
        lm = make_lm(LMConfig(model="anthropic/claude-opus-4-7", api_base=server.url, cache=False))
        lm("hello")
        (request,) = server.chat_requests
    assert request.headers["x-api-key"] == KEYS["ANTHROPIC_API_KEY"]


@pytest.mark.parametrize(
    ("model", "api_base", "variable"),
    [
        ("anthropic/claude-opus-4-7", "http://127.0.0.1:9/v1", "ANTHROPIC_API_KEY"),
        ("openrouter/openai/gpt-oss-safeguard-120b", None, "OPENROUTER_API_KEY"),
        ("openai/gpt-5.5", "https://gateway.example/v1", "OPENAI_API_KEY"),
        ("gemini/gemini-3.5-flash", None, "GEMINI_API_KEY"),
    ],
)
def test_a_hosted_provider_without_its_key_stops_before_any_call(
    model: str, api_base: str | None, variable: str
) -> None:
    with pytest.raises(ConfigError, match=f"no API key: set {variable} "):
        make_lm(LMConfig(model=model, api_base=api_base))


def test_a_missing_key_ends_the_cli_run_with_one_line_before_any_request(tmp_path: Path) -> None:
    with StubServer() as server:
        result = CliRunner().invoke(
            app, ["eval", "--lm", "anthropic/claude-opus-4-7", "--api-base", server.url, "-q",
                  "--output-dir", str(tmp_path)],
        )  # fmt: skip
        assert server.requests == []
    assert isinstance(result.exception, ConfigError)  # the CLI's main prints it and exits 2
    assert str(result.exception) == (
        "model 'claude-opus-4-7': no API key: set ANTHROPIC_API_KEY "
        "(or name the variable holding the key with --api-key-env)"
    )


def test_only_self_hosted_servers_get_the_placeholder_key() -> None:
    with StubServer() as server:
        for model in ("hosted_vllm/stub", "openai/stub"):  # openai/ at a loopback address: your server
            make_lm(LMConfig(model=model, api_base=server.url, cache=False))("hi")
        assert [r.headers["Authorization"] for r in server.chat_requests] == ["Bearer EMPTY"] * 2


def test_openai_at_your_own_server_sends_the_key_that_is_set_and_masks_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "sk-own-server-5b1e9d0c7a42f8e3"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with StubServer() as server:
        make_lm(LMConfig(model="openai/stub", api_base=server.url, cache=False))("hi")
        (request,) = server.chat_requests
    assert request.headers["Authorization"] == f"Bearer {key}"
    # Registered as a key sent: masked whole, and also cut short (not only as an environment value).
    assert redact(f"echo {key}, cut {key[:16]}...") == f"echo {MASK}, cut {MASK}..."


def test_an_endpoint_with_url_credentials_is_refused_masked_before_anything_is_sent(tmp_path: Path) -> None:
    """The key's Authorization header and ``user:password@`` (aiohttp's Basic auth) cannot both be sent:
    one line, the credentials masked, nothing sent, also for ``--show-request``."""
    with StubServer() as server:
        port = server.port
        base = f"http://probe:url-secret-4c9e1a7b@127.0.0.1:{port}/v1"
        for extra in (["--show-request"], ["--limit", "1", "--output-dir", str(tmp_path)]):
            shown = CliRunner().invoke(app, ["eval", "--lm", "openai/stub", "--api-base", base, *extra])
            assert isinstance(shown.exception, ConfigError)  # the CLI's main prints it and exits 2
            assert f"endpoint http://***@127.0.0.1:{port}/v1 carries credentials" in str(shown.exception)
            assert "url-secret" not in str(shown.exception) + shown.output
        assert server.requests == []
    assert redact("echoed url-secret-4c9e1a7b") == f"echoed {MASK}"  # the password is a key sent too


@pytest.mark.parametrize(
    ("settings", "body"),
    [
        ({"model": "openai/gpt-5.5", "max_tokens": 20000}, {"max_completion_tokens": 20000}),
        (
            {"model": "openai/gpt-5.5", "max_tokens": 20000, "transport": "dspy"},
            {"max_completion_tokens": 20000},
        ),
        ({"model": "openai/gpt-4.1", "max_tokens": 512}, {"max_tokens": 512}),
        ({"model": "hosted_vllm/stub", "max_tokens": 512}, {"max_tokens": 512}),
    ],
)
def test_the_output_cap_field_follows_the_provider_profile_on_every_path(
    settings: dict[str, Any], body: dict[str, Any], keys: None
) -> None:
    with StubServer() as server:
        config = LMConfig.model_validate({**settings, "api_base": server.url, "cache": False})
        make_lm(config)("hi")
        (request,) = server.chat_requests
    sent = request.body or {}
    assert {k: sent[k] for k in ("max_tokens", "max_completion_tokens") if k in sent} == body


@pytest.mark.parametrize("transport", ["auto", "dspy"])
@pytest.mark.parametrize("model", ["openai/stub", "anthropic/claude-opus-4-7"])
def test_a_context_overflow_is_context_length_on_every_path(model: str, transport: str, keys: None) -> None:
    dspy = import_dspy()
    with StubServer(fail_plan=["400"]) as server:
        config = LMConfig(model=model, api_base=server.url, transport=transport, num_retries=0, cache=False)  # type: ignore[arg-type]
        with pytest.raises(dspy.LMError) as caught:
            make_lm(config)("hi")
    assert classify_error(caught.value) == "context_length"


def test_every_dspy_internal_sp_dspy_uses_is_there() -> None:
    assert missing_uses() == []


def test_a_missing_dspy_internal_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from dspy.clients import model_metadata

    monkeypatch.delattr(model_metadata, "rate")
    assert missing_uses() == ["price_table: dspy.clients.model_metadata.rate"]


def test_the_engine_is_the_lms_own_and_copies_share_it(keys: None) -> None:
    import copy

    with StubServer() as server:
        lm = make_lm(LMConfig(model="openai/stub", api_base=server.url))
    assert client_of(copy.deepcopy(lm)) is client_of(lm) is not None


def test_dspy_programs_on_two_servers_of_one_model_name_do_not_share_cached_answers(tmp_path: Path) -> None:
    from sp_dspy._lm import configure_cache

    dspy = import_dspy()
    configure_cache(enabled=True, directory=tmp_path / "responses")
    with StubServer(behaviour="empty") as first, StubServer(behaviour="all") as second:
        for server in (first, second, first):
            lm = make_lm(LMConfig(model="hosted_vllm/stub", api_base=server.url))
            with dspy.context(lm=lm):
                dspy.Predict("question -> answer")(question="same question")
        assert (len(first.chat_requests), len(second.chat_requests)) == (1, 1)  # the rerun was cached
        assert "sp_endpoint_group" not in json.dumps(second.chat_requests[0].body)


def test_list_models_shows_the_settings_a_preset_sends() -> None:
    result = CliRunner().invoke(app, ["list-models", "--config", str(MODELS_FILE)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "thinking={'type': 'adaptive'}" in text
    assert "extra_headers={'X-OpenRouter-Title': 'SafePyramid Evaluation'}" in text


def test_a_provider_without_a_profile_is_never_given_the_placeholder_key() -> None:
    lm = make_lm(LMConfig(model="together_ai/some-model", api_base="https://api.together.example/v1"))
    assert "api_key" not in lm.kwargs  # LiteLLM reads the provider's own variable
