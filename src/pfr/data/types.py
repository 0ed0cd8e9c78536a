"""Domain types of the data layer: what a dataset is made of."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Category:
    """One member of a dataset's inventory.

    ``description`` is the natural-language criterion shown to the model; ``parent`` is the
    coarse class where the dataset has one (TREC).
    """

    id: str
    description: str
    parent: str | None = None


@dataclass(frozen=True)
class Example:
    """One input with its gold category.

    ``text_id`` is stable across machines and panels (see :func:`pfr.data.panels.text_id`);
    ``source_index`` is the record's position in its source split, used to break ties.
    """

    text_id: str
    text: str
    y: str
    split: str
    source_index: int
    panel: str = ""
    where: str = field(default="", compare=False)  # file and line, for messages about this record


@dataclass(frozen=True)
class Dataset:
    """A dataset: its inventory (sorted by id) and its examples per source split."""

    name: str
    inventory: tuple[Category, ...]
    splits: dict[str, tuple[Example, ...]] = field(hash=False, compare=False)
    source: str = ""
    parents: tuple[Category, ...] = ()  # descriptions of the parent classes, where there are any

    def category(self, cid: str) -> Category:
        for c in self.inventory:
            if c.id == cid:
                return c
        raise KeyError(cid)

    @property
    def category_ids(self) -> tuple[str, ...]:
        return tuple(c.id for c in self.inventory)
