"""A backend stated once: its spec prefix, its options (typed, with default and help), the decide modes
it offers and its factory.

The registry reads a :class:`Declaration` to refuse unknown options and to parse the known ones
before the factory runs; ``scripts/option_docs.py`` writes the backend's option table in the docs
from it. A plug-in declares its backend the same way (docs/backends.md, "Adding a backend"), so
nothing about a backend is written in two places.

What the factory returns, and how it is wrapped (:meth:`Declaration.build`):

* under ``decide=scores``, a :class:`~pfr.models.base.Backend`, used as it is;
* under ``decide=generate|choice`` (the parsed options' ``decide`` is then the
  :class:`~pfr.models.decide.Decoding`), either a :class:`~pfr.models.lm.core.LetterLM` (``hf:``,
  ``llamacpp:``), wrapped in :class:`~pfr.models.generating.GeneratingLM`, which completes the
  scoring prompt's tokens, or any other engine that completes text
  (:class:`~pfr.models.generating.TextEngine`: ``vllm:``, ``openai:``, plug-ins), wrapped in
  :class:`~pfr.models.generating.Generating`. Either way :func:`pfr.models.decide.decision` reads the
  answers, so no backend has a decide path of its own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pfr.errors import ModelError
from pfr.models.base import check_known
from pfr.models.decide import DECIDE_OPTIONS, MODES, Decoding, decoding_from, mode_of
from pfr.models.options import model_option
from pfr.options import Rule

__all__ = ["DECIDE_HELP", "Declaration", "Option", "resolve"]

_DECODING = Decoding("generate")
#: the docs' rows for the options every backend offering ``generate`` or ``choice`` takes
#: (:data:`pfr.models.decide.DECIDE_OPTIONS`, parsed by :func:`pfr.models.decide.decoding_from`)
DECIDE_HELP: dict[str, tuple[str, str]] = {
    "decide": ("scores", "how the backend decides: `scores`, or the modes it offers (`generate`, `choice`)"),
    "max_tokens": (str(_DECODING.max_tokens), "most tokens a generated answer may have"),
    "seed": (str(_DECODING.seed), "sampling seed of a generated answer"),
    "gen_temperature": (f"{_DECODING.temperature:g}", "sampling temperature of a generated answer (0: greedy)"),
}


@dataclass(frozen=True)
class Option:
    """One ``--model-opt`` key: parsed by ``rule`` (:mod:`pfr.options`; ``None`` keeps the text as given),
    ``default`` when absent; ``help`` is its meaning in the docs' table.

    ``shown`` is the default as the docs word it when the factory settles it (``None`` here: it depends
    on the model or the machine); ``modes`` are the decide modes the option applies to (empty: all),
    so that an option that would change nothing under another mode is refused rather than ignored.
    """

    name: str
    default: Any
    help: str
    rule: Rule | None = None
    shown: str | None = None
    modes: tuple[str, ...] = ()

    def parse(self, opts: Mapping[str, str]) -> Any:
        """The typed value of this option in ``opts`` (a bad value is one :class:`ModelError` line)."""
        if self.rule is None:
            return opts.get(self.name, self.default)
        return model_option(opts, self.name, self.rule, self.default)

    @property
    def shown_default(self) -> str:
        """The default as the docs show it: ``shown``, else ``—`` for none, ``on``/``off``, ``1`` for ``1.0``."""
        d = self.default
        if self.shown is not None:
            return self.shown
        if d is None:
            return "—"
        if isinstance(d, bool):
            return "on" if d else "off"
        if isinstance(d, float) and d.is_integer():
            return str(int(d))
        return str(d)


#: a factory: (the spec after ``PREFIX:``, the parsed options by name) → what :meth:`Declaration.build` wraps
Factory = Callable[[str, Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Declaration:
    """A backend: ``--model PREFIX:REST`` builds ``factory(REST, parsed options)``.

    ``decides`` are the modes it offers (:data:`pfr.models.decide.MODES`); its first mode is the
    default. A backend offering ``generate`` or ``choice`` takes the options of
    :data:`~pfr.models.decide.DECIDE_OPTIONS` too; its factory finds the
    :class:`~pfr.models.decide.Decoding` asked for under ``decide`` in the parsed options (``None``
    for ``scores``), and the module docstring says what it returns for each mode. ``decide_help`` words
    those options' rows for this backend where the general wording says too little;
    ``max_tokens`` is the default of ``max_tokens`` per mode where it is not 8 (an answer in JSON
    needs room). ``factory`` may be ``"module:function"``, imported on first use. ``raw``: a factory
    registered without a declaration (:func:`pfr.models.registry.register`), which takes the option
    strings as given and checks them itself.
    """

    prefix: str
    factory: Factory | str
    options: tuple[Option, ...] = ()
    decides: tuple[str, ...] = ("scores",)
    decide_help: Mapping[str, str] = field(default_factory=dict)
    max_tokens: Mapping[str, int] = field(default_factory=dict)
    raw: bool = False

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

    def mode(self, opts: Mapping[str, str]) -> str:
        """The decide mode ``opts`` ask for (the first declared when absent), one of :data:`MODES`."""
        return mode_of({"decide": opts.get("decide", self.decides[0])})

    def parse(self, opts: Mapping[str, str]) -> dict[str, Any]:
        """Unknown keys refused in one line naming the known ones; the backend's own options typed, and
        ``decide`` the :class:`Decoding` asked for (``None``: scores) when it offers generate or choice."""
        mode = self.mode(opts)
        if mode not in self.decides:
            raise ModelError(
                f"model option decide={mode} is not available for {self.prefix}: (use {' or '.join(self.decides)})"
            )
        given = {k: v for k, v in opts.items() if k != "decide" or self.generates}
        if self.raw:
            return given
        check_known(given, self.names(), self.prefix)
        for o in self.options:
            if o.modes and o.name in opts and mode not in o.modes:
                only = " or ".join(f"decide={m}" for m in o.modes)
                raise ModelError(f"model option {o.name} applies to {only} only (not decide={mode})")
        out = {o.name: o.parse(opts) for o in self.options}
        if self.generates:
            asked = {**given, "decide": mode}
            out["decide"] = decoding_from(asked, f"{self.prefix}:", self.generates, self.max_tokens.get(mode))
        return out

    def build(self, rest: str, opts: Mapping[str, str]) -> Any:
        """The backend for ``PREFIX:rest`` with ``opts``: parsed, made by the factory and, under
        ``decide=generate|choice``, wrapped as the module docstring says."""
        parsed = self.parse(opts)
        factory = resolve(self.factory) if isinstance(self.factory, str) else self.factory
        made = factory(rest, parsed)
        decoding = None if self.raw else parsed.get("decide")
        if decoding is None:
            return made
        from pfr.models.generating import Generating, GeneratingLM
        from pfr.models.lm.core import LetterLM

        if isinstance(made, LetterLM):
            return GeneratingLM(made, decoding)
        return Generating(made, decoding, backend=self.prefix, name=rest or self.prefix)

    def rows(self) -> list[tuple[str, str, str]]:
        """``(name, default, help)`` per option, the decide options last: the docs' option table."""
        rows = [(o.name, o.shown_default, o.help + _only(o.modes)) for o in self.options]
        own = {o.name for o in self.options}
        for k, (default, text) in DECIDE_HELP.items():
            if not self.generates or k in own:
                continue
            if k == "decide":
                default = self.decides[0]
            elif k == "max_tokens" and self.max_tokens:
                default += "".join(f" ({n} with `decide={m}`)" for m, n in self.max_tokens.items())
            rows.append((k, default, self.decide_help.get(k, text)))
        return rows


def _only(modes: tuple[str, ...]) -> str:
    return f" ({' or '.join(f'`decide={m}`' for m in modes)} only)" if modes else ""


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
