"""Model specs → backends. Heavy backends are imported only when asked for.

Spec forms: ``baseline:KIND``, ``python:PATH_OR_MODULE:FUNCTION``, ``hf:ID_OR_PATH``,
``llamacpp:PATH.gguf``, ``openai:MODEL@BASE_URL``, ``vllm:ID_OR_PATH``, ``http:URL``, and the presets
``smollm2-135m``, ``gemma3-270m``, ``qwen2.5-coder-1.5b``, ``minilm-router``. Backend options come as ``key=value``
strings (``--model-opt``).

A backend with a :class:`~pfr.models.declaration.Declaration` (``baseline:``, ``router:``, ``python:``,
``http:``, every plug-in) is built by :func:`build`: options checked and typed from the declaration,
and an engine that only completes text wrapped in :class:`~pfr.models.generating.Generating` for
``decide=generate|choice``.
Plug-ins are found through the entry-point group ``pfr.backends`` (the entry point's name is the spec
prefix, its value ``module:DECLARATION``), read only when a spec names a prefix not built in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from pfr.errors import ModelError
from pfr.models.base import Backend, check_known
from pfr.models.declaration import Declaration, resolve

Factory = Callable[[str, Mapping[str, str]], Backend]
#: the entry-point group plug-in backends declare themselves in (docs/backends.md, "Adding a backend")
ENTRY_POINTS = "pfr.backends"

#: prefix → its :class:`Declaration`, or the "module:ATTRIBUTE" it is imported from on first use.
_DECLARED: dict[str, Declaration | str] = {
    "baseline": "pfr.models.simple.baselines:BACKEND",
    "router": "pfr.models.simple.router:BACKEND",
    "python": "pfr.models.simple.callable:BACKEND",
    "http": "pfr.models.http.backend:BACKEND",
}

#: prefix → "module:function" of a factory taking (rest of spec, options): the backends not yet declared.
_FACTORIES: dict[str, str] = {
    "hf": "pfr.models.hf:from_spec",
    "llamacpp": "pfr.models.llamacpp:from_spec",
    "openai": "pfr.models.openai:from_spec",
    "vllm": "pfr.models.vllm:from_spec",
}

#: prefix → what ``--model-opt decide=`` may be besides ``scores`` (:mod:`pfr.models.decide`); a backend
#: listed here receives ``decide`` in its options and builds the generating form itself (``openai:``
#: goes to :mod:`pfr.models.openai.decider`; ``hf:`` and ``llamacpp:`` wrap themselves in
#: :class:`pfr.models.generating.GeneratingLM`). A declared backend states its modes in its declaration.
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


def register(backend: Declaration | str, factory: str | None = None) -> None:
    """Add a backend: a :class:`Declaration`, or a prefix and ``"module:function"`` (a factory taking the
    rest of the spec and the raw options, or a declaration), imported on first use."""
    if isinstance(backend, Declaration):
        _FACTORIES.pop(backend.prefix, None)
        _DECLARED[backend.prefix] = backend
    elif factory is None:
        raise ModelError(f"register({backend!r}) needs a factory ('module:function')")
    else:
        _DECLARED.pop(backend, None)
        _FACTORIES[backend] = factory


def declaration(prefix: str) -> Declaration | None:
    """The declaration of a built-in or registered backend (``None`` for one not declared); a plug-in's
    is read from its entry point."""
    target = _DECLARED.get(prefix)
    if target is None:
        return _plugin(prefix) if prefix not in _FACTORIES else None
    return _checked(prefix, resolve(target) if isinstance(target, str) else target, target)


def _checked(prefix: str, value: Any, where: object) -> Declaration:
    if not isinstance(value, Declaration) or value.prefix != prefix:
        raise ModelError(f"{where}: the {prefix}: backend must be a pfr Declaration with prefix {prefix!r}")
    return value


def _plugins() -> dict[str, Any]:
    """Name → entry point of every installed plug-in backend (metadata only: nothing is imported)."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINTS)}


def _plugin(prefix: str) -> Declaration | None:
    """The plug-in declaring ``prefix``, loaded now; a plug-in that fails to load is one line naming it."""
    ep = _plugins().get(prefix)
    if ep is None:
        return None
    dist = getattr(getattr(ep, "dist", None), "name", None) or "an unknown distribution"
    where = f"plug-in backend {prefix!r} ({ENTRY_POINTS} entry point {ep.value!r} of {dist})"
    try:
        value = ep.load()
    except Exception as exc:  # a plug-in's import may fail in any way; it must not take pfr down with a traceback
        raise ModelError(f"{where} cannot be loaded: {type(exc).__name__}: {exc}".splitlines()[0]) from None
    return _checked(prefix, value, where)


def build(decl: Declaration, rest: str, opts: Mapping[str, str]) -> Backend:
    """``decl``'s backend for ``PREFIX:rest``: options checked and typed, ``decide`` applied.

    A mode besides ``scores`` wraps the factory's engine in :class:`~pfr.models.generating.Generating`,
    so a backend states its modes once, in its declaration.
    """
    from pfr.models.decide import decoding_from, mode_of

    opts = dict(opts)
    mode = mode_of({"decide": opts.get("decide", decl.decides[0])})
    if mode == "scores" and mode not in decl.decides:
        raise ModelError(
            f"model option decide=scores is not available for {decl.prefix}: (use {' or '.join(decl.decides)})"
        )
    if mode not in decl.decides:
        _refuse(mode, decl.prefix)
    if mode == "scores":
        opts.pop("decide", None)
    else:
        opts["decide"] = mode
    check_known(opts, decl.names(), decl.prefix)
    decoding = decoding_from(opts, f"{decl.prefix}:", decl.generates) if decl.generates else None
    engine = decl.build(rest, opts)
    if decoding is None:
        return engine
    from pfr.models.generating import Generating

    return Generating(engine, decoding, backend=decl.prefix, name=rest or decl.prefix)


def _refuse(mode: str, prefix: str) -> NoReturn:
    declared = {p: d.decides for p, d in _DECLARED.items() if isinstance(d, Declaration)}
    able = [f"{p}:" for p, modes in {**DECIDES, **declared}.items() if mode in modes]
    raise ModelError(
        f"model option decide={mode} is not available for {prefix}: (it is for {', '.join(able) or 'none'})"
    )


def load_model(spec: str, options: Mapping[str, Any] | None = None) -> Backend:
    """The backend for ``spec`` (see module docstring); raises :class:`ModelError` for a bad spec."""
    opts = {k: str(v) for k, v in (options or {}).items()}
    if spec in PRESETS:
        prefix, rest = PRESETS[spec]
    else:
        prefix, sep, rest = spec.partition(":")
        if not sep or not prefix:
            _unknown(spec)
    if prefix not in _FACTORIES:
        decl = declaration(prefix)
        if decl is None:
            _unknown(spec)
        return build(decl, rest, opts)
    if "decide" in opts:  # scores (the default), generate or choice: pfr.models.decide
        from pfr.models.decide import mode_of

        mode = mode_of(opts)
        if mode == "scores":
            opts.pop("decide")
        elif mode not in DECIDES.get(prefix, ()):
            _refuse(mode, prefix)
        elif prefix == "openai":
            from pfr.models.openai.decider import from_openai_spec

            return from_openai_spec(rest, opts)
    made = resolve(_FACTORIES[prefix])
    if isinstance(made, Declaration):  # register("mine", "module:DECLARATION")
        return build(_checked(prefix, made, _FACTORIES[prefix]), rest, opts)
    factory: Factory = made
    return factory(rest, opts)


def _unknown(spec: str) -> NoReturn:
    prefixes = dict.fromkeys([*_DECLARED, *_FACTORIES, *_plugins()])
    known = ", ".join([*(f"{p}:…" for p in prefixes), *PRESETS])
    raise ModelError(f"unknown model spec {spec!r} (known: {known})")


def safe_spec(spec: str) -> str:
    """``spec`` as messages and labels may show it: the URL of an ``http:`` or ``openai:`` spec without
    user info and with every query value as ``***`` (:func:`pfr.models.http.client.safe_url`)."""
    prefix, _, rest = spec.partition(":")
    if prefix == "http" and rest.startswith(("http://", "https://")):
        from pfr.models.http.client import safe_url

        return f"http:{safe_url(rest)}"
    if prefix == "openai" and "@http" in rest:
        from pfr.models.openai.backend import safe_spec as openai_safe_spec

        return f"openai:{openai_safe_spec(rest)}"
    return spec


def parse_options(pairs: list[str] | None) -> dict[str, str]:
    """``["key=value", ...]`` → dict, with a clear error for a malformed pair."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ModelError(f"model option {pair!r} must be key=value")
        out[key.strip()] = value.strip()
    return out
