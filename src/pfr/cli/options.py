"""Command-line options shared by several commands, each declared once.

``pfr build`` and ``pfr run`` take the same 21 data and design flags: :func:`with_build_flags`
puts them into a command's signature where its ``flags: BuildFlags`` parameter stands, and hands
the command one :class:`BuildFlags` value.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from pfr import api
from pfr.errors import DataError

DatasetOpt = Annotated[
    str,
    typer.Option(
        "--dataset",
        "-d",
        help="clinc150, banking77, trec, demo, a .csv/.jsonl/.parquet file, or hf:NAME[:CONFIG] (a Hugging Face "
        "dataset id or a local folder; with --split)",
    ),
]
PanelOpt = Annotated[str, typer.Option(help="main, diagnostic, development[-32|-64], calibration, or a named panel")]
DataDirOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", help="folder with the original files (default: $PFR_DATA_DIR, then download)"),
]
TextColOpt = Annotated[str, typer.Option("--text-col", help="text column of a user file")]
LabelColOpt = Annotated[str, typer.Option("--label-col", help="label column of a user file")]
DescOpt = Annotated[
    Path | None, typer.Option("--descriptions", help="CSV (id,description[,parent]) or JSON of category descriptions")
]
EncodingOpt = Annotated[
    str, typer.Option("--encoding", help="encoding of a user file and its descriptions (a UTF-8 BOM is accepted)")
]
SplitOpt = Annotated[
    str | None,
    typer.Option("--split", help="split of an hf: dataset (default: its only split)"),
]
ShowDroppedOpt = Annotated[
    bool, typer.Option("--show-dropped", help="list the duplicate and conflicting-label rows a user file drops")
]
LimitOpt = Annotated[
    int | None,
    typer.Option(help="keep N texts: the first N of a built-in panel; a label-balanced hash sample of a user file"),
]
SeedOpt = Annotated[int, typer.Option(help="hash seed of panels and designs")]
#: the result commands' shared flags (report, compare, check, thresholds)
OutOpt = Annotated[
    Path | None, typer.Option("--out", "-o", help="write here (in an existing folder) instead of stdout")
]
DrawsOpt = Annotated[int, typer.Option(help="bootstrap draws")]
BootSeedOpt = Annotated[int, typer.Option(help="bootstrap seed")]
KOpt = Annotated[int, typer.Option("--options", "-k", help="options per request (regular + fallback)")]
FallbackOpt = Annotated[str, typer.Option("--fallback", help="fallback option name")]
WordingOpt = Annotated[int, typer.Option("--wording", help="U/C wording pair (1, 2 or 3)")]
InfoOpt = Annotated[str, typer.Option("--info", help="category information: text, text+label or label")]
MembershipOpt = Annotated[bool, typer.Option("--membership/--no-membership", help="state the rule as a T1/T2 table")]
LayoutOpt = Annotated[str, typer.Option("--layout", help="union list layout: line or breaks")]
ReplacementOpt = Annotated[
    str, typer.Option("--replacement", help="replacement category: any, same or different parent")
]
ChoiceSetOpt = Annotated[int, typer.Option("--choice-set", help="which hash-seeded choice set (0, 1, 2, …)")]
TaskOpt = Annotated[
    str,
    typer.Option(
        "--task", help="category (the main test), compact, quality-cost, category-policy or classify-then-map"
    ),
]
PolicyInfoOpt = Annotated[
    str, typer.Option("--policy-info", help="quality-cost policy information: estimates, utilities or predicate")
]
PositionOpt = Annotated[int | None, typer.Option("--position", help="fixed 1-based fallback slot (default: cycle)")]
DevFractionOpt = Annotated[
    float | None,
    typer.Option("--dev-fraction", help="user file: this share of its texts (by --seed) is the development panel"),
]
DatasetNameOpt = Annotated[
    str | None,
    typer.Option("--dataset-name", help="user file: declared dataset name (pairs a dev file with a test file)"),
]
ModelOptsOpt = Annotated[
    list[str] | None, typer.Option("--model-opt", metavar="KEY=VALUE", help="backend option key=value (repeatable)")
]

#: how ``pfr study`` runs its units: here in one process, or on a Ray cluster
ExecutorOpt = Annotated[
    str, typer.Option("--executor", help="local (one process here) or ray (units over Ray actors, merged as done)")
]


#: the design flags' defaults are :class:`~pfr.api.Design`'s (the paper's), stated there once
_DESIGN = api.Design()


@dataclass(frozen=True)
class BuildFlags:
    """The data and design flags of ``pfr build`` and ``pfr run`` (everything but ``--dataset``)."""

    panel: PanelOpt = "main"
    data_dir: DataDirOpt = None
    text_col: TextColOpt = "text"
    label_col: LabelColOpt = "label"
    descriptions: DescOpt = None
    encoding: EncodingOpt = "utf-8"
    split: SplitOpt = None
    show_dropped: ShowDroppedOpt = False
    limit: LimitOpt = None
    seed: SeedOpt = _DESIGN.seed
    k: KOpt = _DESIGN.k
    fallback: FallbackOpt = _DESIGN.fallback
    wording: WordingOpt = _DESIGN.wording
    info: InfoOpt = _DESIGN.info
    membership: MembershipOpt = _DESIGN.membership
    layout: LayoutOpt = _DESIGN.layout
    replacement: ReplacementOpt = _DESIGN.replacement
    choice_set: ChoiceSetOpt = _DESIGN.choice_set
    position: PositionOpt = _DESIGN.position
    task: TaskOpt = _DESIGN.task
    policy_info: PolicyInfoOpt = _DESIGN.policy_info
    dev_fraction: DevFractionOpt = None
    dataset_name: DatasetNameOpt = None

    def design(self) -> api.Design:
        """The design flags, by name: every :class:`~pfr.api.Design` field is one of these flags."""
        return api.Design(**{f.name: getattr(self, f.name) for f in fields(api.Design)})

    def user_format(self) -> api.UserFormat:
        described = str(self.descriptions) if self.descriptions else None
        return api.UserFormat(self.text_col, self.label_col, described, self.encoding, self.split,
                              self.dev_fraction, self.seed, self.dataset_name)  # fmt: skip

    def build(self, dataset: str, *, check_pairs: bool = False) -> tuple[list[api.Request], list[str]]:
        """The requests and the notes to print once the command has succeeded (so an error stays one
        line); ``check_pairs``: the notes also check matched-length pairs (``pfr build``)."""
        fmt, design = self.user_format(), self.design()
        if (self.dev_fraction is not None or self.dataset_name) and dataset in ("clinc150", "banking77", "trec"):
            raise DataError(f"--dev-fraction and --dataset-name are for a user file; {dataset} has a development panel")
        reqs = api.build(
            dataset, self.panel, design, data_dir=self.data_dir, limit=self.limit, seed=self.seed, fmt=fmt
        )
        notes = api.build_notes(
            dataset, self.panel, design if check_pairs else None, reqs,
            data_dir=self.data_dir, limit=self.limit, seed=self.seed, fmt=fmt, show_dropped=self.show_dropped,
        )  # fmt: skip
        return reqs, notes


F = TypeVar("F", bound=Callable[..., Any])


def with_build_flags(command: F) -> F:
    """Replace the command's ``flags: BuildFlags`` parameter by the 21 options of :class:`BuildFlags`
    (in its place, so ``--help`` lists them there) and call it with them gathered into one value."""
    hints = typing.get_type_hints(command, include_extras=True)
    shared_hints = typing.get_type_hints(BuildFlags, include_extras=True)
    names = [f.name for f in fields(BuildFlags)]
    params: list[inspect.Parameter] = []
    for p in inspect.signature(command).parameters.values():
        if p.name == "flags":
            params += [
                inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=shared_hints[n])
                for n, f in zip(names, fields(BuildFlags))
            ]
        else:
            params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints[p.name]))

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        flags = BuildFlags(**{n: kwargs.pop(n) for n in names})
        return command(**kwargs, flags=flags)

    wrapper.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return typing.cast(F, wrapper)
#: `pfr study --executor ray`'s cluster (docs/scale-out.md)
AddressOpt = Annotated[
    str | None,
    typer.Option("--address", help="the Ray cluster to join (host:port, or auto); default: a local Ray on 127.0.0.1"),
]
