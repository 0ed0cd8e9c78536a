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


class ParamCount:
    """A model's parameter count: ``135M`` / ``1.5B`` / ``7e9`` / ``135000000``. Backends that cannot
    count their weights (a remote server, a user function) take it as an option so that the
    recall-against-size figure can order them."""

    def allowed(self) -> str:
        return "a parameter count (e.g. 135M, 1.5B, 7000000000)"

    def parse(self, name: str, value: object) -> int:
        t = str(value).strip().upper().replace("_", "").replace(",", "")
        scale = _SCALES.get(t[-1:], 1.0)
        try:
            out = round(float(t[:-1] if t[-1:] in _SCALES else t) * scale)
        except ValueError:
            raise OptionError(f"{name}={value!r}: not {self.allowed()}") from None
        if out <= 0:
            raise OptionError(f"{name}={value!r}: must be positive")
        return out


class Name:
    """A name given as text (a model family, a version), spaces trimmed; empty is refused."""

    def allowed(self) -> str:
        return "a non-empty name"

    def parse(self, name: str, value: object) -> str:
        v = str(value).strip()
        if not v:
            raise OptionError(f"{name}= must not be empty")
        return v


#: ``params=``: see :class:`ParamCount`
PARAMS = ParamCount()
#: ``family=`` (models of one family form one line in the recall-against-size figure; absent, the
#: report derives it from the name) and ``version=``
NAME = Name()


def param_count(opts: Mapping[str, str], key: str = "params") -> int | None:
    """``opts[key]`` by :data:`PARAMS` (``None`` when absent)."""
    return model_option(opts, key, PARAMS, None)


def family(opts: Mapping[str, str], key: str = "family") -> str | None:
    """``opts[key]`` by :data:`NAME` (``None`` when absent)."""
    return model_option(opts, key, NAME, None)
