"""Parsing ``--model-opt key=value`` strings, shared by the backends so they agree on spelling and errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pfr.errors import ModelError
from pfr.options import POSITIVE, POSITIVE_INT, OptionError, Rule, Switch, option

#: the weight dtypes a local engine (hf, vLLM) may be asked for besides ``auto``
DTYPES = ("float32", "bfloat16", "float16")


def on_off(opts: Mapping[str, str], key: str, default: bool) -> bool:
    """``on/true/1/yes`` or ``off/false/0/no`` (any case); ``default`` when the option is absent."""
    return bool(model_option(opts, key, Switch(), default))


def positive(opts: Mapping[str, str], key: str, kind: type, default: Any) -> Any:
    """A positive finite ``kind`` (int or float); ``default`` (which may be ``None``) when the option is absent."""
    return model_option(opts, key, POSITIVE_INT if kind is int else POSITIVE, default)


def model_option(opts: Mapping[str, str], key: str, rule: Rule, default: Any) -> Any:
    """``opts[key]`` parsed by ``rule`` (:mod:`pfr.options`), its error a :class:`ModelError`."""
    try:
        return option(opts, key, rule, default)
    except OptionError as exc:
        raise ModelError(f"model option {exc}") from None


_SCALES = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


def param_count(opts: Mapping[str, str], key: str = "params") -> int | None:
    """A model's parameter count from ``params=135M`` / ``1.5B`` / ``7e9`` / ``135000000`` (``None``
    when absent). Backends that cannot count their weights (a remote server, a user function) take it
    as an option so that the recall-against-size figure can order them."""
    value = opts.get(key)
    if value is None:
        return None
    t = value.strip().upper().replace("_", "").replace(",", "")
    scale = _SCALES.get(t[-1:], 1.0)
    try:
        out = round(float(t[:-1] if t[-1:] in _SCALES else t) * scale)
    except ValueError:
        raise ModelError(f"model option {key}={value!r}: not a parameter count (e.g. 135M, 1.5B, 7000000000)") from None
    if out <= 0:
        raise ModelError(f"model option {key}={value!r}: must be positive")
    return out


def family(opts: Mapping[str, str], key: str = "family") -> str | None:
    """The model family (``qwen2.5``, ``gpt-4o``): models of one family form one line in the
    recall-against-size figure; ``None`` when absent (the report then derives it from the name)."""
    value = opts.get(key)
    if value is None:
        return None
    v = value.strip()
    if not v:
        raise ModelError(f"model option {key}= must not be empty")
    return v
