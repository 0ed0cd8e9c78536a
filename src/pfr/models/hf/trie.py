"""The token trie of a batch (:class:`~pfr.models.hf.backend.HFBackend`): requests share long token
prefixes, so the batch is arranged as a compressed trie on their token ids and each shared run of
tokens is computed once."""

from __future__ import annotations

from dataclasses import dataclass, field

#: a leaf batch may hold at most this many times its real tokens once right-padded (padding costs compute).
PAD_WASTE = 1.25


@dataclass
class TrieNode:
    """A trie node below the shared root: the tokens after its parent's; ``row`` is set on a leaf
    (the request whose answer is read at its last token)."""

    id: int
    parent: int
    tokens: list[int]
    row: int | None = None
    children: list[TrieNode] = field(default_factory=list)


def build_trie(ids: list[list[int]], depth: int) -> list[TrieNode]:
    """The first level of the compressed token trie of ``ids`` below their shared ``depth``: an
    internal node holds a run of tokens two or more rows share; each row ends in a leaf that holds
    its remaining tokens (at least one, the one after which the answer is read)."""
    counter = [0]

    def build(rows: list[int], at: int, parent: int) -> list[TrieNode]:
        groups: dict[int, list[int]] = {}
        for r in rows:
            groups.setdefault(ids[r][at], []).append(r)
        nodes: list[TrieNode] = []
        for group in groups.values():
            if len(group) > 1:
                end = lcp([ids[r] for r in group])
                if end > at:
                    node = TrieNode(counter[0], parent, ids[group[0]][at:end])
                    counter[0] += 1
                    node.children = build(group, end, node.id)
                    nodes.append(node)
                    continue
            for r in group:
                nodes.append(TrieNode(counter[0], parent, ids[r][at:], row=r))
                counter[0] += 1
        return nodes

    return build(list(range(len(ids))), depth, -1)


def chunks(rows: list[tuple[int, int]], size: int) -> list[list[int]]:
    """``(length, row)`` pairs sorted by length → batches of at most ``size`` rows, padded by ≤ PAD_WASTE."""
    out: list[list[int]] = []
    chunk: list[int] = []
    real = 0
    for n, r in rows:
        if chunk and (len(chunk) == size or n * (len(chunk) + 1) > PAD_WASTE * (real + n)):
            out.append(chunk)
            chunk, real = [], 0
        chunk.append(r)
        real += n
    if chunk:
        out.append(chunk)
    return out


def lcp(seqs: list[list[int]]) -> int:
    """Longest common prefix length, at most ``min(len) - 1``: each row keeps one token to predict from."""
    limit = min(len(s) for s in seqs) - 1
    first = seqs[0]
    n = 0
    while n < limit and all(s[n] == first[n] for s in seqs):
        n += 1
    return max(n, 0)
