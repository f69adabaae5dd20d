"""``sp-dspy serve``: run a local OpenAI-compatible model server, or a guard service, in the foreground.

Other commands reach a model server with ``--lm local`` (llama.cpp) or ``--lm openai/<name> --api-base
<url>``. With ``--guard`` the command serves a guard over HTTP instead (``sp_dspy._guard_service``):
one command, two things to serve, each refusing the other's flags with one line.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .._errors import ConfigError
from .._guard_service import DEFAULT_GUARD_PORT, ServiceLimits, build_guard_service_config
from .._interrupt import interrupted_exit_code
from .._lm import configure_cache, redact
from .._serve import DEFAULT_N_CTX, Backend, ServeState, build_model_server_config, serve_model, state_path
from . import _lm_options as lmo
from . import _options as opt
from ._check import Scope
from ._console import console, err_console

if TYPE_CHECKING:
    from .._guard_service import GuardServiceConfig, ServingGuard
    from .._lm import LMConfig

GUARD_LIMITS = ServiceLimits()  # the guard service's defaults, shown in --help


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)


BackendOption = Annotated[
    Backend | None,
    typer.Option(
        "--backend", help="llama-cpp (CPU, GGUF files) or vllm (CUDA GPUs).", show_default="llama-cpp"
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="llama-cpp: a .gguf file (default: the embedded SmolLM2-135M-Instruct). "
        "vllm: a Hub model id or local directory (required).",
    ),
]
PortOption = Annotated[
    int | None,
    typer.Option(
        "--port",
        min=1,
        max=65535,
        help=f"Port (model server: on 127.0.0.1, default a free one; --guard: default {DEFAULT_GUARD_PORT}).",
    ),
]
NCtxOption = Annotated[
    int | None,
    typer.Option("--n-ctx", min=256, help=f"llama-cpp: context per request [{DEFAULT_N_CTX}]."),
]
ThreadsOption = Annotated[
    int | None,
    typer.Option("--threads", min=1, help="llama-cpp: CPU threads (default: half the CPUs, at least 1)."),
]
NParallelOption = Annotated[
    int | None, typer.Option("--n-parallel", min=1, help="llama-cpp: requests decoded together [1].")
]
MaxModelLenOption = Annotated[
    int | None, typer.Option("--max-model-len", min=1, help="vllm: context length (default: auto).")
]
GpuMemoryUtilizationOption = Annotated[
    float | None,
    typer.Option("--gpu-memory-utilization", min=0.01, max=1.0, help="vllm: share of GPU memory to use."),
]
TensorParallelSizeOption = Annotated[
    int | None, typer.Option("--tensor-parallel-size", min=1, help="vllm: GPUs to shard the model over.")
]
GuardOption = Annotated[
    str | None,
    typer.Option(
        "--guard",
        help="Serve this guard over HTTP instead of a model: a compiled artifact directory, official, "
        "dspy, dspy-cot or a guard model's own format (llama-guard, granite-guardian, shieldgemma, "
        "dynaguard, gpt-oss-safeguard) (POST /v1/check).",
    ),
]
ProtocolOption = Annotated[
    str | None,
    typer.Option(
        "--protocol", help="--guard: per-policy or per-rule (default: per-policy, or the artifact's)."
    ),
]
ParserOption = Annotated[
    str | None,
    typer.Option(
        "--parser",
        help="--guard: the official baseline's parser, strict (the reference's) or robust.",
        show_default="strict",
    ),
]
PolicyOption = Annotated[
    Path | None,
    typer.Option(
        "--policy", help="--guard: the policy of requests that send none (numbered rules, one per line)."
    ),
]
HostOption = Annotated[
    str | None,
    typer.Option(
        "--host",
        help="--guard: address to bind; beyond loopback only with --auth-token-env.",
        show_default="127.0.0.1",
    ),
]
AuthTokenEnvOption = Annotated[
    str | None,
    typer.Option(
        "--auth-token-env",
        help="--guard: environment variable holding the bearer token every endpoint but /healthz requires.",
    ),
]
RequestTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--request-timeout",
        min=0.001,
        help="--guard: seconds one check may take in all (then 504).",
        show_default=f"{GUARD_LIMITS.request_timeout_s:g}",
    ),
]
MaxInFlightOption = Annotated[
    int | None,
    typer.Option(
        "--max-in-flight",
        min=1,
        help="--guard: checks at once; past it 429 with Retry-After (a request with more checks than this: 413).",
        show_default=str(GUARD_LIMITS.max_in_flight),
    ),
]
MaxBodyKbOption = Annotated[
    int | None,
    typer.Option(
        "--max-body-kb",
        min=1,
        help="--guard: largest request body (KiB).",
        show_default=str(GUARD_LIMITS.max_body_bytes // 1024),
    ),
]
MaxMessagesOption = Annotated[
    int | None,
    typer.Option(
        "--max-messages",
        min=1,
        help="--guard: messages per check.",
        show_default=str(GUARD_LIMITS.max_messages),
    ),
]
MaxRulesOption = Annotated[
    int | None,
    typer.Option(
        "--max-rules", min=1, help="--guard: rules per policy.", show_default=str(GUARD_LIMITS.max_rules)
    ),
]
MaxBatchOption = Annotated[
    int | None,
    typer.Option(
        "--max-batch",
        min=1,
        help="--guard: checks per batch request.",
        show_default=str(GUARD_LIMITS.max_batch),
    ),
]

ChatTemplateOption = Annotated[
    str | None,
    typer.Option(
        "--chat-template",
        help="vllm: the chat template, a file or one sp-dspy ships (llama-guard-3, llama-guard-4).",
    ),
]
ReasoningParserOption = Annotated[
    str | None,
    typer.Option(
        "--reasoning-parser", help="vllm: the server's reasoning parser (e.g. qwen3, openai_gptoss)."
    ),
]


@dataclass
class VllmFlags:
    """The options of ``--backend vllm`` (a flag group)."""

    max_model_len: MaxModelLenOption = None
    gpu_memory_utilization: GpuMemoryUtilizationOption = None
    tensor_parallel_size: TensorParallelSizeOption = None
    chat_template: ChatTemplateOption = None
    reasoning_parser: ReasoningParserOption = None

    def flags(self) -> dict[str, Any]:
        """Each option by its flag (``--max-model-len``: value)."""
        return {f"--{name.replace('_', '-')}": value for name, value in vars(self).items()}


ScopeOption = Annotated[
    Scope | None,
    typer.Option(
        "--scope",
        help="--guard: judge the whole conversation, or only its last message in the context of the "
        "earlier ones (last-turn: not with official or a guard model's format); a request may say otherwise.",
        show_default="conversation",
    ),
]


class OnError(StrEnum):
    """``--on-error``: a gateway's answer when the guard gives no verdict."""

    block = "block"
    allow = "allow"


OnErrorOption = Annotated[
    OnError | None,
    typer.Option(
        "--on-error",
        help="--guard: what the gateway routes (LiteLLM's guardrail API, /v1/moderations) answer when "
        "the guard gives no verdict, or a moderation input was not judged (a budget cap) while others "
        "were: block or allow.",
        show_default="block",
    ),
]


@dataclass
class GuardFlags:
    """The options of ``--guard``: the guard's protocol and parser, its policy, where and how it
    listens, its limits (a flag group)."""

    protocol: ProtocolOption = None
    parser: ParserOption = None
    policy: PolicyOption = None
    host: HostOption = None
    auth_token_env: AuthTokenEnvOption = None
    request_timeout: RequestTimeoutOption = None
    max_in_flight: MaxInFlightOption = None
    max_body_kb: MaxBodyKbOption = None
    max_messages: MaxMessagesOption = None
    max_rules: MaxRulesOption = None
    max_batch: MaxBatchOption = None
    scope: ScopeOption = None
    on_error: OnErrorOption = None

    def flags(self) -> dict[str, Any]:
        """Each option by its flag (``--max-in-flight``: value)."""
        return {f"--{name.replace('_', '-')}": value for name, value in vars(self).items()}

    def settings(self) -> dict[str, Any]:
        """The ``GuardServiceConfig`` settings these options give (None: the config's default)."""
        limits = {"max_in_flight": self.max_in_flight, "max_messages": self.max_messages,
                  "max_rules": self.max_rules, "max_batch": self.max_batch,
                  "max_body_bytes": None if self.max_body_kb is None else self.max_body_kb * 1024,
                  "request_timeout_s": self.request_timeout}  # fmt: skip
        return {"protocol": self.protocol, "parser": self.parser, "policy": self.policy, "host": self.host,
                "auth_token_env": self.auth_token_env, "limits": limits,
                "scope": None if self.scope is None else self.scope.value,
                "on_error": None if self.on_error is None else self.on_error.value}  # fmt: skip


@opt.with_flag_groups
def serve(
    backend: BackendOption = None,
    model: ModelOption = None,
    port: PortOption = None,
    n_ctx: NCtxOption = None,
    threads: ThreadsOption = None,
    n_parallel: NParallelOption = None,
    vllm: VllmFlags = VllmFlags(),
    guard: GuardOption = None,
    service: GuardFlags = GuardFlags(),
    caps: opt.CapFlags = opt.CapFlags(),
    lm: lmo.Lm = None,
    config: lmo.ModelsConfig = None,
    lm_flags: lmo.LmFlags = lmo.LmFlags(),
) -> None:
    """Serve a model (llama.cpp, vLLM) or, with --guard, a guard over HTTP until Ctrl-C.

    A model server listens on 127.0.0.1; other commands use it meanwhile. The guard service
    answers POST /v1/check and /v1/check/batch with verdicts, LiteLLM's guardrail API
    (/beta/litellm_basic_guardrail_api) and OpenAI's /v1/moderations, GET /healthz, /readyz,
    /metrics and /openapi.json; SIGTERM finishes the checks in flight (new ones get 503), exit 143.
    """
    server_flags = {"--backend": backend, "--model": model, "--n-ctx": n_ctx, "--threads": threads,
                    "--n-parallel": n_parallel, **vllm.flags()}  # fmt: skip
    if guard is not None:
        _refuse(server_flags, "an option of the model server, not of --guard")
        settings = build_guard_service_config(
            {"guard": guard, "port": port, **service.settings(), "caps": caps.caps()}
        )
        _serve_guard(settings, lm=lm, config=config, lm_flags=lm_flags)
        return
    lm_given = {f"--{key.replace('_', '-')}": v for key, v in vars(lm_flags).items() if v is not False}
    _refuse({**service.flags(), **_cap_flags(caps), "--lm": lm, "--config": config, **lm_given},
            "an option of the guard service; add --guard ARTIFACT|official")  # fmt: skip
    server = build_model_server_config(
        {"backend": backend, "model": model, "port": port, "n_ctx": n_ctx, "threads": threads,
         "n_parallel": n_parallel, **vars(vllm)}
    )  # fmt: skip
    serve_model(server, _Notes())
    err_console.print(f"stopped; removed {state_path()}", highlight=False)


def _refuse(flags: dict[str, Any], why: str) -> None:
    """One line naming every flag of ``flags`` that was given, and ``why`` it does not belong."""
    if given := [flag for flag, value in flags.items() if value is not None]:
        raise ConfigError(f"{', '.join(given)}: {why}")


class _Notes:
    """What ``serve_model`` says as the model server starts, printed."""

    def starting(self, backend: Backend, model_name: str) -> None:
        if backend is Backend.llama_cpp:
            err_console.print(f"loading {model_name} with llama.cpp ...", highlight=False)
        else:
            err_console.print(
                f"starting vllm serve {model_name} (loading can take minutes) ...", highlight=False
            )

    def replacing(self, earlier: ServeState) -> None:
        err_console.print(
            f"[yellow]note:[/yellow] replacing the record of the server at {earlier.api_base} "
            f"(pid {earlier.pid}); `--lm local` now uses this one"
        )

    def serving(self, state: ServeState) -> None:
        console.print(
            f"serving [bold]{state.model_name}[/bold] ({state.backend}) at {state.api_base}\n"
            "use it from other commands with:\n"
            + ("  --lm local\n" if state.backend == Backend.llama_cpp else "")
            + f"  --lm openai/{state.model_name} --api-base {state.api_base}\npress Ctrl-C to stop",
            highlight=False,
            soft_wrap=True,
        )


def _serve_guard(
    settings: GuardServiceConfig, *, lm: str | None, config: Path | None, lm_flags: lmo.LmFlags
) -> None:
    """Serve the guard over HTTP until Ctrl-C or SIGTERM, then stop gracefully (exit 130 or 143)."""
    # Deferred: aiohttp's server, the guard and the runner's pricing load only when a guard is served.
    from .._guard_service import StoppedAtOnce, serve_guard

    if lm is None:
        raise ConfigError(
            "--lm: missing (the model the guard calls: a model string, a configured name or local)"
        )
    (lm_config,) = lmo.lm_configs(lm, None, config, default=lmo.LOCAL, **lm_flags.overrides())

    @contextmanager
    def session(lm_config: LMConfig) -> Iterator[LMConfig]:  # once the settings passed their checks
        configure_cache(enabled=not lm_flags.no_cache)
        with lmo.lm_session(lm_config) as live:
            yield live

    try:
        serve_guard(settings, lm_config, session=session, on_ready=_announce, log=_log)
    except StoppedAtOnce:  # a second Ctrl-C or SIGTERM: stopped at once (typer would say 130)
        err_console.print("stopped at once: checks still in flight got no answer", highlight=False)
        raise typer.Exit(interrupted_exit_code()) from None
    err_console.print("stopped: every check in flight was answered", highlight=False)
    raise typer.Exit(interrupted_exit_code())


def _announce(serving: ServingGuard) -> None:
    url = serving.url
    capped = ", ".join(
        f"{name} {value:g}" for name, value in serving.caps.model_dump().items() if value is not None
    )
    auth = ' -H "Authorization: Bearer $TOKEN"' if serving.auth else ""
    console.print(
        f"serving guard {serving.guard} ({serving.protocol}) on {serving.model} at {url}\n"
        + (f"budget per process: {capped}\n" if capped else "")
        + f"  curl{auth} -H 'Content-Type: application/json'"
        + f' -d \'{{"policy": "1. ...", "messages": [...]}}\' {url}/v1/check\n'
        f"API description: {url}/openapi.json; press Ctrl-C to stop",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )


def _cap_flags(caps: opt.CapFlags) -> dict[str, Any]:
    return {
        "--max-calls": caps.max_calls,
        "--max-total-tokens": caps.max_total_tokens,
        "--max-usd": caps.max_usd,
    }


def _log(line: str) -> None:
    err_console.print(redact(line), markup=False, highlight=False, soft_wrap=True)
