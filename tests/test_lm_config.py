"""Model configs, key handling, redaction and error classification (no network)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sp_dspy._errors import ConfigError
from sp_dspy._lm import LMConfig, classify_error, is_lasting, redact, resolve_model_config
from sp_dspy._lm._config import bundled_models_file, load_model_configs
from sp_dspy._lm._profiles import key_for
from sp_dspy._redact import register_secret

REPO = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_loads_entries_with_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "models:\n"
        "  gpt:\n    model: openai/gpt-5.5\n    max_tokens: 32000\n"
        "  short: anthropic/claude-opus-4-7\n"
        "  pool:\n    model: hosted_vllm/Qwen/Qwen3-8B:free\n"
        "    api_base: http://a:8000/v1, http://b:8000/v1\n    name: Qwen pool\n",
    )
    configs = load_model_configs(path)
    assert list(configs) == ["gpt", "short", "pool"]
    gpt = configs["gpt"]
    assert (gpt.name, gpt.max_tokens, gpt.timeout, gpt.num_retries, gpt.cache) == ("gpt", 32000, 120, 3, True)
    assert gpt.short_name() == "gpt-5.5" and gpt.provider == "openai"
    assert configs["short"].model == "anthropic/claude-opus-4-7"
    pool = configs["pool"]
    assert pool.api_base == "http://a:8000/v1, http://b:8000/v1"  # kept as written
    assert pool.api_bases == ["http://a:8000/v1", "http://b:8000/v1"]
    assert pool.short_name() == "Qwen3-8B_free" and pool.display_name() == "Qwen pool"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "models:\n  a:\n    model: openai/x\n  bad:\n    model: openai/y\n    temprature: 0\n",
            ":4: model 'bad': field 'temprature'",
        ),
        (
            "models:\n  bad:\n    model: openai/y\n    temperature: 7\n",
            "model 'bad': field 'temperature': must be between 0 and 2",
        ),
        ("models:\n  bad:\n    model: openai/y\n    api_base: localhost:8000\n", "field 'api_base'"),
        ("models:\n  bad:\n    model: openai/y\n    reasoning_effort: huge\n", "field 'reasoning_effort'"),
        ("models:\n  bad:\n    api_base: http://x/v1\n", "field 'model'"),
        ("models:\n  bad: [1, 2]\n", "model 'bad': expected a mapping"),
        ("gpt:\n  model: openai/x\n", "expected a mapping 'models:"),
        ("models:\n  a: {model: openai/x\n", "invalid YAML"),
    ],
)
def test_bad_entries_are_one_line_config_errors(tmp_path: Path, body: str, expected: str) -> None:
    path = write(tmp_path, body)
    with pytest.raises(ConfigError) as info:
        load_model_configs(path)
    message = str(info.value)
    assert str(path) in message and expected in message and "\n" not in message


def test_a_key_pasted_into_api_key_env_is_not_echoed(tmp_path: Path) -> None:
    path = write(tmp_path, "models:\n  m:\n    model: openai/x\n    api_key_env: sk-live-abcdef123456\n")
    with pytest.raises(ConfigError, match="api_key_env") as info:
        load_model_configs(path)
    assert "sk-live" not in str(info.value)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml: no such file$"):
        load_model_configs(tmp_path / "nope.yaml")


def test_shipped_models_file_is_valid() -> None:
    configs = load_model_configs(bundled_models_file())
    assert {"gpt-5.5", "qwen3-8b-vllm"} <= set(configs)
    providers = {c.provider for c in configs.values()}
    assert {"openai", "anthropic", "gemini", "xai", "openrouter", "hosted_vllm"} <= providers


def test_resolve_model_config() -> None:
    configs = {"gpt": LMConfig(model="openai/gpt-5.5", name="gpt")}
    assert resolve_model_config("gpt", configs) is configs["gpt"]
    assert resolve_model_config("openai/gpt-4o-mini", configs).model == "openai/gpt-4o-mini"
    assert resolve_model_config("fake").is_fake
    with pytest.raises(ConfigError, match="not a configured model name"):
        resolve_model_config("gpt-4", configs)


# ----- keys and redaction --------------------------------------------------------------------
def test_api_key_comes_from_the_environment_and_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    config = LMConfig(model="openai/x", api_key_env="SPD_TEST_CREDENTIAL", api_base="http://u:pw1234@h/v1")
    with pytest.raises(ConfigError, match="SPD_TEST_CREDENTIAL"):
        key_for(config, None)
    monkeypatch.setenv("SPD_TEST_CREDENTIAL", "opaque-value-987654")  # name has no _KEY suffix
    assert key_for(config, None) == "opaque-value-987654"
    assert redact("auth failed: opaque-value-987654") == "auth failed: ***"  # registered on read
    public = config.public_dict()
    assert public["api_key_env"] == "SPD_TEST_CREDENTIAL"
    assert "pw1234" not in str(public) and public["api_base"] == "http://***@h/v1"


def test_redact_masks_secret_env_values_and_registered_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-secret-value-42")
    monkeypatch.setenv("SOME_TOKEN", "tok-abcdefgh")
    monkeypatch.setenv("PLAIN_SETTING", "visible-value-1")
    register_secret("registered-secret-xyz")
    register_secret("ab")  # too short to be a credential: never masked
    text = "k=sk-proj-secret-value-42 t=tok-abcdefgh p=visible-value-1 r=registered-secret-xyz ab"
    assert redact(text) == "k=*** t=*** p=visible-value-1 r=*** ab"
    config = LMConfig(model="openai/gpt-5.5", api_key_env="OPENAI_API_KEY")
    assert "sk-proj" not in str(config.public_dict())


# ----- error classification ------------------------------------------------------------------
class RateLimitError(Exception):
    pass


class StatusError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status


def test_classify_error_by_name_status_and_cause() -> None:
    assert classify_error(RateLimitError("slow down")) == "rate_limit"
    assert classify_error(TimeoutError()) == "timeout"
    assert classify_error(ConnectionResetError()) == "connection"
    assert [classify_error(StatusError(s)) for s in (429, 401, 503, 404, 400)] == [
        "rate_limit",
        "auth",
        "server_error",
        "not_found",
        "bad_request",
    ]
    assert classify_error(ConnectionRefusedError()) == "unreachable"
    try:
        try:
            raise ConnectionRefusedError(111, "Connect call failed")
        except ConnectionRefusedError as inner:
            raise ConnectionError("transport") from inner
    except ConnectionError as outer:
        assert classify_error(outer) == "unreachable"  # a transport error caused by a refused connection
    try:
        try:
            raise TimeoutError("read")
        except TimeoutError as inner:
            raise ConnectionError("transport") from inner
    except ConnectionError as outer:
        assert classify_error(outer) == "timeout"  # a transport error caused by a timeout
    try:
        try:
            raise StatusError(500)
        except StatusError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert classify_error(outer) == "server_error"
    assert classify_error(ValueError("?")) == "other"
    assert is_lasting("not_found") and is_lasting("unreachable") and not is_lasting("context_length")


def test_a_bad_request_is_told_apart_by_status_and_wording_on_every_path() -> None:
    import dspy

    missing = dspy.LMInvalidRequestError("HTTP 404: no such model", model="m", status=404)
    overflow = dspy.LMInvalidRequestError("This model's maximum context length is 4096 tokens", model="m")
    assert (classify_error(missing), classify_error(overflow)) == ("not_found", "context_length")
    assert classify_error(dspy.LMInvalidRequestError("Unrecognized argument", model="m")) == "bad_request"


def test_importing_the_lm_layer_does_not_import_dspy() -> None:
    code = "import sys, sp_dspy._lm; print(any(m.split('.')[0] in ('dspy', 'litellm') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False"


def test_a_model_defined_twice_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "models:\n  a: openai/x\n  b:\n    model: openai/y\n  a:\n    model: openai/z\n")
    with pytest.raises(ConfigError) as info:
        load_model_configs(path)
    assert str(info.value) == f"{path}:5: model 'a' is defined twice (first on line 2)"
