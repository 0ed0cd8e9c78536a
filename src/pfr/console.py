"""Output that any terminal can print.

Reports use a few non-ASCII signs (``−``, ``×``, ``Δ``, ``…``, ``τ``). A console whose encoding lacks
them (cp1252 on Windows, ``PYTHONIOENCODING=ascii``, a C locale) would make Python raise
``UnicodeEncodeError`` halfway through a report. :func:`printable_streams` gives stdout and stderr
an error handler that writes an ASCII stand-in instead: ``-``, ``x``, ``D``, ``.`` (one character
for the signs that sit in table columns, so they stay aligned), ``tau``, ``alpha``; an accented
letter loses its accent; anything else becomes ``?``. Files written with ``--out`` stay UTF-8.
"""

from __future__ import annotations

import codecs
import sys
import unicodedata

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
