"""The request a model scores, and the design factors that built it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pfr.data.types import Category
from pfr.errors import DesignError

SYMBOLS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
FALLBACK_NAMES = ("Other", "None", "None of the above", "Unknown", "Not listed", "Something else", "Out of scope")
INFO_CONDITIONS = ("text", "text+label", "label")
LAYOUTS = ("line", "breaks")
REPLACEMENTS = ("any", "same", "different")
TASKS = (
    "category",
    "compact",
    "quality-cost",
    "category-policy",
    "classify-then-map",
    "matched-length",
    "matched-length-swapped",
)
#: the most options a letter-scoring backend can read (one answer symbol each, A–Z a–z 0–9)
LETTER_LIMIT = len(SYMBOLS)
POLICY_INFO = ("estimates", "utilities", "predicate")


@dataclass(frozen=True)
class Design:
    """The configurable factors of one PFR design (docs/method.md §4.1–4.2).

    Every factor has the paper's default; :attr:`name` lists only the factors that differ from
    it, so the default design is called ``direct``.
    """

    k: int = 16
    fallback: str = "Other"
    wording: int = 1
    info: str = "text"
    membership: bool = False
    layout: str = "line"
    replacement: str = "any"
    choice_set: int = 0
    position: int | None = None  # 1-based fixed fallback slot; None cycles over the slots
    seed: int = 0
    task: str = "category"  # category coverage, its coarse "compact" form, or a Fast/Defer policy (§4.2–4.3)
    policy_info: str = "estimates"  # quality-cost policy: what the request discloses

    def __post_init__(self) -> None:
        # every factor checked where a design is made (flag, study key or API argument): one message each
        from pfr.options import OptionError

        try:
            checked = _checked_factors(self)
        except OptionError as exc:
            raise DesignError(str(exc)) from None
        for f, value in checked:
            if value is not getattr(self, f):
                object.__setattr__(self, f, value)

    @property
    def name(self) -> str:
        default = Design()
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "policy_info" and self.task != "quality-cost":
                continue
            if f.name != "seed" and value != getattr(default, f.name):
                parts.append(f.name if value is True else f"{f.name}={value}")
        return ";".join(parts) or "direct"

    def factors(self) -> dict[str, Any]:
        return asdict(self)


def _checked_factors(d: Design) -> list[tuple[str, Any]]:
    """Each factor of ``d`` parsed by its :mod:`pfr.options` rule, named as the user writes it."""
    from pfr.design.wording import WORDING_PAIRS
    from pfr.options import WHOLE, Number, OneOf, Switch

    k = Number(whole=True, low=2, high=LETTER_LIMIT).parse("options", d.k)
    if not isinstance(d.fallback, str):
        raise DesignError(f"fallback={d.fallback!r}: must be a text (the fallback option's name)")
    position = None if d.position is None else Number(whole=True, low=1, high=k).parse("position", d.position)
    return [
        ("k", k),
        ("wording", Number(whole=True, low=1, high=max(WORDING_PAIRS)).parse("wording", d.wording)),
        ("info", OneOf(INFO_CONDITIONS).parse("info", d.info)),
        ("membership", Switch().parse("membership", d.membership)),
        ("layout", OneOf(LAYOUTS).parse("layout", d.layout)),
        ("replacement", OneOf(REPLACEMENTS).parse("replacement", d.replacement)),
        ("choice_set", Number(whole=True, low=0).parse("choice-set", d.choice_set)),
        ("position", position),
        ("seed", WHOLE.parse("seed", d.seed)),
        ("task", OneOf(TASKS).parse("task", d.task)),
        ("policy_info", OneOf(POLICY_INFO).parse("policy-info", d.policy_info)),
    ]


@dataclass(frozen=True)
class Option:
    """One option of a request; ``category`` is ``None`` for the fallback."""

    symbol: str
    category: str | None
    is_fallback: bool
    label: str


@dataclass(frozen=True)
class Request:
    """One input + full inventory + ordered options + fallback criterion: what a model scores.

    ``y`` is the gold category; ``expected`` the index of the correct option (the gold slot under
    assignment ``R``, the fallback under ``F``). ``supplied`` is the category disclosed to the model
    under the ``text+label`` and ``label`` information conditions, else ``None``.
    """

    request_id: str
    text_id: str
    dataset: str
    panel: str
    index: int
    assignment: str
    definition: str
    text: str
    y: str
    options: tuple[Option, ...]
    expected: int
    fallback_index: int
    criterion: str
    inventory: tuple[Category, ...]
    design: str
    factors: dict[str, Any] = field(hash=False, compare=False)
    supplied: Category | None = None
    show_text: bool = True

    def to_dict(self) -> dict[str, Any]:
        """The same dict as ``dataclasses.asdict``, built directly: asdict deep-copies the whole
        inventory of every request and dominated the cost of building, storing and exporting."""
        d: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        d["options"] = [{"symbol": o.symbol, "category": o.category, "is_fallback": o.is_fallback, "label": o.label}
                        for o in self.options]  # fmt: skip
        d["inventory"] = [{"id": c.id, "description": c.description, "parent": c.parent} for c in self.inventory]
        d["factors"] = dict(self.factors)
        if self.supplied is not None:
            c = self.supplied
            d["supplied"] = {"id": c.id, "description": c.description, "parent": c.parent}
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict[str, Any], inventory: tuple[Category, ...] | None = None) -> Request:
        """The inverse of :meth:`to_dict`. Options may also be ``[symbol, category, is_fallback, label]``
        lists (the compact form of stores and request files) or already a tuple of :class:`Option`, and
        the inventory may already hold :class:`Category` objects; equal options are shared, since a
        report reads 10^5 requests.
        ``inventory`` (a store's one tuple per inventory, shared by its requests) replaces ``d``'s."""
        kw = dict(d) if d.keys() <= _REQUEST_FIELDS else {k: v for k, v in d.items() if k in _REQUEST_FIELDS}
        opts = d["options"]
        if not (type(opts) is tuple and all(type(o) is Option for o in opts)):
            known = _OPTIONS.get  # the list form's known options without a call each (10^6 in a report)
            opts = tuple([(known(tuple(o)) if type(o) is list else None) or _option(o) for o in opts])
        kw["options"] = opts
        if inventory is None:
            inventory = tuple(c if isinstance(c, Category) else Category(**c) for c in d["inventory"])
        kw["inventory"] = inventory
        kw["supplied"] = Category(**d["supplied"]) if d.get("supplied") else None
        if cls is Request and kw.keys() == _REQUEST_FIELDS:
            # every field given: fill the instance as pickle does, without the frozen __init__'s one
            # object.__setattr__ per field (half of this method's time when a report reads 10^5 requests)
            obj = object.__new__(cls)
            obj.__dict__.update(kw)
            return obj
        return cls(**kw)

    @property
    def quad_key(self) -> tuple[str, str, str, str]:
        """Requests of one quad share this key (model-independent)."""
        return (self.dataset, self.panel, self.design, self.text_id)


_REQUEST_FIELDS = frozenset(f.name for f in fields(Request))
_OPTIONS: dict[tuple[Any, ...], Option] = {}


def _option(o: dict[str, Any] | list[Any]) -> Option:
    """One option from its dict or list form, shared with every equal option read before."""
    key = tuple(o) if isinstance(o, list) else (o["symbol"], o["category"], o["is_fallback"], o["label"])
    opt = _OPTIONS.get(key)
    if opt is None:
        if len(key) != 4:
            raise ValueError(f"an option has {len(key)} fields, need [symbol, category, is_fallback, label]")
        opt = Option(*key)
        if len(_OPTIONS) < 1 << 16:
            _OPTIONS[key] = opt
    return opt


def option_symbol(i: int) -> str:
    """The answer symbol of the ``i``-th option (0-based): ``A–Z a–z 0–9`` for the first 62, then
    the option number ``63``, ``64``, … (only routers and ``python:`` models read those)."""
    return SYMBOLS[i] if i < LETTER_LIMIT else str(i + 1)


def check_letter_symbols(request: Request) -> None:
    """Refuse a request that a letter-scoring backend cannot score: more options than answer symbols.

    Letter-scoring backends call this from the shared prompt path before anything is scored."""
    if len(request.options) > LETTER_LIMIT:
        from pfr.errors import ModelError

        task = request.factors.get("task", "category")
        raise ModelError(
            f"{request.dataset}/{request.panel}: a {task} request has {len(request.options)} options, more than "
            f"the {LETTER_LIMIT} answer symbols (A–Z a–z 0–9) a letter-scoring backend can score; use a router "
            "or a python: model, or an inventory of at most 62 categories"
        )


def content_id(payload: dict[str, Any]) -> str:
    """A short content hash of a JSON-able payload (canonical JSON, sha256)."""
    blob = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
