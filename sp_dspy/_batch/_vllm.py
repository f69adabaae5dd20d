"""vLLM's offline batch runner (``vllm run-batch``) on this machine's GPU, for ``hosted_vllm/``
models: the same OpenAI batch file, answered without a server, at the best throughput.

The runner is a detached child writing beside the run's batch log, so a killed ``eval``
leaves it working and ``--resume`` collects what it wrote: ``vllm-N.in.jsonl`` (the input),
``vllm-N.out.jsonl`` (OpenAI's output format), ``vllm-N.log``, ``vllm-N.pid`` and, once it
exits, ``vllm-N.rc``. ``SP_DSPY_VLLM_RUN_BATCH`` replaces the ``vllm run-batch`` command
(a wrapper that adds the options ``serve --backend vllm`` would pass, say).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import OutputError
from ._openai import ENDPOINT, answer_of
from ._wire import BatchAnswer, BatchState, Intent

if TYPE_CHECKING:
    from .._lm import DirectChat, HttpRequest

COMMAND_ENV = "SP_DSPY_VLLM_RUN_BATCH"


def run_batch_command() -> list[str]:
    """``SP_DSPY_VLLM_RUN_BATCH`` split as a shell would, else this environment's ``vllm run-batch``."""
    override = os.environ.get(COMMAND_ENV, "").strip()
    if override:
        return shlex.split(override)
    from .._serve import vllm_executable  # ConfigError when vLLM is not installed

    return [vllm_executable(), "run-batch"]


class VllmRunBatch:
    """``vllm run-batch -i IN -o OUT --model MODEL`` as one detached child per batch."""

    max_requests = 10**9  # no provider limit: one file per step of the run
    max_bytes = 10**15

    def __init__(self, client: DirectChat, directory: Path) -> None:
        self.model = client.model_id
        self.directory = directory
        self.command = run_batch_command()

    @staticmethod
    def line(custom_id: str, request: HttpRequest) -> dict[str, Any]:
        return {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": request.body}

    def _path(self, batch_id: str, suffix: str) -> Path:
        return self.directory / f"{batch_id}.{suffix}"

    @staticmethod
    def upload(lines: list[dict[str, Any]]) -> str | None:
        return None  # a local input file, written by create

    def create(self, lines: list[dict[str, Any]], intent: Intent) -> str:
        number = 1 + sum(1 for _ in self.directory.glob("vllm-*.in.jsonl"))
        batch_id = f"vllm-{number}"
        source, out = self._path(batch_id, "in.jsonl"), self._path(batch_id, "out.jsonl")
        try:
            source.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), "utf-8")
            command = [*self.command, "-i", str(source), "-o", str(out), "--model", self.model]
            wrapper = f'{shlex.join(command)} > {shlex.quote(str(self._path(batch_id, "log")))} 2>&1; echo $? > "$0"'
            child = subprocess.Popen(
                ["sh", "-c", wrapper, str(self._path(batch_id, "rc"))], start_new_session=True
            )
            self._path(batch_id, "pid").write_text(str(child.pid), "utf-8")
        except OSError as exc:
            raise OutputError(
                f"--batch: cannot start {self.command[0]} run-batch: {exc.strerror or exc}"
            ) from None
        return batch_id

    def find(self, intent: Intent, known: set[str]) -> list[str]:
        """The run-batch started on exactly the intent's requests (its input file written, its child started)."""
        wanted = set(intent.custom_ids)
        found: list[str] = []
        for source in sorted(self.directory.glob("vllm-*.in.jsonl")):
            batch_id = source.name.removesuffix(".in.jsonl")
            ids = {
                json.loads(text)["custom_id"]
                for text in source.read_text("utf-8").splitlines()
                if text.strip()
            }
            if ids == wanted and self._path(batch_id, "pid").exists() and batch_id not in known:
                found.append(batch_id)
        return found

    def poll(self, batch_id: str) -> BatchState:
        rc = self._path(batch_id, "rc")
        if rc.exists():
            code = rc.read_text("utf-8").strip()
            log = self._path(batch_id, "log")
            if code == "0":
                return BatchState(status="completed", ended=True)
            return BatchState(
                status="failed", ended=True, ended_early=f"failed: vllm run-batch exited {code} (see {log})"
            )
        try:
            os.kill(int(self._path(batch_id, "pid").read_text("utf-8")), 0)
        except (OSError, ValueError):
            return BatchState(
                status="failed", ended=True, ended_early="failed: vllm run-batch stopped without finishing"
            )
        return BatchState(status="in_progress")

    def output(self, batch_id: str) -> list[bytes]:
        out = self._path(batch_id, "out.jsonl")
        return out.read_bytes().splitlines() if out.exists() else []

    @staticmethod
    def answer_of(line: dict[str, Any]) -> BatchAnswer | None:
        return answer_of(line)
