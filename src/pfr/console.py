"""Output that any terminal can print.

Reports use a few non-ASCII signs (``−``, ``×``, ``Δ``, ``…``, ``τ``). A console whose encoding lacks
them (cp1252 on Windows, ``PYTHONIOENCODING=ascii``, a C locale) would make Python raise
``UnicodeEncodeError`` halfway through a report. :func:`printable_streams` gives stdout and stderr
an error handler that writes an ASCII stand-in instead: ``-``, ``x``, ``D``, ``.`` (one character
for the signs that sit in table columns, so they stay aligned), ``tau``, ``alpha``; an accented
letter loses its accent; anything else becomes ``?``. Files written with ``--out`` stay UTF-8.

:func:`no_library_bars` keeps the libraries a backend uses from drawing their own progress bars
while pfr's progress is off (``--no-progress``).
"""

from __future__ import annotations

import codecs
import contextlib
import importlib
import os
import sys
import unicodedata
from collections.abc import Iterator
from typing import Any

HANDLER = "pfr-ascii"

_ASCII = {
    "\u2212": "-", "\u2013": "-", "\u2014": "--", "\u00d7": "x", "\u0394": "D", "\u03b4": "d",
    "\u2026": ".", "\u03c4": "tau", "\u03b1": "alpha", "\u00b1": "+/-", "\u2264": "<=", "\u2265": ">=",
    "\u2260": "!=", "\u2248": "~", "\u2192": "->", "\u2190": "<-", "\u00b7": ".", "\u2022": "*",
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " ", "\u2009": " ", "\u202f": " ",
    "\u2713": "v", "\u2717": "x", "\u221e": "inf", "\u00b2": "2", "\u2032": "'", "\u2502": "|", "\u2500": "-",
    "\u2588": "#", "\u2591": ".", "\u2501": "-", "\u00b5": "u", "\u03bc": "u", "\u2030": "permille",
}  # fmt: skip


def ascii_stand_in(ch: str) -> str:
    """An ASCII stand-in for one character (``?`` when there is none)."""
    if ch in _ASCII:
        return _ASCII[ch]
    plain = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode("ascii")
    return plain or "?"


def _handle(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeEncodeError):
        raise err
    return "".join(ascii_stand_in(ch) for ch in err.object[err.start : err.end]), err.end


codecs.register_error(HANDLER, _handle)


def printable_streams() -> None:
    """Let stdout and stderr print any text: unencodable characters get an ASCII stand-in."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None or getattr(stream, "errors", "strict") not in ("strict", None):
            continue
        try:
            "\u2212\u0394\u00d7\u2026".encode(stream.encoding or "ascii")
        except (UnicodeEncodeError, LookupError):
            reconfigure(errors=HANDLER)


#: the environment switch of tqdm's bars, for the processes a backend starts meanwhile (servers, workers)
_BAR_SWITCHES = {"TQDM_DISABLE": "1"}


@contextlib.contextmanager
def no_library_bars(enabled: bool = True) -> Iterator[None]:
    """While it lasts, no tqdm progress bar draws: transformers' "Loading weights", the GGUF
    conversion's, huggingface_hub's downloads and sentence-transformers' batches are all tqdm, and
    under ``--no-progress`` a log holds pfr's own lines only. Every bar created meanwhile is made
    with ``disable=True`` (tqdm has no global switch); all is restored on leaving. Without tqdm
    installed there is nothing to silence."""
    if not enabled:
        yield
        return
    try:  # imported before the switches are set: tqdm reads TQDM_* once, when it is imported
        std: Any = importlib.import_module("tqdm.std")
    except ImportError:
        std = None
    saved_env = {k: os.environ.get(k) for k in _BAR_SWITCHES}
    os.environ.update(_BAR_SWITCHES)
    cls = std.tqdm if std is not None else None
    own_init = cls.__dict__["__init__"] if cls is not None else None
    if cls is not None:
        init = cls.__init__

        def disabled(self: Any, *args: Any, **kwargs: Any) -> None:
            if len(args) < 10:  # ``disable`` is the tenth parameter; nobody passes it by position
                kwargs["disable"] = True
            init(self, *args, **kwargs)

        cls.__init__ = disabled
    try:
        yield
    finally:
        if cls is not None:
            cls.__init__ = own_init
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
