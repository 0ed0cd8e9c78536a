"""The report's figures (matplotlib, Agg, no pyplot state): PNG and SVG.

- ``delta_forest``: paired 95 % intervals of Δ = C − U per setting (A+, A−, F+, J).
- ``decomposition``: U→C decision changes per assignment (c→w, w→c, w→w, invalid), % of texts.
- ``recall_size``: A− under U and C against model size: x is the identity's ``params`` where every
  model of the figure has one (log scale), else the models in report order; a line joins only the
  sizes of one model family (identity ``family``, else the name without its size), never two families;
  direct settings only (no classify-then-map reference, no reference-correct subset).
- ``position``: A− by fallback position (1-based slot) under U and C, one panel per setting.
- ``thresholds``: A+, A−, F+ against τ for the margin rule ``m > τ ⇒ fallback`` (m = log p_fallback −
  log max p_regular, from the stored log-probabilities), one panel per setting; τ = 0 is the
  native decision except on tied maxima.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from pfr.analysis.metrics import DECOMPOSITION
from pfr.report.model import Report, Setting

#: figure name → caption (also the HTML's figure captions)
CAPTIONS = {
    "delta_forest": "Paired 95% bootstrap intervals of Δ = C − U (pp) per setting.",
    "decomposition": "U→C decision changes per assignment: correct→wrong, wrong→correct, wrong→wrong, and "
    "changes that involve an invalid answer (% of texts).",
    "recall_size": "Fallback recall A− under U and C against model size (identity 'params', else report order); "
    "lines join the sizes of one model family only.",
    "position": "Fallback recall A− by fallback position (1-based slot) under U and C.",
    "thresholds": "A+, A− and F+ against the margin threshold τ (fallback iff m > τ); dotted line: τ = 0.",
}
MAX_PANELS = 24
_U, _C = "#1f77b4", "#d95f02"
_METRIC_COLOURS = {"A+": "#4c72b0", "A-": "#dd8452", "F+": "#c44e52", "J": "#55a868"}


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _short(s: Setting, settings: Sequence[Setting]) -> str:
    """A setting's label with only the parts that vary in this report."""
    parts = [s.model, s.dataset]
    for attr in ("panel", "design"):
        if len({getattr(x, attr) for x in settings}) > 1:
            parts.append(getattr(s, attr))
    return " · ".join(parts)


def _wrap_title(text: str, width_in: float, fontsize: float = 8, max_lines: int = 3) -> str:
    """``text`` broken into lines that fit a panel ``width_in`` inches wide (at most ``max_lines``;
    the rest is cut with …), so the titles of neighbouring panels never run into each other."""
    per_line = max(8, int(width_in * 72 / (fontsize * 0.62)))
    lines = textwrap.wrap(text, per_line, break_long_words=True, break_on_hyphens=False) or [""]
    if len(lines) > max_lines:
        lines = [*lines[: max_lines - 1], lines[max_lines - 1][: per_line - 1] + "…"]
    return "\n".join(lines)


def _grid(count: int, ncols: int = 3) -> tuple[int, int]:
    cols = min(ncols, max(count, 1))
    return math.ceil(max(count, 1) / cols), cols


def delta_forest(report: Report) -> Figure:
    settings = report.settings
    metrics = ("A+", "A-", "F+", "J")
    rows = len(settings) * len(metrics)
    fig = _figure(8.5, 1.2 + 0.22 * rows)
    ax = fig.add_subplot()
    y = 0.0
    ticks: list[float] = []
    labels: list[str] = []
    for s in settings:
        for m in metrics:
            iv = s.delta[m]
            colour = _METRIC_COLOURS[m]
            ax.errorbar(100 * iv.value, y, xerr=[[100 * (iv.value - iv.lo)], [100 * (iv.hi - iv.value)]],
                        fmt="o", color=colour, ms=4, capsize=2, lw=1.2)  # fmt: skip
            bold = m in ("A-", "F+") and s.test(m).reject
            ticks.append(y)
            labels.append(f"{_short(s, settings)}  Δ{m.replace('-', '−')}{' *' if bold else ''}")
            y -= 1
        y -= 0.6
    ax.axvline(0, color="0.4", lw=0.8)
    ax.set_yticks(ticks, labels, fontsize=7)
    ax.set_xlabel("Δ = C − U (percentage points); * Holm-adjusted McNemar p < .05")
    ax.grid(axis="x", alpha=0.3)
    return fig


def decomposition(report: Report) -> Figure:
    settings = report.settings
    fig = _figure(8.5, 1.2 + 0.45 * len(settings) * 2)
    ax = fig.add_subplot()
    colours = {"c2w": "#d95f02", "w2c": "#1b9e77", "w2w": "#999999", "inv": "#7570b3"}
    names = {"c2w": "correct→wrong", "w2c": "wrong→correct", "w2w": "wrong→wrong", "inv": "invalid answer"}
    ticks: list[float] = []
    labels: list[str] = []
    y = 0.0
    for s in settings:
        for a, aname in (("R", "gold-regular"), ("F", "gold-fallback")):
            left = 0.0
            for k in DECOMPOSITION:
                width = 100 * s.decomposition[a][k] / s.n
                ax.barh(y, width, left=left, color=colours[k], height=0.8,
                        label=names[k] if not ticks else None)  # fmt: skip
                left += width
            ticks.append(y)
            labels.append(f"{_short(s, settings)} · {aname}")
            y -= 1
        y -= 0.5
    ax.set_yticks(ticks, labels, fontsize=7)
    ax.set_xlabel("% of texts whose decision changes from U to C")
    ax.set_xlim(0, 100)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside upper center", ncol=4, fontsize=7, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return fig


#: the two definitions as drawn in the recall-against-size figure: (name, line style, marker)
_DEFINITIONS = (("U", "-", "o"), ("C", "--", "s"))
#: a series of the recall-against-size figure: (dataset, panel, design, family)
SeriesKey = tuple[str, str, str, str]


def size_series(report: Report) -> dict[SeriesKey, list[Setting]]:
    """The settings of the recall-against-size figure, one series per dataset × panel × design × model
    family, each ordered by parameter count. Only direct settings: a classify-then-map reference or a
    reference-correct subset is another quantity, not a point of the same curve."""
    series: dict[SeriesKey, list[Setting]] = {}
    for s in report.settings:
        if s.task != "category" or s.subset is not None:
            continue
        series.setdefault((s.dataset, s.panel, s.design, s.family or s.model), []).append(s)
    for members in series.values():
        members.sort(key=lambda s: (s.params is None, s.params or 0.0, s.model))
    return series


def recall_size(report: Report) -> Figure:
    """A− under U (solid, circles) and C (dashed, squares) against parameter count: one colour per
    dataset × panel × design; a line joins only the sizes of one model family, so a reader never
    reads a trend across unrelated models; a family with one size is a point."""
    series = size_series(report)
    members_all = [s for ms in series.values() for s in ms]
    models = list(dict.fromkeys(s.model for s in members_all))
    by_size = bool(members_all) and all(s.params is not None for s in members_all)
    fig = _figure(8.5, 4.4)
    ax = fig.add_subplot()
    groups = list(dict.fromkeys(k[:3] for k in series))
    one_group = len(groups) == 1
    vary_panel = len({g[1] for g in groups}) > 1
    palette = [f"C{i}" for i in range(10)]
    # each group × definition is drawn a little to one side of the model's true x, so that points of
    # different datasets and designs at one model size stay readable (log scale: a factor; else a shift)
    slots = 2 * len(groups)
    spread = min(0.12, 0.02 * slots) if by_size else min(0.5, 0.06 * slots)
    ticks: dict[float, list[str]] = {}  # x → the models drawn there
    for (ds, panel, design, _fam), members in series.items():
        g = groups.index((ds, panel, design))
        xs = np.array([s.params if by_size else models.index(s.model) for s in members], dtype=float)
        for s, x in zip(members, xs):
            at = ticks.setdefault(float(x), [])
            if s.model not in at:
                at.append(s.model)
        for j, (d, style, marker) in enumerate(_DEFINITIONS):
            shift = spread * ((2 * g + j + 0.5) / slots - 0.5) if slots > 1 else 0.0
            xd = xs * 10**shift if by_size else xs + shift
            colour = (_U if d == "U" else _C) if one_group else palette[g % 10]
            ivs = [s.metrics[f"A-_{d}"] for s in members]
            v = np.array([100 * iv.value for iv in ivs])
            err = np.array([[100 * (iv.value - iv.lo) for iv in ivs], [100 * (iv.hi - iv.value) for iv in ivs]])
            ax.errorbar(xd, v, yerr=err, fmt=marker + (style if len(members) > 1 else ""), color=colour, ms=5,
                        capsize=2, lw=1, alpha=0.85)  # fmt: skip
    handles: list[Line2D] = []
    if not one_group:
        for g, (ds, panel, design) in enumerate(groups):
            name = f"{ds}/{panel}/{design}" if vary_panel else f"{ds} · {design}"
            handles.append(Line2D([], [], color=palette[g % 10], lw=6, alpha=0.6, label=name))
    for d, style, marker in _DEFINITIONS:
        colour = (_U if d == "U" else _C) if one_group else "0.3"
        handles.append(Line2D([], [], color=colour, ls=style, marker=marker, ms=5, lw=1, label=f"A− under {d}"))
    if by_size:
        ax.set_xscale("log")
        ax.set_xlabel("parameters (model identity 'params'); lines join sizes of one model family")
        lo, hi = min(ticks), max(ticks)
        ax.set_xlim(lo / 10 ** (0.15 + spread), hi * 10 ** (0.15 + spread))
        top = ax.secondary_xaxis("top")
        names = [" / ".join(ticks[x]) for x in sorted(ticks)]
        top.set_xticks(sorted(ticks), [n if len(n) <= 24 else n[:23] + "…" for n in names],
                       rotation=20, ha="left", fontsize=7)  # fmt: skip
        top.tick_params(which="minor", top=False, labeltop=False)
    else:
        ax.set_xticks(range(len(models)), [m if len(m) <= 28 else m[:27] + "…" for m in models],
                      rotation=20, ha="right", fontsize=7)  # fmt: skip
        ax.set_xlabel("model (report order: some model identities have no 'params')")
        ax.set_xlim(-0.5, max(len(models), 1) - 0.5)
    ax.set_ylabel("fallback recall A− (%)")
    ax.set_ylim(-3, 103)
    ax.grid(alpha=0.3)
    fig.legend(handles=handles, loc="outside right center", fontsize=7, frameon=False)
    return fig


def _panels(report: Report, draw: Callable[[Axes, Setting], None], height: float = 2.6) -> Figure:
    settings = report.settings[:MAX_PANELS]
    nrows, ncols = _grid(len(settings))
    width = max(6.5, 3.3 * ncols + 0.5)
    fig = _figure(width, (height if ncols > 1 else 3.6) * nrows + 0.4)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax, s in zip(axes.ravel(), settings):
        draw(ax, s)
        ax.set_title(_wrap_title(_short(s, report.settings), width / ncols - 0.45), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[len(settings):]:
        ax.set_visible(False)
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    if handles:
        ncol = min(len(labels), 6 if width >= 8 else 3)
        fig.legend(handles, labels, loc="outside upper center", ncol=ncol, fontsize=7, frameon=False)
    if len(report.settings) > MAX_PANELS:
        fig.suptitle(f"first {MAX_PANELS} of {len(report.settings)} settings", fontsize=8)
    return fig


def position_recall(report: Report, s: Setting) -> dict[str, np.ndarray]:
    """A− under U and C per 1-based fallback position (NaN where no text has that position)."""
    block, txt = report.block(s)
    pos = txt["fallback_index"].to_numpy()
    slots = np.arange(int(txt["k"].max()))
    out: dict[str, np.ndarray] = {"position": slots + 1}
    for d in ("U", "C"):
        col = block[f"F{d}_fb"].to_numpy()
        out[f"A-_{d}"] = np.array([col[pos == p].mean() if (pos == p).any() else np.nan for p in slots])
    out["n"] = np.array([(pos == p).sum() for p in slots])
    return out


def position(report: Report) -> Figure:
    def draw(ax: Axes, s: Setting) -> None:
        cur = position_recall(report, s)
        for d, colour, style in (("U", _U, "-o"), ("C", _C, "--s")):
            ax.plot(cur["position"], 100 * cur[f"A-_{d}"], style, color=colour, ms=3, lw=1, label=f"A− {d}")
        k = len(cur["position"])
        ax.set_ylim(-3, 103)
        ax.set_xticks(cur["position"] if k <= 16 else np.linspace(1, k, 6).round())
        ax.set_xlabel("fallback position", fontsize=7)
        ax.set_ylabel("A− (%)", fontsize=7)

    return _panels(report, draw)


def threshold_curves(report: Report, s: Setting, taus: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """A+, A−, F+ per definition at each τ of the margin rule, from the stored margins."""
    txt = report.block(s)[1]
    if taus is None:
        m = np.concatenate([txt[f"m_{c}"].to_numpy(dtype=float) for c in ("RU", "RC", "FU", "FC")])
        m = m[np.isfinite(m)]
        lo, hi = (np.quantile(m, [0.01, 0.99]) if m.size else (-1.0, 1.0))
        lo, hi = min(lo, -0.5) - 0.5, max(hi, 0.5) + 0.5
        taus = np.unique(np.concatenate([np.linspace(lo, hi, 241), [0.0]]))
    out: dict[str, np.ndarray] = {"tau": taus}
    for d in ("U", "C"):
        m_r = txt[f"m_R{d}"].to_numpy(dtype=float)[:, None]
        reg = txt[f"reg_R{d}"].to_numpy(dtype=bool)[:, None]
        m_f = txt[f"m_F{d}"].to_numpy(dtype=float)[:, None]
        out[f"A+_{d}"] = ((m_r <= taus) & reg).mean(axis=0)
        out[f"F+_{d}"] = (m_r > taus).mean(axis=0)
        out[f"A-_{d}"] = (m_f > taus).mean(axis=0)
    return out


def thresholds(report: Report) -> Figure:
    def draw(ax: Axes, s: Setting) -> None:
        if s.label_only:  # no scores, no margins: nothing to move a threshold over
            ax.text(0.5, 0.5, "label-only answers:\nno scores", ha="center", va="center", transform=ax.transAxes)
            return
        cur = threshold_curves(report, s)
        for metric in ("A+", "A-", "F+"):
            for d, style in (("U", "-"), ("C", "--")):
                ax.plot(cur["tau"], 100 * cur[f"{metric}_{d}"], style, color=_METRIC_COLOURS[metric], lw=1.1,
                        label=f"{metric.replace('-', '−')} {d}")  # fmt: skip
        ax.axvline(0, color="0.3", lw=0.8, ls=":")
        ax.set_ylim(-3, 103)
        ax.set_xlabel("τ (fallback iff m > τ)", fontsize=7)
        ax.set_ylabel("%", fontsize=7)

    return _panels(report, draw, height=2.9)


FIGURES: dict[str, Callable[[Report], Figure]] = {
    "delta_forest": delta_forest,
    "decomposition": decomposition,
    "recall_size": recall_size,
    "position": position,
    "thresholds": thresholds,
}


def figures(report: Report) -> dict[str, Figure]:
    """Every figure of the report (none when it has no settings)."""
    if not report.settings:
        return {}
    # recall against size compares models: with one model it is a single point, so it is left out
    several = len({s.model for s in report.settings}) > 1
    return {name: make(report) for name, make in FIGURES.items() if several or name != "recall_size"}


def png_bytes(fig: Figure, dpi: int = 100) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def write_figures(report: Report, folder: str | Path, formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """Write every figure as ``folder/NAME.png`` and ``folder/NAME.svg``; returns the paths."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in figures(report).items():
        for fmt in formats:
            path = out / f"{name}.{fmt}"
            fig.savefig(path, format=fmt, dpi=150 if fmt == "png" else None)
            paths.append(path)
    return paths
