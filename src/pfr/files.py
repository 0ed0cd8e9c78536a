"""Output files written whole or not at all: every file pfr writes goes through :func:`atomic_write`.

A shared helper below the layers (only :mod:`pfr.errors` is under it), so that the report, the
studies and the API write files the same way.
"""

from __future__ import annotations

import errno
import os
import secrets
import sys
from collections.abc import Iterable
from pathlib import Path

from pfr.errors import OutputError


def in_existing_folder(path: str | os.PathLike[str], option: str) -> None:
    """A file the user names on the command line goes into a folder that exists: a mistyped folder
    stops the command before any work, instead of a new folder where nobody looks (``-``: stdout)."""
    if str(path) == "-":
        return
    folder = Path(path).parent
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{option} {path}: {folder} is not a folder")
    if not folder.is_dir():
        raise OutputError(f"{option} {path}: the folder {folder} does not exist; create it first")


def atomic_write(path: str | os.PathLike[str], lines: Iterable[str]) -> None:
    """Write lines to ``path`` through a temporary file and a rename: never half a file.

    ``-`` writes to standard output. A folder that cannot be created or written, or a full disk,
    is a :class:`~pfr.errors.OutputError` naming the path (and no temporary file is left behind).
    """
    if str(path) == "-":
        for line in lines:
            sys.stdout.write(line)
            sys.stdout.write("\n")
        sys.stdout.flush()
        return
    dest = Path(path)
    if dest.is_dir():
        raise OutputError(f"{dest}: is a folder; give a file name to write")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{dest.parent}: cannot create the output folder ({exc.strerror or exc})") from None
    # os.open with mode 0o666 (not mkstemp's 0o600) so the file gets the user's umask like any other
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise OutputError(f"{dest}: cannot write here ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            for line in lines:
                f.write(line)
                f.write("\n")
        os.replace(tmp, dest)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        full = " (the disk is full)" if exc.errno == errno.ENOSPC else ""
        raise OutputError(f"{dest}: cannot write{full}: {exc.strerror or exc}; nothing was written") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
