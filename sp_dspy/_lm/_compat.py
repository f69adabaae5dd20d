"""Every place sp-dspy touches DSPy internals (the only such module), for five needs without a
public API in DSPy 3.4; ``tests/test_lm_presets.py`` names the use (:data:`USES`) an installed DSPy breaks:

1. ``call_path``: raw messages through DSPy's engine, cache and retries, keeping the ``CallResult``
   (only it says whether the answer came from the cache).
2. ``price_table``: DSPy's bundled price snapshot, so sp-dspy's HTTP engine prices at DSPy's rates.
3. ``response_cache``: DSPy's cache keyed by endpoint too (DSPy drops ``api_base``), its failed disk
   writes reported (DSPy logs them at debug level).
4. ``gepa_budget`` / 5. ``mipro_budget``: the optimizers' ``auto`` presets, for ``compile --dry-run``.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from contextlib import nullcontext
from types import SimpleNamespace
from typing import Any

from .._redact import redact_outputs

#: ``use name -> ((module, space-separated attribute names), ...)`` that must exist in the
#: installed DSPy (``Class.method``: a method of a class there).
USES: dict[str, tuple[tuple[str, str], ...]] = {
    "call_path": (("dspy.clients.execution", "prepare execute aexecute finalize"),),
    "price_table": (("dspy.clients.model_metadata", "model_info rate"),),
    "response_cache": (("dspy.clients.cache", "Cache Cache.cache_key"),),
    "gepa_budget": (("dspy.teleprompt.gepa.gepa", "AUTO_RUN_SETTINGS GEPA GEPA.auto_budget"),),
    "mipro_budget": (
        (
            "dspy.teleprompt.mipro_optimizer_v2",
            "AUTO_RUN_SETTINGS MIN_MINIBATCH_SIZE MIPROv2 MIPROv2._set_num_trials_from_num_candidates",
        ),
    ),
}
#: DSPy's request identifiers of async calls and their sync twins (``response_cache``).
SYNC_IDENTIFIERS = {
    "dspy.clients.lm.alitellm_completion": "dspy.clients.lm.litellm_completion",
    "dspy.clients.lm.alitellm_text_completion": "dspy.clients.lm.litellm_text_completion",
    "dspy.clients.lm.alitellm_responses_completion": "dspy.clients.lm.litellm_responses_completion",
    "dspy.clients.lm15.complete.async": "dspy.clients.lm15.complete",
}
#: The request field in which DSPy's cache keys record the function called.
IDENTIFIER_FIELD = "_fn_identifier"
#: The request fields in which DSPy's cache keys would carry the endpoint (DSPy leaves them out).
ENDPOINT_FIELDS = ("api_base", "base_url")


def missing_uses() -> list[str]:
    """``"<use>: <module>.<attribute>"`` for every internal the installed DSPy lacks."""
    missing = []
    for use, places in USES.items():
        for module_name, names in places:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                missing.append(f"{use}: {module_name}")
                continue
            for name in names.split():
                owner, _, method = name.partition(".")
                found = getattr(module, owner, None)
                if found is None or (method and not callable(getattr(found, method, None))):
                    missing.append(f"{use}: {module_name}.{name}")
    return missing


# ----- 1. call_path ------------------------------------------------------------------------
def call(lm: Any, messages: list[dict[str, Any]], kwargs: dict[str, Any]) -> Any:
    """DSPy's ``CallResult`` of ``messages`` sent through ``lm`` (cache, retries, history), its
    outputs masked before history keeps them: this path runs no LM callbacks
    (``_dspy_answers.AnswerRedaction``, which masks them on ``lm(...)``)."""
    from dspy.clients.execution import execute, finalize, prepare

    prepared = prepare(lm, None, messages, kwargs)
    result = execute(lm, prepared)
    redact_outputs(result.outputs)
    finalize(lm, prepared, result)
    return result


async def acall(lm: Any, messages: list[dict[str, Any]], kwargs: dict[str, Any]) -> Any:
    """The async :func:`call`. Prepared on the event loop, not on a thread as ``lm.acall`` does:
    that is for media parts read from files, and these messages are text."""
    from dspy.clients.execution import aexecute, finalize, prepare

    prepared = prepare(lm, None, messages, kwargs, asynchronous=True)
    result = await aexecute(lm, prepared)
    redact_outputs(result.outputs)
    finalize(lm, prepared, result)
    return result


# ----- 2. price_table ----------------------------------------------------------------------
#: What the providers' batch APIs charge of the list price (OpenAI, Anthropic, Gemini: half),
#: for a model the price snapshot gives no batch prices.
BATCH_DISCOUNT = 0.5
_RATE_FIELDS = (
    "input_cost_per_token",
    "output_cost_per_token",
    "cache_read_input_token_cost",
    "cache_creation_input_token_cost",
)


def price_rates(
    provider: str, model_id: str, *, batch: bool = False
) -> tuple[float | None, float | None, float | None, float | None]:
    """(input, output, cache-read, cache-write) USD per token of ``provider/model_id``; None where
    unpriced. ``batch``: through the provider's batch API (the snapshot's ``*_batches`` price,
    else :data:`BATCH_DISCOUNT` of the list price)."""
    from dspy.clients.model_metadata import model_info, rate

    info = model_info(provider, model_id) or {}
    listed = [rate(info, name) for name in _RATE_FIELDS]
    if batch:
        batched = [rate(info, f"{name}_batches") for name in _RATE_FIELDS]
        listed = [
            b if b is not None else None if r is None else r * BATCH_DISCOUNT
            for b, r in zip(batched, listed, strict=True)
        ]
    return listed[0], listed[1], listed[2], listed[3]


def has_batch_prices(provider: str, model_id: str) -> bool:
    """Whether the price snapshot lists batch prices for the model (else the discount is assumed)."""
    from dspy.clients.model_metadata import model_info, rate

    info = model_info(provider, model_id) or {}
    return rate(info, "input_cost_per_token_batches") is not None


# ----- 3. response_cache -------------------------------------------------------------------
def cache_class() -> type[Any]:
    """DSPy's response cache class, the base of sp-dspy's (``_dspy_cache.EndpointAwareCache``)."""
    from dspy.clients.cache import Cache

    return Cache


def cache_request(
    request: dict[str, Any], ignored: list[str] | None, endpoint_key: Callable[[str], str]
) -> tuple[dict[str, Any], list[str]]:
    """A request as DSPy's cache should key it, and the fields to leave out: an async call as its
    sync twin, the endpoint (``api_base``, ``base_url``) as ``endpoint_key(url)``, never the API key."""
    left_out = [name for name in ignored or [] if name not in ENDPOINT_FIELDS]
    if "api_key" not in left_out:
        left_out.append("api_key")
    keyed = dict(request)
    function = keyed.get(IDENTIFIER_FIELD)
    if isinstance(function, str):
        keyed[IDENTIFIER_FIELD] = SYNC_IDENTIFIERS.get(function, function)
    for name in ENDPOINT_FIELDS:
        value = keyed.get(name)
        if isinstance(value, str):
            keyed[name] = endpoint_key(value)
    return keyed, left_out


def on_disk_write_failure(cache: Any, failed: Callable[[Exception], None]) -> None:
    """Call ``failed`` with the first write of ``cache``'s on-disk tier (``disk_cache``, diskcache's
    ``FanoutCache``) that raises (a full disk), and write to it no more; reads go on.

    DSPy's ``Cache.put`` logs such a failure at debug level only, on every write, so the user
    would never learn that answers stopped being cached. No disk tier: nothing to watch.
    """
    disk: Any = getattr(cache, "disk_cache", None)
    write = getattr(disk, "set", None)
    if isinstance(disk, dict) or write is None:
        return
    lock, broken = threading.Lock(), list[Exception]()

    def set_until_it_fails(*args: Any, **kwargs: Any) -> Any:
        if broken:
            return False
        try:
            return write(*args, **kwargs)
        except Exception as exc:  # sqlite3.OperationalError, OSError: whatever the disk raised
            with lock:
                first = not broken
                broken.append(exc)
            if first:
                failed(exc)
            return False

    disk.set = set_until_it_fails


def install_cache(cache: Any) -> None:
    """Make ``cache`` DSPy's response cache, holding DSPy's lock (its lazy default must not win)."""
    import dspy

    with getattr(dspy, "_cache_lock", nullcontext()):
        setattr(dspy, "cache", cache)  # noqa: B010 - dspy builds `cache` lazily; mypy cannot see it


def installed_cache() -> Any:
    """DSPy's response cache if one was installed (None: DSPy has not built its default yet)."""
    import dspy

    return vars(dspy).get("cache")


# ----- 4. gepa_budget ----------------------------------------------------------------------
def gepa_auto_metric_calls(auto: str, n_val: int) -> int:
    """The metric calls GEPA's ``auto`` preset allows for one predictor and ``n_val`` dev examples."""
    from dspy.teleprompt import GEPA
    from dspy.teleprompt.gepa.gepa import AUTO_RUN_SETTINGS

    def no_metric(gold: Any, pred: Any, trace: Any, pred_name: Any, pred_trace: Any) -> float:
        return 0.0

    # Built through its constructor; auto_budget reads no state it sets, and proposes nothing.
    gepa = GEPA(metric=no_metric, auto=auto, instruction_proposer=lambda *args, **kwargs: {})
    candidates = AUTO_RUN_SETTINGS[auto]["n"]
    return int(gepa.auto_budget(num_preds=1, num_candidates=candidates, valset_size=n_val))


# ----- 5. mipro_budget ---------------------------------------------------------------------
def mipro_auto_run(auto: str, n_val: int, *, zero_shot: bool) -> tuple[int, int, int, bool]:
    """(candidates, trials, dev examples, minibatch) MIPROv2's ``auto`` preset runs for one predictor."""
    import dspy
    from dspy.teleprompt import MIPROv2
    from dspy.teleprompt.mipro_optimizer_v2 import AUTO_RUN_SETTINGS, MIN_MINIBATCH_SIZE

    preset = AUTO_RUN_SETTINGS[auto]
    candidates = int(preset["n"])
    val = min(int(preset["val_size"]), n_val)
    one_predictor = SimpleNamespace(predictors=lambda: [None])
    unused = dspy.LM("openai/unused")  # never called: MIPROv2 only requires LMs to be named
    mipro = MIPROv2(metric=lambda *args: 0.0, auto=auto, prompt_model=unused, task_model=unused)
    trials = int(mipro._set_num_trials_from_num_candidates(one_predictor, zero_shot, candidates))
    return candidates, trials, val, val > MIN_MINIBATCH_SIZE
