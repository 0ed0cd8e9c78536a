"""Primary U/C contrasts (docs/method.md §7): two-sided exact McNemar tests with a Holm correction.

The event of the ``A-`` test is "fallback picked on the gold-fallback request", of the ``F+``
test "fallback picked on the gold-regular request"; ``b`` counts texts with the event under U
only, ``c`` under C only. The Holm family is declared (:class:`Family`).

Both are computed here in exact arithmetic instead of calling ``scipy.stats.binomtest`` and
``statsmodels``' ``multipletests(method="holm")``: importing either costs about 1.5 s of CPU
(``scipy.stats``), most of a terminal report's time. The tests assert equality with both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import comb

import numpy as np

from pfr.options import FAMILY_ALPHA

#: tested metric → (indicator under U, indicator under C)
TESTED = {"A-": ("FU_fb", "FC_fb"), "F+": ("RU_fb", "RC_fb")}


@dataclass(frozen=True)
class McNemar:
    """One exact McNemar test; ``p_holm``/``reject`` are filled in over the report's family."""

    metric: str
    b: int
    c: int
    p: float
    p_holm: float = float("nan")
    reject: bool = False

    def as_dict(self) -> dict[str, object]:
        """``p_holm`` is ``None`` for a test outside the report's Holm family (descriptive only)."""
        p_holm = None if math.isnan(self.p_holm) else self.p_holm
        return {"metric": self.metric, "b": self.b, "c": self.c, "p": self.p, "p_holm": p_holm,
                "reject": self.reject}  # fmt: skip


def binom_two_sided_half(k: int, n: int) -> float:
    """Two-sided exact binomial p of ``k`` successes in ``n`` trials at probability 1/2.

    The distribution is symmetric, so the outcomes at most as likely as ``k`` are the two tails
    beyond ``min(k, n − k)``: ``p = min(1, 2 · P(X ≤ min(k, n − k)))`` (``scipy``'s definition).
    """
    if n == 0:
        return 1.0
    m = min(k, n - k)
    if 2 * m == n:
        return 1.0
    tail = sum(comb(n, i) for i in range(m + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


def mcnemar_exact(event_u: Sequence[bool] | np.ndarray, event_c: Sequence[bool] | np.ndarray) -> tuple[int, int, float]:
    """Discordant counts and the two-sided exact p (binomial, 1/2) of paired 0/1 outcomes."""
    u = np.asarray(event_u, dtype=bool)
    c = np.asarray(event_c, dtype=bool)
    b_only = int((u & ~c).sum())
    c_only = int((~u & c).sum())
    return b_only, c_only, binom_two_sided_half(b_only, b_only + c_only)


def holm(pvalues: Sequence[float], alpha: float = FAMILY_ALPHA) -> tuple[list[float], list[bool]]:
    """Holm step-down adjusted p-values and reject flags, as ``multipletests(method="holm")``."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = len(p)
    if m == 0:
        return [], []
    order = np.argsort(p)
    sp = p[order]
    notreject = sp > alpha / np.arange(m, 0, -1)
    first = np.flatnonzero(notreject)
    notreject[(first[0] if first.size else m) :] = True
    adjusted = np.minimum(np.maximum.accumulate(sp * np.arange(m, 0, -1)), 1.0)
    out_p = np.empty(m)
    out_r = np.empty(m, dtype=bool)
    out_p[order] = adjusted
    out_r[order] = ~notreject
    return [float(v) for v in out_p], [bool(v) for v in out_r]


def setting_tests(x: np.ndarray, columns: Sequence[str]) -> list[McNemar]:
    """The unadjusted ``A-`` and ``F+`` tests of one setting's (n × m) indicator matrix."""
    col = {c: i for i, c in enumerate(columns)}
    out = []
    for metric, (u, c) in TESTED.items():
        b, cc, p = mcnemar_exact(x[:, col[u]] > 0.5, x[:, col[c]] > 0.5)
        out.append(McNemar(metric, b, cc, p))
    return out


#: design factors a direct-form design may change (see :meth:`Family.members`)
DIRECT_FORM_FACTORS = ("k", "fallback")


def direct_form(design: str) -> bool:
    """``direct``, or a design name whose every factor is one of :data:`DIRECT_FORM_FACTORS`."""
    if design == "direct":
        return True
    return all(part.split("=", 1)[0] in DIRECT_FORM_FACTORS and "=" in part for part in design.split(";"))


#: setting fields a family selector may name
SELECTOR_KEYS = ("model", "dataset", "panel", "design")


@dataclass(frozen=True)
class Family:
    """The declared Holm family of a report (docs/method.md §7, paper Appendix A).

    ``primary`` (the default): the primary U/C contrasts — McNemar on ``A−`` and ``F+`` — of the
    main design (``direct`` on the ``main`` panel) of each model × dataset; ``all``: every test of
    the report; otherwise ``selectors`` (from a study file): a setting belongs to the family when
    one selector matches it on every key the selector gives. Tests outside the family are
    descriptive: they keep their exact p, with no adjusted p and no rejection.
    """

    name: str = "primary"
    selectors: tuple[tuple[tuple[str, str], ...], ...] = ()

    def members(self, keys: Sequence[tuple[str, str, str, str]]) -> set[tuple[str, str, str, str]]:
        """The settings of ``keys`` (model, dataset, panel, design) whose tests are in the family.

        ``primary`` takes, per model × dataset on the ``main`` panel, the ``direct`` design when it
        was run, and otherwise every *direct-form* design — one that differs from ``direct`` only in
        the option count or the fallback's name (``k=6``, ``fallback=None``) — so that a user's own
        data run at ``-k 6`` has a primary family too."""
        if self.name != "primary" or self.selectors:
            return {k for k in keys if self.includes(*k)}
        main = [k for k in keys if k[2] == "main" and direct_form(k[3])]
        exact = {(k[0], k[1]) for k in main if k[3] == "direct"}
        return {k for k in main if k[3] == "direct" or (k[0], k[1]) not in exact}

    def describe(self, n_tests: int) -> str:
        """One phrase for a report's header: which family and how many tests."""
        if self.name == "primary" and not self.selectors:
            what = "the A− and F+ U/C tests of each model × dataset's direct design on the main panel"
        elif self.name == "all" and not self.selectors:
            what = "every test of the report"
        else:
            what = f"the settings listed by {self.name!r}"
        return f"Holm family {self.name!r}: {what}; {n_tests} tests"

    def includes(self, model: str, dataset: str, panel: str, design: str) -> bool:
        if self.name == "all" and not self.selectors:
            return True
        if not self.selectors:
            return panel == "main" and design == "direct"
        values = {"model": model, "dataset": dataset, "panel": panel, "design": design}
        return any(all(values[k] == v for k, v in sel) for sel in self.selectors)


def family_from(value: str | Family | Sequence[dict[str, object]] | None, name: str = "study") -> Family:
    """A :class:`Family` from ``"primary"``, ``"all"``, a Family, or a list of selector tables."""
    from pfr.errors import PfrError

    if value is None:
        return Family()
    if isinstance(value, Family):
        return value
    if isinstance(value, str):
        if value not in ("primary", "all"):
            raise PfrError(f"unknown Holm family {value!r}: use primary or all (or list the settings in a study file)")
        return Family(value)
    selectors = []
    for i, sel in enumerate(value):
        if not isinstance(sel, dict) or not sel:
            raise PfrError(f"family[{i}]: a family entry is a table of setting fields ({', '.join(SELECTOR_KEYS)})")
        bad = sorted(set(sel) - set(SELECTOR_KEYS))
        if bad:
            raise PfrError(f"family[{i}]: unknown key {bad[0]!r} (valid keys: {', '.join(SELECTOR_KEYS)})")
        selectors.append(tuple(sorted((str(k), str(v)) for k, v in sel.items())))
    return Family(name, tuple(selectors))
