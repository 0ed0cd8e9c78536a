"""Model specs → backends. Heavy backends are imported only when asked for.

Spec forms: ``baseline:KIND``, ``python:PATH_OR_MODULE:FUNCTION``, ``hf:ID_OR_PATH``,
``llamacpp:PATH.gguf``, ``openai:MODEL@BASE_URL``, ``vllm:ID_OR_PATH``, ``http:URL``, and the presets
``smollm2-135m``, ``gemma3-270m``, ``qwen2.5-coder-1.5b``, ``minilm-router``. Backend options come as ``key=value``
strings (``--model-opt``).

Every backend has a :class:`~pfr.models.declaration.Declaration`, in its own module, and is built by
:func:`build`: options checked and typed from the declaration, the factory's object wrapped for
``decide=generate|choice`` (:meth:`Declaration.build`).
Plug-ins are found through the entry-point group ``pfr.backends`` (the entry point's name is the spec
prefix, its value ``module:DECLARATION``), read only when a spec names a prefix not built in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from pfr.errors import ModelError
from pfr.models.base import Backend
from pfr.models.declaration import Declaration, resolve

#: the entry-point group plug-in backends declare themselves in (docs/backends.md, "Adding a backend")
ENTRY_POINTS = "pfr.backends"

#: prefix → its :class:`Declaration`, or the "module:ATTRIBUTE" it is imported from on first use (for a
#: backend added by ``register(prefix, "module:function")``, a factory taking the raw option strings).
_DECLARED: dict[str, Declaration | str] = {
    "baseline": "pfr.models.simple.baselines:BACKEND",
    "router": "pfr.models.simple.router:BACKEND",
    "python": "pfr.models.simple.callable:BACKEND",
    "http": "pfr.models.http.backend:BACKEND",
    "openai": "pfr.models.openai.backend:BACKEND",
    "hf": "pfr.models.hf.backend:BACKEND",
    "llamacpp": "pfr.models.llamacpp.backend:BACKEND",
    "vllm": "pfr.models.vllm.backend:BACKEND",
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
    rest of the spec and the raw option strings, or a declaration), imported on first use."""
    if isinstance(backend, Declaration):
        _DECLARED[backend.prefix] = backend
    elif factory is None:
        raise ModelError(f"register({backend!r}) needs a factory ('module:function')")
    else:
        _DECLARED[backend] = factory


def declaration(prefix: str) -> Declaration | None:
    """The declaration of a built-in or registered backend (a registered factory gets a ``raw`` one); a
    plug-in's is read from its entry point; ``None`` for a prefix nobody declares."""
    target = _DECLARED.get(prefix)
    if target is None:
        return _plugin(prefix)
    if isinstance(target, Declaration):
        return _checked(prefix, target, target)
    made = resolve(target)
    if callable(made) and not isinstance(made, Declaration):  # register(prefix, "module:function")
        return Declaration(prefix, made, raw=True)
    return _checked(prefix, made, target)


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
    """``decl``'s backend for ``PREFIX:rest``: options checked and typed, ``decide`` applied
    (:meth:`Declaration.build`); a mode the backend does not offer is one line naming those that do."""
    mode = decl.mode(opts)
    if mode != "scores" and mode not in decl.decides:
        _refuse(mode, decl.prefix)
    return decl.build(rest, opts)


def _refuse(mode: str, prefix: str) -> NoReturn:
    """One line naming the built-in and registered backends that offer ``mode``."""
    able = []
    for p in _DECLARED:
        try:
            decl = declaration(p)
        except ModelError:  # a backend whose packages are missing offers nothing here
            continue
        if decl is not None and mode in decl.decides:
            able.append(f"{p}:")
    able_text = ", ".join(able) or "none"
    raise ModelError(f"model option decide={mode} is not available for {prefix}: (it is for {able_text})")


def load_model(spec: str, options: Mapping[str, Any] | None = None) -> Backend:
    """The backend for ``spec`` (see module docstring); raises :class:`ModelError` for a bad spec."""
    opts = {k: str(v) for k, v in (options or {}).items()}
    if spec in PRESETS:
        prefix, rest = PRESETS[spec]
    else:
        prefix, sep, rest = spec.partition(":")
        if not sep or not prefix:
            _unknown(spec)
    decl = declaration(prefix)
    if decl is None:
        _unknown(spec)
    return build(decl, rest, opts)


def _unknown(spec: str) -> NoReturn:
    prefixes = dict.fromkeys([*_DECLARED, *_plugins()])
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
