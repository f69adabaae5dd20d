"""Child process of ``LlamaCppServer`` hosting llama.cpp's server through ``xllamacpp``
(a child, not a thread: the server stops only when finalised, llama.cpp may abort the
process, and its C logging writes to file descriptors 1 and 2).

It writes one JSON line, ``{"event": "ready", ...}`` or ``{"event": "error", "message": ...}``,
on the original stdout (llama.cpp's output goes to stderr) and exits at once on SIGTERM,
SIGINT, SIGHUP or end of stdin, so it never outlives its parent.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from typing import Any

import xllamacpp


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sp_dspy._serve._llamacpp_main")
    parser.add_argument("--model", required=True, help="GGUF file to serve.")
    parser.add_argument("--alias", required=True, help="Model name advertised by /v1/models.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 lets the OS pick a free port.")
    parser.add_argument("--n-ctx", type=int, default=8192, help="Context tokens per parallel slot.")
    parser.add_argument("--n-parallel", type=int, default=1)
    parser.add_argument("--threads", type=int, default=-1, help="-1 lets llama.cpp choose.")
    parser.add_argument("--max-tokens", type=int, default=-1, help="Cap on generated tokens per request.")
    return parser


def _params(args: argparse.Namespace) -> Any:
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = [args.host]
    params.port = args.port
    params.n_parallel = args.n_parallel
    # llama.cpp splits n_ctx evenly over the slots; callers think per request.
    params.n_ctx = args.n_ctx * args.n_parallel
    params.n_predict = args.max_tokens
    params.cache_prompt = True  # guard prompts repeat the policy
    params.cache_ram_mib = 1024
    params.ui = False
    params.verbosity = 1  # errors only
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    return params


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # Keep the protocol channel private; C-level writes to fd 1 land in the log.
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    stop = threading.Event()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: stop.set())

    def watch_stdin() -> None:
        sys.stdin.buffer.read()
        stop.set()

    threading.Thread(target=watch_stdin, name="stdin-eof", daemon=True).start()

    def emit(event: dict[str, Any]) -> None:
        channel.write(json.dumps(event) + "\n")
        channel.flush()

    try:
        server = xllamacpp.Server(_params(args))
    except Exception as error:
        emit({"event": "error", "message": str(error)})
        return 1
    address = str(server.listening_address).rstrip("/")
    emit({"event": "ready", "api_base": f"{address}/v1", "model_name": args.alias, "pid": os.getpid()})
    while not stop.wait(0.5):
        pass
    # Finalising the Server would first finish the request being decoded (minutes on a CPU);
    # the server keeps nothing worth saving, so end now.
    channel.close()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
