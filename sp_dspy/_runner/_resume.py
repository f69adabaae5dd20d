"""A resumed run continues the very run its manifest describes: same dataset, program, selection and model.

Records of two setups in one results file would be scored as one run, under a manifest
naming only the last one. A model joining an existing run id (``--run-id`` without
``--resume``) shares that run's one manifest, so it must share its dataset, program and
selection too. The run's identity, flag by flag, is compared by the one identity check
(``_identity.first_difference``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._data import CaseSelection
from .._errors import ConfigError
from .._lm import ANSWER_SETTINGS, LMConfig
from .._run_manifest import RunManifest
from ._config import EvalConfig
from ._identity import first_difference

#: Run settings a resumption must keep, with the flag that sets each.
_RUN_SETTINGS = (
    ("program", "--program"),
    ("protocol", "--protocol"),
    ("parser", "--parser"),
    ("per_rule_layout", "--per-rule-layout"),
)
#: The data selection a resumption must keep (``limit`` may grow: a run extended to more cases).
_SELECTION = ("benchmark", "level", "domain", "split", "shard", "start_idx", "lenient")


def refuse_a_changed_resume(
    manifest: RunManifest | None,
    config: EvalConfig,
    *,
    dataset: tuple[str, str],
    model: str,
    lm: LMConfig,
    results_file: Path,
    resume: bool = True,
) -> None:
    """Raise ``ConfigError`` naming the first setting in which this resumption differs from the run
    (``resume`` False: a model joining the run, whose manifest would otherwise mislabel the others).

    ``manifest``: the run's (None: nothing recorded, nothing to compare); ``dataset``: the
    loaded dataset's source and sha256; ``model``: the model's name in the manifest. Settings
    a manifest of an older version lacks are not compared.
    """
    if manifest is None:
        return
    old, new = run_identity(manifest, config, dataset=dataset, model=model, lm=lm, results_file=results_file)
    found = first_difference(old, new, dotted=False)
    if found is None:
        return
    setting, was, now = found
    if resume:
        flag, harm = "--resume", "resuming would mix two setups in one results file; resume"
    else:
        flag, harm = (
            f"--run-id {manifest.run_id}",
            "its one manifest would mislabel the models already in it; run",
        )
    raise ConfigError(
        f"{flag}: run {manifest.run_id} ran with {setting} {_shown(was)}, this run asks for {_shown(now)}: "
        f"{harm} with the run's settings, or start another --run-id"
    )


def run_identity(
    manifest: RunManifest, config: EvalConfig, *, dataset: tuple[str, str], model: str, lm: LMConfig,
    results_file: Path,
) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
    """The recorded run's identity and this one's, setting by setting (named by their flags), in the
    order they are checked; a setting that counts as unchanged (an artifact named by another path,
    a ``--limit`` grown) holds the recorded value on both sides."""
    old: dict[str, Any] = {}
    new: dict[str, Any] = {}

    def compare(setting: str, was: Any, now: Any) -> None:
        old[setting], new[setting] = was, now

    source, sha256 = dataset
    recorded = manifest.dataset.get("sha256")
    if isinstance(recorded, str):
        was = f"{manifest.dataset.get('source')} (sha256 {recorded[:12]})"
        compare("--dataset", was, was if recorded == sha256 else f"{source} (sha256 {sha256[:12]})")
    settings, now = manifest.settings, config.model_dump(mode="json")
    for key, flag in _RUN_SETTINGS:
        if key in settings:
            compare(
                flag,
                settings[key],
                settings[key] if _same_setting(key, settings[key], now[key]) else now[key],
            )
    data_then, data_now = dict(settings.get("data") or {}), now["data"]
    if isinstance(data_then.get("split"), str):  # a manifest of an older version holds it as typed
        data_then["split"] = CaseSelection(split=data_then["split"]).resolved_split()
    for key in _SELECTION:
        if key in data_then:
            compare(f"--{key.replace('_', '-')}", data_then[key], data_now[key])
    limit_then, limit_now = data_then.get("limit"), data_now["limit"]
    if "limit" in data_then:  # fewer cases than the run already has differ; more extend the run
        fewer = limit_now is not None and (limit_then is None or limit_now < limit_then)
        compare("--limit", limit_then, limit_now if fewer else limit_then)
    for entry_name, entry in manifest.runs.items():
        if Path(entry.results_file).name != results_file.name:  # the manifest lies beside its results
            continue
        compare("--lm", entry_name, model)
        public = lm.public_dict()
        for key in ANSWER_SETTINGS:
            if key in entry.lm:
                compare(f"the model's {key}", entry.lm[key], public.get(key))
    return old, new


def _same_setting(key: str, was: Any, now: Any) -> bool:
    """Equal settings; for ``program``, an artifact directory named by another path counts as the same."""
    if was == now:
        return True
    if key == "program" and isinstance(was, str) and isinstance(now, str):
        then_dir, now_dir = Path(was), Path(now)
        return then_dir.is_dir() and now_dir.is_dir() and then_dir.resolve() == now_dir.resolve()
    return False


def _shown(value: Any) -> str:
    return "(none)" if value is None else str(value)
