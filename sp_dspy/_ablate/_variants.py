"""What an ablation compares: named program x protocol x layout variants, and compiled artifacts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .._data import read_json_file
from .._errors import ConfigError, DataError
from .._protocol import Layout, Protocol
from .._runner._paths import UNSAFE_CHARS

#: The four rows of the per-rule vs per-policy question, in report order.
DEFAULT_VARIANTS: tuple[str, ...] = (
    "official-per-policy",
    "official-per-rule",
    "dspy-per-policy",
    "dspy-per-rule",
)
#: Every variant that can be asked for by name: (program, protocol, per-rule layout).
NAMED_VARIANTS: dict[str, tuple[str, Protocol, Layout]] = {
    "official-per-policy": ("official", "per-policy", "official"),
    "official-per-rule": ("official", "per-rule", "official"),
    # Shared prefix first, target rule last: cheaper with prompt caching, not the official bytes.
    "official-per-rule-prefix": ("official", "per-rule", "prefix"),
    "dspy-per-policy": ("dspy", "per-policy", "official"),
    "dspy-per-rule": ("dspy", "per-rule", "official"),
    "dspy-cot-per-policy": ("dspy-cot", "per-policy", "official"),
    "dspy-cot-per-rule": ("dspy-cot", "per-rule", "official"),
    # Guard models in their own authors' format, beside the official prompt to the same model.
    "llama-guard-per-policy": ("llama-guard", "per-policy", "official"),
    "llama-guard-per-rule": ("llama-guard", "per-rule", "official"),
    "granite-guardian-per-rule": ("granite-guardian", "per-rule", "official"),
    "shieldgemma-per-rule": ("shieldgemma", "per-rule", "official"),
    "dynaguard-per-policy": ("dynaguard", "per-policy", "official"),
    "dynaguard-per-rule": ("dynaguard", "per-rule", "official"),
    "gpt-oss-safeguard-per-policy": ("gpt-oss-safeguard", "per-policy", "official"),
    "gpt-oss-safeguard-per-rule": ("gpt-oss-safeguard", "per-rule", "official"),
}
ARTIFACT_PROGRAMS = ("dspy", "dspy-cot")


@dataclass(frozen=True)
class PlannedVariant:
    """One row of the ablation; ``program`` is a program name or an artifact directory's absolute path."""

    label: str
    program: str
    protocol: Protocol
    layout: Layout = "official"
    artifact: bool = False

    @property
    def slug(self) -> str:
        """The label as a run-id suffix (letters, digits, ``.``, ``_`` and ``-`` only)."""
        return UNSAFE_CHARS.sub("-", self.label).strip("-.") or "variant"


def _artifact_protocol(spec: str) -> Protocol:
    """The protocol of an artifact directory (its program checked), read without loading DSPy."""
    manifest = Path(spec) / "manifest.json"
    if not manifest.is_file():
        raise ConfigError(f"--variants: {spec} is a directory but not a compiled artifact (no manifest.json)")
    try:
        document = read_json_file(manifest, "artifact manifest")
    except DataError as exc:
        raise ConfigError(f"--variants: {exc}") from None
    fields = document if isinstance(document, dict) else {}
    program, protocol = fields.get("program"), fields.get("protocol")
    if program not in ARTIFACT_PROGRAMS:
        raise ConfigError(
            f"--variants: {manifest}: field 'program' is {program!r}, expected one of {', '.join(ARTIFACT_PROGRAMS)}"
        )
    if protocol not in ("per-policy", "per-rule"):
        raise ConfigError(
            f"--variants: {manifest}: field 'protocol' is {protocol!r}, expected per-policy or per-rule"
        )
    return protocol


def _unique(label: str, taken: set[str]) -> str:
    candidate, count = label, 2
    while candidate in taken:
        candidate = f"{label}-{count}"
        count += 1
    return candidate


def resolve_variants(specs: Sequence[str]) -> list[PlannedVariant]:
    """Variant names and artifact directories -> planned variants (artifacts labelled by directory name).

    Fails now on what a long ablation would trip over hours in: unknown names, non-artifact
    directories, a variant listed twice.
    """
    seen: set[str] = set()
    taken = {spec for spec in specs if spec in NAMED_VARIANTS}
    planned: list[PlannedVariant] = []
    for spec in specs:
        key = spec if spec in NAMED_VARIANTS else str(Path(spec).resolve())
        if key in seen:
            raise ConfigError(f"--variants: {spec} is listed twice")
        seen.add(key)
        if spec in NAMED_VARIANTS:
            program, protocol, layout = NAMED_VARIANTS[spec]
            planned.append(PlannedVariant(spec, program, protocol, layout))
            continue
        if not Path(spec).is_dir():
            raise ConfigError(
                f"--variants: unknown variant {spec!r}; expected one of {', '.join(NAMED_VARIANTS)}"
                " or a compiled artifact directory"
            )
        protocol = _artifact_protocol(spec)
        label = _unique(Path(key).name or "artifact", taken)
        taken.add(label)
        planned.append(PlannedVariant(label, key, protocol, artifact=True))
    return planned
