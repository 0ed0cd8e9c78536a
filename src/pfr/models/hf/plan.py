"""The index plan of one packed trie level (:mod:`pfr.models.hf.packed`): where each packed token,
padded query slot and private key slot comes from, computed once per level and used by every layer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Node:
    """One trie node of a level: its tokens, the row of its parent in the previous level (``-1``: the
    root) and whether its past must be kept for children."""

    tokens: Sequence[int]
    parent: int
    keep: bool


@dataclass
class _Past:
    """The private keys and values of one level's kept nodes, per layer: rows of ``head size``; kept node
    ``r``'s kv head ``h`` starts at row ``base[r] + h × width[r]``, its real positions first (``lengths``)."""

    keys: list[Any]
    values: list[Any]
    lengths: list[int]
    base: list[int]
    width: list[int]


@dataclass(frozen=True)
class _Group:
    """Nodes of one level whose private attention runs as one padded batch: nodes of similar length, so
    that a level's short nodes are not padded to its longest (index rows as in :class:`_Plan`)."""

    b: int
    wq: int
    width: int
    q_pad: Any  # with a mask: (node, kv head, group, slot) → row of the rotated q/k; else (node, slot) → token
    own_dst: Any  # private key slots of the nodes' own tokens → their rows below
    own_k: Any
    own_v: Any
    prior_dst: Any  # private key slots of the ancestors' tokens → rows of the previous level's kept past
    prior_src: Any
    mask: Any  # (node, 1, group × slot, key) additive causal mask over the private keys; None: plain causal
    lengths: Any  # (node,) private past of each node including its own tokens
    keep: Any  # the group's nodes whose past is kept, in level order
    leaf_local: Any  # the group's leaves (indices in the group), in ``leaves`` order
    leaf_end: Any  # their final tokens


@dataclass(frozen=True)
class _Plan:
    """Index tensors of one level (the same for every layer): where each packed token, padded query
    slot and private key slot comes from (rows of ``(tokens × heads, head size)`` views)."""

    ids: Any
    positions: Any
    total: int
    root: int
    groups: list[_Group]
    back_o: Any  # (token, query head) → row of the groups' attention outputs, concatenated
    back_l: Any  # (token, query head) → entry of the groups' log-sum-exps, concatenated
    leaf_ends: Any  # the final token of each leaf, in ``leaves`` order
    leaf_order: Any  # rows of the groups' leaf outputs, concatenated → ``leaves`` order
    kept_lengths: list[int]
    kept_base: list[int]
    kept_width: list[int]


#: a node joins the current padded group while it is at least this fraction of the group's longest
GROUP_RATIO = 0.6


def _grouped(own: Sequence[int]) -> list[list[int]]:
    """Nodes by decreasing length, cut where a node is much shorter than its group's first."""
    groups: list[list[int]] = []
    for i in sorted(range(len(own)), key=lambda i: (-own[i], i)):
        if groups and own[i] >= GROUP_RATIO * own[groups[-1][0]]:
            groups[-1].append(i)
        else:
            groups.append([i])
    return [sorted(grp) for grp in groups]


def _plan(
    nodes: Sequence[Node], past: _Past | None, root: int, heads: int, kv_heads: int, leaves: Sequence[int]
) -> _Plan:
    import torch

    groups = heads // kv_heads
    own = [len(n.tokens) for n in nodes]
    prior = [past.lengths[n.parent] if past is not None and n.parent >= 0 else 0 for n in nodes]
    offsets = [0]
    for n in own:
        offsets.append(offsets[-1] + n)
    total = offsets[-1]
    qk_heads, all_heads = heads + kv_heads, heads + 2 * kv_heads
    own_t, prior_t, start_t = torch.tensor(own), torch.tensor(prior), torch.tensor(offsets[:-1])
    tok = torch.arange(total)
    node_of = torch.repeat_interleave(torch.arange(len(nodes)), own_t)
    j_of = tok - start_t[node_of]
    kv = torch.arange(kv_heads)
    head = torch.arange(heads)[None, :]  # query head h reads kv head h // groups
    ends = [offsets[i] + own[i] - 1 for i in leaves]
    leaf_pos = {node: k for k, node in enumerate(leaves)}
    keeps = [n.keep for n in nodes]
    back_o = torch.empty(total * heads, dtype=torch.long)
    back_l = torch.empty(total * heads, dtype=torch.long)
    kept: dict[int, tuple[int, int]] = {}  # node → (base row, width) in the next level's past
    plans: list[_Group] = []
    out_base = lse_base = kept_base = 0
    leaf_concat: list[int] = []
    for members in _grouped(own):
        m = torch.tensor(members)
        b, wq = len(members), max(own[i] for i in members)
        width = max(prior[i] + own[i] for i in members)
        local = torch.full((len(nodes),), -1, dtype=torch.long)
        local[m] = torch.arange(b)
        gtok = torch.cat([torch.arange(offsets[i], offsets[i + 1]) for i in members])
        ln, j = local[node_of[gtok]], j_of[gtok]
        slot = torch.arange(wq)
        slot_tok = torch.where(slot[None, :] < own_t[m][:, None], start_t[m][:, None] + slot[None, :], 0)  # (b, wq)
        pri = prior_t[m]
        # Nodes with ancestors below the root see them through a mask, and each kv head's query heads go
        # one after another as one query sequence (group × slot); nodes without run the kernel's causal
        # mode (their padding comes after their last token, unseen by real queries), no mask.
        folded = any(prior[i] for i in members)
        at = (gtok[:, None] * heads + head).reshape(-1)  # (token, query head), h = kv head × groups + group
        kv_of, g_of = head // groups, head % groups
        if folded:
            q_pad = (slot_tok[:, None, None, :] * qk_heads + head.view(kv_heads, groups)[None, :, :, None]).reshape(-1)
            rows_o = ((ln[:, None] * groups + g_of) * wq + j[:, None]) * kv_heads + kv_of  # (node, group × slot, kv)
            allowed = torch.arange(width)[None, None, :] <= (pri[:, None] + slot[None, :])[:, :, None]  # (b, wq, width)
            mask = torch.zeros((b, 1, wq, width)).masked_fill_(~allowed[:, None], float("-inf")).repeat(1, 1, groups, 1)
        else:
            q_pad = slot_tok.reshape(-1)
            rows_o = (ln[:, None] * wq + j[:, None]) * heads + head  # (node, slot, query head)
            mask = None
        back_o[at] = out_base + rows_o.reshape(-1)  # rows of head size in the kernel outputs, concatenated
        back_l[at] = lse_base + ((ln[:, None] * heads + head) * wq + j[:, None]).reshape(-1)
        out_base += b * wq * heads
        lse_base += b * heads * wq
        own_dst = ((ln[:, None] * kv_heads + kv[None, :]) * width + (pri[ln] + j)[:, None]).reshape(-1)
        dst: list[int] = []
        src: list[int] = []
        for li, i in enumerate(members):
            if prior[i] and past is not None:
                p = nodes[i].parent
                for h in range(kv_heads):
                    dst.extend(range((li * kv_heads + h) * width, (li * kv_heads + h) * width + prior[i]))
                    base = past.base[p] + h * past.width[p]
                    src.extend(range(base, base + prior[i]))
        keep = [li for li, i in enumerate(members) if keeps[i]]
        for li in keep:
            kept[members[li]] = (kept_base, width)
            kept_base += kv_heads * width
        mine = sorted((leaf_pos[i], li) for li, i in enumerate(members) if i in leaf_pos)
        leaf_concat.extend(k for k, _ in mine)
        plans.append(_Group(
            b=b, wq=wq, width=width, q_pad=q_pad, own_dst=own_dst,
            own_k=(gtok[:, None] * qk_heads + heads + kv[None, :]).reshape(-1),
            own_v=(gtok[:, None] * all_heads + heads + kv_heads + kv[None, :]).reshape(-1),
            prior_dst=torch.tensor(dst, dtype=torch.long), prior_src=torch.tensor(src, dtype=torch.long),
            mask=mask, lengths=pri + own_t[m], keep=torch.tensor(keep, dtype=torch.long),
            leaf_local=torch.tensor([li for _, li in mine], dtype=torch.long),
            leaf_end=torch.tensor([ends[k] for k, _ in mine], dtype=torch.long),
        ))  # fmt: skip
    kept_nodes = [i for i in range(len(nodes)) if keeps[i]]  # the next level's rows: kept nodes in level order
    order = torch.empty(len(leaf_concat), dtype=torch.long)
    order[torch.tensor(leaf_concat, dtype=torch.long)] = torch.arange(len(leaf_concat))
    return _Plan(
        ids=torch.tensor([t for n in nodes for t in n.tokens]),
        positions=root + prior_t[node_of] + j_of,
        total=total, root=root, groups=plans, back_o=back_o, back_l=back_l,
        leaf_ends=torch.tensor(ends, dtype=torch.long), leaf_order=order,
        kept_lengths=[prior[i] + own[i] for i in kept_nodes],
        kept_base=[kept[i][0] for i in kept_nodes], kept_width=[kept[i][1] for i in kept_nodes],
    )  # fmt: skip
