"""The one rule for an invalid answer (docs/method.md §6.1).

An answer that names no option (unparseable generated text, a label that is no option, a letter and
a label that name different options) is stored as choice :data:`INVALID`. It is *no option*: never
correct, never a fallback pick, and never equal to another answer, invalid or not. Every metric,
test, table, verdict and gate reads choices through these functions, so that no consumer compares
a raw ``-1`` with an option index (or reads ``options[-1]``).

The functions take an option index or an array of them and return a bool or a bool array (NumPy
is imported on first use: building requests does not need it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

#: the stored choice of an answer that names no option
INVALID = -1


def answered(choices: Any) -> np.ndarray:
    """Whether each choice names an option (an index ≥ 0); ``False`` for an invalid answer."""
    import numpy as np

    return np.asarray(choices) >= 0


def is_invalid(choices: Any) -> np.ndarray:
    """Whether each choice is an invalid answer (names no option)."""
    return ~answered(choices)


def picks(choices: Any, option: Any) -> np.ndarray:
    """Whether each choice picks ``option`` (the expected option: correct; the fallback: a fallback
    pick). An invalid answer picks nothing, even where ``option`` is itself no index (``-1``)."""
    import numpy as np

    return answered(choices) & (np.asarray(choices) == np.asarray(option))


def same(a: Any, b: Any) -> np.ndarray:
    """Whether two answers are the same decision: both name an option, and the same one. Two invalid
    answers are never the same decision (a text invalid under U and C changed its decision)."""
    import numpy as np

    return answered(a) & answered(b) & (np.asarray(a) == np.asarray(b))


__all__ = ["INVALID", "answered", "is_invalid", "picks", "same"]
