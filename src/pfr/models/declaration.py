"""A backend stated once: its spec prefix, its options (typed, with default and help), the decide modes
it offers and its factory.

The registry reads a :class:`Declaration` to refuse unknown options, to parse the known ones before
the factory runs and to wrap an engine that only completes text for ``decide=generate|choice``
(:class:`pfr.models.generating.Generating`); ``scripts/option_docs.py`` writes the backend's option
table in the docs from it. A plug-in declares its backend the same way (docs/backends.md, "Adding a
backend"), so nothing about a backend is written in two places.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pfr.errors import ModelError
from pfr.models.base import check_known
from pfr.models.decide import DECIDE_OPTIONS, MODES
from pfr.models.options import model_option
from pfr.options import Rule

__all__ = ["DECIDE_HELP", "Declaration", "Option", "resolve"]

#: the docs' rows for the options every backend offering ``generate`` or ``choice`` takes
#: (:data:`pfr.models.decide.DECIDE_OPTIONS`, parsed by :func:`pfr.models.decide.decoding_from`)
DECIDE_HELP: dict[str, tuple[str, str]] = {
    "decide": ("scores", "how the backend decides: `scores`, or the modes it offers (`generate`, `choice`)"),
    "max_tokens": ("8", "most tokens a generated answer may have"),
    "seed": ("0", "sampling seed of a generated answer"),
    "gen_temperature": ("0", "sampling temperature of a generated answer (0: greedy)"),
}


@dataclass(frozen=True)
class Option:
    """One ``--model-opt`` key: parsed by ``rule`` (:mod:`pfr.options`; ``None`` keeps the text as given),
    ``default`` when absent; ``help`` is its meaning in the docs' table."""

    name: str
    default: Any
    help: str
    rule: Rule | None = None

    def parse(self, opts: Mapping[str, str]) -> Any:
        """The typed value of this option in ``opts`` (a bad value is one :class:`ModelError` line)."""
        if self.rule is None:
            return opts.get(self.name, self.default)
        return model_option(opts, self.name, self.rule, self.default)

    @property
    def shown_default(self) -> str:
        """The default as the docs show it: ``—`` for none, ``on``/``off``, ``1`` for ``1.0``."""
        d = self.default
        if d is None:
            return "—"
        if isinstance(d, bool):
            return "on" if d else "off"
        if isinstance(d, float) and d.is_integer():
            return str(int(d))
        return str(d)


#: a factory: (the spec after ``PREFIX:``, the parsed options by name) → a Backend, or an engine that
#: completes text (:class:`pfr.models.generating.TextEngine`) for a backend offering only generate/choice
Factory = Callable[[str, Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Declaration:
    """A backend: ``--model PREFIX:REST`` builds ``factory(REST, parsed options)``.

    ``decides`` are the modes it offers (:data:`pfr.models.decide.MODES`); its first mode is the
    default. ``scores`` means the factory's object is a :class:`~pfr.models.base.Backend`; ``generate``
    and ``choice`` mean it completes text (``complete``, and ``choose`` for ``choice``) and the registry
    wraps it so that :func:`pfr.models.decide.decision` reads its answers. ``factory`` may be
    ``"module:function"``, imported on first use.
    """

    prefix: str
    factory: Factory | str
    options: tuple[Option, ...] = ()
    decides: tuple[str, ...] = ("scores",)

    def __post_init__(self) -> None:
        if not self.prefix or not self.prefix.replace("-", "").replace("_", "").isalnum():
            raise ModelError(f"backend prefix {self.prefix!r}: use letters, digits, - and _")
        bad = [m for m in self.decides if m not in MODES]
        if not self.decides or bad:
            raise ModelError(f"backend {self.prefix}: decides={self.decides!r}: use {', '.join(MODES)}")

    @property
    def generates(self) -> tuple[str, ...]:
        """The modes besides ``scores`` (what ``decide=`` may name besides the default)."""
        return tuple(m for m in self.decides if m != "scores")

    def names(self) -> tuple[str, ...]:
        """Every ``--model-opt`` key the backend takes, in table order."""
        own = tuple(o.name for o in self.options)
        return own + tuple(k for k in DECIDE_OPTIONS if k not in own) if self.generates else own

    def parse(self, opts: Mapping[str, str]) -> dict[str, Any]:
        """Unknown keys refused in one line naming the known ones; the backend's own options typed."""
        check_known(opts, self.names(), self.prefix)
        return {o.name: o.parse(opts) for o in self.options}

    def build(self, rest: str, opts: Mapping[str, str]) -> Any:
        """The factory's object for ``PREFIX:rest`` with ``opts`` parsed (no wrapping: the registry's)."""
        factory = resolve(self.factory) if isinstance(self.factory, str) else self.factory
        return factory(rest, self.parse(opts))

    def rows(self) -> list[tuple[str, str, str]]:
        """``(name, default, help)`` per option, the decide options last: the docs' option table."""
        rows = [(o.name, o.shown_default, o.help) for o in self.options]
        decide = [(k, self.decides[0] if k == "decide" else d, h) for k, (d, h) in DECIDE_HELP.items()]
        return rows + [row for row in decide if row[0] in self.names()[len(self.options) :]]


def resolve(target: str) -> Any:
    """The object at ``"module:attribute"``, imported now; a missing dependency is one line."""
    module, _, attr = target.partition(":")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise ModelError(
            f"the backend in {module} needs packages that are not installed ({exc.name or exc}); "
            "see docs/backends.md for the extra to install"
        ) from None
    return getattr(mod, attr)
