"""What ``pfr build`` and ``pfr run`` tell a user about their own file: the rows it dropped and how
``--limit`` sampled it. Built-in datasets get no notes."""

from __future__ import annotations

import os

from pfr.data.loaders import UserFormat, load_dataset
from pfr.data.panels import build_panel, dropped_examples, is_user_dataset


def dataset_notes(
    dataset: str,
    panel: str = "main",
    *,
    data_dir: str | os.PathLike[str] | None = None,
    limit: int | None = None,
    seed: int = 0,
    fmt: UserFormat | None = None,
    show_dropped: bool = False,
) -> list[str]:
    """One line per note (and one per dropped row with ``show_dropped``), to print after the command
    succeeds so that an error stays one line."""
    ds = load_dataset(dataset, data_dir, fmt)  # cached: what the build just read
    notes: list[str] = []
    if not is_user_dataset(ds):
        return notes
    label = f"{ds.name} ({ds.source})" if ds.source else ds.name
    dropped = dropped_examples(ds)
    if dropped:
        dup = sum(d.reason == "duplicate" for d in dropped)
        conflict = len(dropped) - dup
        hint = "" if show_dropped else "; --show-dropped lists them"
        notes.append(f"{label}: dropped {dup} duplicate text(s) and {conflict} row(s) whose text has conflicting "
                     f"labels{hint}")  # fmt: skip
        if show_dropped:
            notes += [f"  {d.line()}" for d in dropped]
    if limit is not None:
        full = len(build_panel(ds, panel, seed=seed))
        if limit < full:
            notes.append(f"{label}: --limit {limit}: a hash-ranked sample of {limit} of {full} texts, balanced over "
                         f"the labels (seed {seed}), in file order")  # fmt: skip
    return notes
