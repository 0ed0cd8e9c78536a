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


#: the matched-length control (docs/method.md §4.2, Figure 8): positive wording selects the fallback for
#: the group that holds the fallback members, negative wording excludes the other group; the two
#: differ in one word ("if" / "unless") and one group name, and mention no category.
MATCHED_RULES = (
    "Choose {fallback} if the input's category is marked {group} in the membership table.",
    "Choose {fallback} unless the input's category is marked {group} in the membership table.",
)
#: task → (name of the regular group, name of the fallback group); swapping gives the second comparison
MATCHED_GROUPS = {"matched-length": ("T1", "T2"), "matched-length-swapped": ("T2", "T1")}


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
    matched: str | None = None,
) -> str:
    """The fallback rule of one request (``matched``: a matched-length task, see :data:`MATCHED_GROUPS`)."""
    if matched is not None:
        regular_name, fallback_name = MATCHED_GROUPS[matched]
        regular_set = set(regular)
        table = "\n".join(
            f"- {cid}: {regular_name if cid in regular_set else fallback_name}" for cid in sorted(inventory)
        )
        positive, negative = MATCHED_RULES
        rule = (positive if definition == "U" else negative).format(
            fallback=fallback, group=fallback_name if definition == "U" else regular_name
        )
        return f"Membership table:\n{table}\n{rule}"
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
