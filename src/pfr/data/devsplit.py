"""Development texts from a user's own file: one file split reproducibly into a development part
(the ``development`` panel, where thresholds are fitted) and a test part (the ``main`` panel).

The split is by normalised text, so the two parts never share a text (repeated copies of one text
fall on the same side), and it is a hash ranking, so the same file, fraction and seed give the same
split on every machine, and a file that grows keeps most of its earlier assignment.
"""

from __future__ import annotations

import math
from dataclasses import replace

from pfr.data.panels import hash_rank, normalise
from pfr.data.types import Dataset
from pfr.errors import DataError

#: the split names of a split user dataset: the test part stays the first split, which is the main panel
TEST_SPLIT = "all"
DEV_SPLIT = "development"


def check_fraction(fraction: float) -> None:
    if not (math.isfinite(fraction) and 0 < fraction < 1):
        raise DataError(f"--dev-fraction must be between 0 and 1 (exclusive), got {fraction}")


def split_development(ds: Dataset, fraction: float, seed: int = 0) -> Dataset:
    """``ds`` with its one split cut into ``all`` (test, the main panel) and ``development``.

    The ``round(fraction × distinct texts)`` distinct normalised texts of lowest
    ``sha256(f"{seed}|{dataset}|development|{text}")`` go to development, the rest to test;
    both keep file order.
    """
    check_fraction(fraction)
    [examples] = ds.splits.values()
    keys = [normalise(ex.text) for ex in examples]
    texts = sorted(set(keys), key=lambda t: (hash_rank(seed, ds.name, DEV_SPLIT, t), t))
    n_dev = round(fraction * len(texts))
    if n_dev < 1 or n_dev >= len(texts):
        raise DataError(
            f"{ds.source or ds.name}: --dev-fraction {fraction} of {len(texts)} distinct texts leaves "
            f"{'no development' if n_dev < 1 else 'no test'} text; choose a fraction that leaves both"
        )
    dev_texts = set(texts[:n_dev])
    dev = tuple(replace(ex, split=DEV_SPLIT) for ex, key in zip(examples, keys) if key in dev_texts)
    test = tuple(replace(ex, split=TEST_SPLIT) for ex, key in zip(examples, keys) if key not in dev_texts)
    return replace(ds, splits={TEST_SPLIT: test, DEV_SPLIT: dev})
