"""Model specs → backends. Heavy backends are imported only when asked for.

Spec forms: ``baseline:KIND``, ``python:PATH_OR_MODULE:FUNCTION``, ``hf:ID_OR_PATH``,
``llamacpp:PATH.gguf``, ``openai:MODEL@BASE_URL``, ``vllm:ID_OR_PATH``, ``http:URL``, and the presets
``smollm2-135m``, ``gemma3-270m``, ``qwen2.5-coder-1.5b``, ``minilm-router``. Backend options come as ``key=value``
strings (``--model-opt``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from pfr.errors import ModelError
from pfr.models.base import Backend, check_known

Factory = Callable[[str, Mapping[str, str]], Backend]
#: the options of ``python:`` models (a user function cannot be asked for its size or family).
PYTHON_OPTIONS = ("temperature", "params", "family", "version", "strict")
#: the options of ``baseline:`` models
BASELINE_OPTIONS = ("seed", "temperature")

#: prefix → "module:function" of a factory taking (rest of spec, options).
_FACTORIES: dict[str, str] = {
    "baseline": "pfr.models.registry:_baseline",
    "python": "pfr.models.registry:_python",
    "hf": "pfr.models.hf:from_spec",
    "llamacpp": "pfr.models.llamacpp:from_spec",
    "openai": "pfr.models.openai:from_spec",
    "vllm": "pfr.models.vllm:from_spec",
    "router": "pfr.models.router:from_spec",
    "http": "pfr.models.http_service:from_spec",
}

#: prefix → what ``--model-opt decide=`` may be besides ``scores`` (:mod:`pfr.models.decide`); a backend
#: listed here receives ``decide`` in its options and builds the generating form itself (``openai:``
#: goes to :mod:`pfr.models.generate`; ``hf:`` and ``llamacpp:`` wrap themselves in
#: :class:`pfr.models.generating.GeneratingLM`).
DECIDES: dict[str, tuple[str, ...]] = {
    "openai": ("generate", "choice"),
    "hf": ("generate",),
    "llamacpp": ("generate", "choice"),
    "vllm": ("generate", "choice"),
}

#: preset name → (prefix, rest): the offline models that ship inside PyPI packages.
PRESETS: dict[str, tuple[str, str]] = {
    "smollm2-135m": ("hf", "preset:smollm2-135m"),
    "gemma3-270m": ("hf", "preset:gemma3-270m"),
    "qwen2.5-coder-1.5b": ("hf", "preset:qwen2.5-coder-1.5b"),  # `make models` installs it (about 1 GB)
    "minilm-router": ("router", "preset:minilm"),
}


def register(prefix: str, factory: str) -> None:
    """Add a backend: ``factory`` is ``"module:function"``, imported on first use."""
    _FACTORIES[prefix] = factory


def _baseline(rest: str, opts: Mapping[str, str]) -> Backend:
    from pfr.models.baselines import Baseline
    from pfr.models.options import model_option
    from pfr.options import SEED, TEMPERATURE

    check_known(opts, BASELINE_OPTIONS, "baseline")
    seed, temperature = model_option(opts, "seed", SEED, 0), model_option(opts, "temperature", TEMPERATURE, 1.0)
    return Baseline(rest, seed=seed, temperature=temperature)


def _python(rest: str, opts: Mapping[str, str]) -> Backend:
    from pfr.models.callable import CallableModel
    from pfr.models.options import family, on_off, param_count, positive

    check_known(opts, PYTHON_OPTIONS, "python")
    target, sep, func = rest.rpartition(":")
    if not sep or not target or not func:
        raise ModelError(f"python model spec must be python:PATH_OR_MODULE:FUNCTION, got 'python:{rest}'")
    return CallableModel(
        target,
        func,
        temperature=positive(opts, "temperature", float, 1.0),
        params=param_count(opts),
        family=family(opts),
        version=family(opts, "version"),
        strict=on_off(opts, "strict", False),
    )


def _resolve(target: str) -> Factory:
    module, _, func = target.partition(":")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise ModelError(
            f"the backend in {module} needs packages that are not installed ({exc.name or exc}); "
            "see docs/backends.md for the extra to install"
        ) from None
    fn: Factory = getattr(mod, func)
    return fn


def load_model(spec: str, options: Mapping[str, Any] | None = None) -> Backend:
    """The backend for ``spec`` (see module docstring); raises :class:`ModelError` for a bad spec."""
    opts = {k: str(v) for k, v in (options or {}).items()}
    if spec in PRESETS:
        prefix, rest = PRESETS[spec]
    else:
        prefix, sep, rest = spec.partition(":")
        if not sep or prefix not in _FACTORIES:
            known = ", ".join([*(f"{p}:…" for p in _FACTORIES), *PRESETS])
            raise ModelError(f"unknown model spec {spec!r} (known: {known})")
    if "decide" in opts:  # scores (the default), generate or choice: pfr.models.decide
        from pfr.models.decide import mode_of

        mode = mode_of(opts)
        if mode == "scores":
            opts.pop("decide")
        elif mode not in DECIDES.get(prefix, ()):
            able = [f"{p}:" for p, modes in DECIDES.items() if mode in modes]
            raise ModelError(f"model option decide={mode} is not available for {prefix}: (it is for {', '.join(able)})")
        elif prefix == "openai":
            from pfr.models.generate import from_openai_spec

            return from_openai_spec(rest, opts)
    return _resolve(_FACTORIES[prefix])(rest, opts)


def parse_options(pairs: list[str] | None) -> dict[str, str]:
    """``["key=value", ...]`` → dict, with a clear error for a malformed pair."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ModelError(f"model option {pair!r} must be key=value")
        out[key.strip()] = value.strip()
    return out
