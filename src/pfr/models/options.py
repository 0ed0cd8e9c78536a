"""Parsing ``--model-opt key=value`` strings, shared by the backends so they agree on spelling and errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pfr.errors import ModelError


def on_off(opts: Mapping[str, str], key: str, default: bool) -> bool:
    """``on/true/1/yes`` or ``off/false/0/no`` (any case); ``default`` when the option is absent."""
    value = opts.get(key)
    if value is None:
        return default
    v = value.strip().lower()
    if v in ("on", "true", "1", "yes"):
        return True
    if v in ("off", "false", "0", "no"):
        return False
    raise ModelError(f"model option {key}={value!r} must be on or off")


def positive(opts: Mapping[str, str], key: str, kind: type, default: Any) -> Any:
    """A positive ``kind`` (int or float); ``default`` (which may be ``None``) when the option is absent."""
    value = opts.get(key)
    if value is None:
        return default
    try:
        out = kind(value)
    except ValueError:
        raise ModelError(f"model option {key}={value!r}: not a {kind.__name__}") from None
    if out <= 0:
        raise ModelError(f"model option {key}={value!r}: must be positive")
    return out
