"""Errors a user can act on.

Every error that comes from bad input (a file, a field, a model spec, a server) is a
:class:`PfrError`; the CLI prints its one-line message and exits with code 2, without a
traceback. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class PfrError(Exception):
    """A problem with the user's input or environment, described in one line."""

    exit_code = 2


class DataError(PfrError):
    """A dataset file, row or field is missing or malformed."""


class DesignError(PfrError):
    """A request cannot be built as configured (too few categories, bad factor)."""


class ModelError(PfrError):
    """A model cannot be loaded or cannot score a request as configured."""


class StoreError(PfrError):
    """A results store is missing, unreadable or belongs to another study."""


class OutputError(PfrError):
    """An output file or folder cannot be written (permissions, a full disk, a folder in the way)."""
