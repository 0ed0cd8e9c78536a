"""Fallback criteria as shown to the model: the U/C wording pairs, membership tables, layout.

Each wording pair states the same category-to-output assignment two ways: union (``U``) lists the
fallback members ``R = U \\ S``; complement (``C``) excludes the regular members ``S``. Member
lists are always lexicographic.
"""

from __future__ import annotations

from collections.abc import Sequence

from pfr.errors import DesignError

#: (union template, complement template); ``{fallback}`` and ``{members}`` are filled in.
WORDING_PAIRS: dict[int, tuple[str, str]] = {
    1: (
        "Choose {fallback} if the input belongs to one of these categories: {members}.",
        "Choose {fallback} if the input belongs to none of the categories offered as options: {members}.",
    ),
    2: (
        "{fallback} is the correct answer when the input's category is one of the following: {members}.",
        "{fallback} is the correct answer when the input's category is not one of the following: {members}.",
    ),
    3: (
        "Select {fallback} for inputs from any of these categories: {members}.",
        "Select {fallback} for inputs from any category except these: {members}.",
    ),
}

MEMBERSHIP_RULES = (
    "Choose {fallback} if the input's category is marked T2 in the membership table.",
    "Choose {fallback} if the input's category is not marked T1 in the membership table.",
)


def quote_member(member: str) -> str:
    """A member as written in a list: in double quotes (inner ones doubled) when it contains a comma
    or a quote, so that ``a, b`` stays one member; other ids are written as they are."""
    if any(ch in member for ch in ",\"'"):
        return '"' + member.replace('"', '""') + '"'
    return member


def member_list(members: Sequence[str], layout: str = "line") -> str:
    """Join members with ", "; the ``breaks`` layout turns the space after six evenly spaced commas
    into line breaks, leaving membership, order and punctuation unchanged."""
    members = [quote_member(m) for m in sorted(members)]
    if layout == "line" or len(members) < 8:
        return ", ".join(members)
    if layout != "breaks":
        raise DesignError(f"unknown layout {layout!r} (use line or breaks)")
    # break before members[round(j·n/7)]: seven lines whose member counts differ by at most one
    breaks = {round(j * len(members) / 7) for j in range(1, 7)}
    out = [members[0]]
    for i, m in enumerate(members[1:], start=1):
        out.append(",\n" if i in breaks else ", ")
        out.append(m)
    return "".join(out)


def criterion(
    definition: str,
    fallback: str,
    regular: Sequence[str],
    fallback_members: Sequence[str],
    inventory: Sequence[str],
    *,
    wording: int = 1,
    membership: bool = False,
    layout: str = "line",
) -> str:
    """The fallback rule of one request."""
    if membership:
        regular_set = set(regular)
        table = "\n".join(f"- {cid}: {'T1' if cid in regular_set else 'T2'}" for cid in sorted(inventory))
        rule = MEMBERSHIP_RULES[0 if definition == "U" else 1].format(fallback=fallback)
        return f"Membership table:\n{table}\n{rule}"
    if wording not in WORDING_PAIRS:
        raise DesignError(f"unknown wording pair {wording} (use {', '.join(map(str, WORDING_PAIRS))})")
    union, complement = WORDING_PAIRS[wording]
    if definition == "U":
        return union.format(fallback=fallback, members=member_list(fallback_members, layout))
    return complement.format(fallback=fallback, members=member_list(regular, "line"))
