"""One parser for every numeric or enumerated option, wherever it comes from.

A command-line flag, a ``--model-opt key=value``, a study-file key, a Python API argument and an
environment variable all go through a :class:`Rule`, so a bad value gives the same one-line
message everywhere: the option's name, the value given and what is allowed
(``temperature=nan: must be a finite number > 0``). The message is an :class:`OptionError`, which
the command line prints without a traceback (exit 2).

Values may arrive as text (a flag, an environment variable, ``--model-opt``) or typed (TOML, Python);
a bool is never taken for a number, and ``nan``/``inf`` only where a rule allows them (none does).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pfr.errors import PfrError


class OptionError(PfrError):
    """An option's value is not one its rule allows."""


def shown(value: object) -> str:
    """The value as the user typed it: bare when that is unambiguous, quoted otherwise."""
    if isinstance(value, str) and value.isprintable() and value.split() == [value] and "=" not in value:
        return value
    return repr(value)


def _fail(name: str, value: object, allowed: str) -> OptionError:
    return OptionError(f"{name}={shown(value)}: must be {allowed}")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


class Rule(Protocol):
    """What one option allows: ``parse`` returns the typed value or raises :class:`OptionError`."""

    def allowed(self) -> str: ...

    def parse(self, name: str, value: object) -> Any: ...


@dataclass(frozen=True)
class Number:
    """A finite number (``whole``: an integer) within optional bounds; ``open_*`` excludes the bound."""

    whole: bool = False
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False

    def allowed(self) -> str:
        kind = "a whole number" if self.whole else "a finite number"
        lo, hi = self.low, self.high
        if lo is not None and hi is not None and not self.open_low and not self.open_high:
            return f"{kind} from {_num(lo)} to {_num(hi)}"
        parts = []
        if lo is not None:
            parts.append(f"{'>' if self.open_low else '>='} {_num(lo)}")
        if hi is not None:
            parts.append(f"{'<' if self.open_high else '<='} {_num(hi)}")
        return f"{kind} {' and '.join(parts)}".rstrip()

    def parse(self, name: str, value: object) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise _fail(name, value, self.allowed())
        x: float | int
        if isinstance(value, str):
            text = value.strip()
            try:
                x = int(text) if self.whole else float(text)
            except ValueError:
                raise _fail(name, value, self.allowed()) from None
        elif self.whole and isinstance(value, float):
            if not value.is_integer():
                raise _fail(name, value, self.allowed())
            x = int(value)
        else:
            x = value if self.whole else float(value)
        if not math.isfinite(x):
            raise _fail(name, value, self.allowed())
        lo, hi = self.low, self.high
        if lo is not None and (x <= lo if self.open_low else x < lo):
            raise _fail(name, value, self.allowed())
        if hi is not None and (x >= hi if self.open_high else x > hi):
            raise _fail(name, value, self.allowed())
        return x


@dataclass(frozen=True)
class OneOf:
    """One of a fixed set of words (compared as given, after trimming spaces)."""

    values: tuple[str, ...]

    def allowed(self) -> str:
        return "one of " + ", ".join(self.values)

    def parse(self, name: str, value: object) -> str:
        if not isinstance(value, str) or value.strip() not in self.values:
            raise _fail(name, value, self.allowed())
        return value.strip()


@dataclass(frozen=True)
class Switch:
    """on/off: ``on true 1 yes`` or ``off false 0 no`` in any case, or a bool."""

    def allowed(self) -> str:
        return "on or off (true/false, yes/no, 1/0)"

    def parse(self, name: str, value: object) -> bool:
        if isinstance(value, bool):
            return value
        v = str(value).strip().lower() if isinstance(value, (str, int)) else None
        if v in ("on", "true", "1", "yes"):
            return True
        if v in ("off", "false", "0", "no"):
            return False
        raise _fail(name, value, self.allowed())


POSITIVE = Number(low=0, open_low=True)
POSITIVE_INT = Number(whole=True, low=1)
WHOLE = Number(whole=True)
TEMPERATURE = POSITIVE
SEED = Number(whole=True, low=0, high=2**32 - 1)
PROBABILITY_OPEN = Number(low=0, high=1, open_low=True, open_high=True)
#: bootstrap draws: at least 1; the memory they need is checked separately (:func:`check_memory`)
DRAWS = Number(whole=True, low=1)
#: the default false-fallback budget α of the one-sided threshold calibration (``pfr thresholds``, studies)
ALPHA = 0.05
#: the family-wise error rate of the Holm correction over a report's tests (its reject flags); a
#: different quantity from :data:`ALPHA` that happens to share its value
FAMILY_ALPHA = 0.05


def parse(name: str, value: object, rule: Rule) -> Any:
    """``rule.parse(name, value)``: the typed value, or an :class:`OptionError` naming ``name``."""
    return rule.parse(name, value)


def option(opts: Mapping[str, object], key: str, rule: Rule, default: Any) -> Any:
    """``opts[key]`` parsed by ``rule`` (``default``, unparsed, when absent): for ``--model-opt`` tables."""
    value = opts.get(key)
    return default if value is None else rule.parse(key, value)


def env(name: str, rule: Rule, default: Any = None) -> Any:
    """The environment variable ``name`` parsed by ``rule`` (``default`` when unset or empty)."""
    value = os.environ.get(name)
    return default if value is None or not value.strip() else rule.parse(name, value)


#: environment variable that caps the memory a computation may ask for (GiB); default: what is free
MEMORY_ENV = "PFR_MEMORY_GIB"
_GIB = 1 << 30


def available_memory() -> int | None:
    """Bytes of memory this process may use: ``$PFR_MEMORY_GIB`` if set, else the free physical memory."""
    cap = env(MEMORY_ENV, POSITIVE)
    if cap is not None:
        return int(cap * _GIB)
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return None


def check_memory(what: str, need: float) -> None:
    """Refuse up front a computation that needs about ``need`` bytes when less is available."""
    have = available_memory()
    if have is not None and need > have:
        raise OptionError(
            f"{what} needs about {need / _GIB:.1f} GiB of memory and {have / _GIB:.1f} GiB is available "
            f"(lower it, or set {MEMORY_ENV} to allow more)"
        )


def choices(values: Sequence[str]) -> OneOf:
    """A :class:`OneOf` rule over ``values``."""
    return OneOf(tuple(values))
