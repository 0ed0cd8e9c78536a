"""A packed forward pass for Llama-type decoders: one trie level as one sequence of real tokens.

transformers runs a batch as a padded (rows × longest) tensor over one padded cache, so every trie
level pays for padding in each matrix product and, in attention, for a copy of the whole shared
prefix per row. Here (CPU only) a level's tokens are packed end to end, so:

* the weight products see only real tokens, with q/k/v and gate/up each fused into one wider product
  (the fused weights replace the modules' own: the module parameters become views of them, so no
  memory is added and transformers' own forward still runs on the same numbers);
* attention is split in two (cascade attention): every query of the level against the shared root
  prefix in one unmasked call (all query heads as a strided view of the packed queries; the kernel maps
  each to its key/value head, so the root is never copied, per row or per head), then each node against
  its *private* past (its ancestors below the root, then its own tokens, causally) in padded batches of
  nodes of similar length; the halves are merged by their log-sum-exp. Nodes with no ancestors below
  the root (the shared prefix itself, :meth:`PackedDecoder.extend`, and a trie's first level) need no
  mask: the kernel's causal mode skips the blocks above the diagonal;
* the last layer runs its query, attention and MLP only at the final token of each leaf: every other
  position is read there only through its keys and values;
* row gathers go through ``index_select``/``index_copy_`` and the residual products write into the
  residual stream (``addmm_``): fewer passes over memory between the products.

The arithmetic is the model's own: its embedding, RMSNorm epsilon, rotary-embedding module (every
RoPE scaling type it implements), attention scale, activation, final norm and head. Tests check the
scores against transformers' forward pass within 1e-4 (float32).

Supported: decoder layers of the Llama block (RMSNorm → attention with RoPE → residual → RMSNorm →
gated MLP → residual), full attention in every layer, on CPU: ``llama`` and ``qwen2`` models
(:func:`supports`). Others keep transformers' forward.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

#: model types whose decoder layer is the plain Llama block (optionally with q/k/v biases).
MODEL_TYPES = ("llama", "qwen2")


def _text_config(model: Any) -> Any:
    get_text = getattr(model.config, "get_text_config", None)
    return get_text() if get_text is not None else model.config


def supports(model: Any, device: Any) -> bool:
    """Whether :class:`PackedDecoder` computes exactly what ``model`` computes (see the module notes)."""
    cfg = _text_config(model)
    if getattr(device, "type", str(device)) != "cpu" or getattr(cfg, "model_type", None) not in MODEL_TYPES:
        return False
    import torch

    if not hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu"):  # returns the log-sum-exp
        return False
    if not _flash_takes_grouped_heads():
        return False
    if getattr(cfg, "hidden_act", None) != "silu" or getattr(cfg, "use_sliding_window", False):
        return False
    kinds = getattr(cfg, "layer_types", None) or ["full_attention"]
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    if any(k != "full_attention" for k in kinds) or "dynamic" in str(rope.get("rope_type", rope.get("type", ""))):
        return False
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if inner is None or not layers or not hasattr(inner, "rotary_emb") or not hasattr(model, "lm_head"):
        return False
    need = ("q_proj", "k_proj", "v_proj", "o_proj")
    for layer in layers:
        attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        if attn is None or mlp is None or not all(hasattr(attn, n) for n in need):
            return False
        if hasattr(attn, "q_norm") or not all(hasattr(mlp, n) for n in ("gate_proj", "up_proj", "down_proj")):
            return False
    return True


@functools.cache
def _flash_takes_grouped_heads() -> bool:
    """Whether this torch's CPU flash kernel maps several query heads to one key/value head and has a
    causal mode (the root and causal calls rely on both; torch 2.13 has them): one tiny probe call."""
    import torch

    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    q, kv = torch.zeros(1, 2, 2, 8), torch.zeros(1, 1, 2, 8)
    try:
        out, lse = flash(q, kv, kv, 0.0, True, attn_mask=None, scale=1.0)
    except (RuntimeError, TypeError, ValueError):
        return False
    return tuple(out.shape) == (1, 2, 2, 8) and tuple(lse.shape) == (1, 2, 2)


@dataclass(frozen=True)
class Node:
    """One trie node of a level: its tokens, the row of its parent in the previous level (``-1``: the
    root) and whether its past must be kept for children."""

    tokens: Sequence[int]
    parent: int
    keep: bool


class _Layer(NamedTuple):
    """One decoder layer's modules and fused weights (q/k/v and gate/up are views of the modules' own)."""

    ln1: Any
    w_qkv: Any
    b_qkv: Any
    o_proj: Any
    scale: float
    ln2: Any
    w_gu: Any
    b_gu: Any
    down: Any


@dataclass
class _Past:
    """The private keys and values of one level's kept nodes, per layer: rows of ``head size``; kept node
    ``r``'s kv head ``h`` starts at row ``base[r] + h × width[r]``, its real positions first (``lengths``)."""

    keys: list[Any]
    values: list[Any]
    lengths: list[int]
    base: list[int]
    width: list[int]


def _fuse(rows: Sequence[Any]) -> Any:
    """One contiguous tensor of ``rows`` stacked along dim 0, each module tensor made a view of it."""
    import torch

    fused = torch.cat([p.data for p in rows], dim=0).contiguous()
    start = 0
    for p in rows:
        n = p.shape[0]
        p.data = fused[start : start + n]
        start += n
    return fused


class PackedDecoder:
    """Runs trie levels of a Llama-type model below a shared root cache (:mod:`pfr.models.packed`)."""

    def __init__(self, model: Any) -> None:
        import torch

        self._torch = torch
        cfg = _text_config(model)
        inner = model.model
        self.embed = inner.embed_tokens
        self.rotary = inner.rotary_emb
        self.norm = inner.norm
        self.head = model.lm_head
        self.heads = int(cfg.num_attention_heads)
        self.kv_heads = int(getattr(cfg, "num_key_value_heads", None) or self.heads)
        self.head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads)
        self.groups = self.heads // self.kv_heads
        self._layers: list[_Layer] = []
        with torch.no_grad():
            for layer in inner.layers:
                attn, mlp = layer.self_attn, layer.mlp
                projections = (attn.q_proj, attn.k_proj, attn.v_proj)
                w_qkv = _fuse([m.weight for m in projections])
                biases = [m.bias for m in projections]
                b_qkv = _fuse(biases) if all(b is not None for b in biases) else None
                w_gu = _fuse([mlp.gate_proj.weight, mlp.up_proj.weight])
                b_gu = None
                if mlp.gate_proj.bias is not None and mlp.up_proj.bias is not None:
                    b_gu = _fuse([mlp.gate_proj.bias, mlp.up_proj.bias])
                self._layers.append(_Layer(
                    layer.input_layernorm, w_qkv, b_qkv, attn.o_proj, float(attn.scaling),
                    layer.post_attention_layernorm, w_gu, b_gu, mlp.down_proj,
                ))  # fmt: skip
        self._flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu

    # ------------------------------------------------------------------------------------ one level
    def level(
        self, root: Sequence[tuple[Any, Any]], past: _Past | None, nodes: Sequence[Node], leaves: Sequence[int]
    ) -> tuple[Any, _Past | None]:
        """Run ``nodes`` (all of one trie level) below ``root`` (per layer ``(keys, values)`` of shape
        ``(kv heads, R, head size)``) and ``past`` (the previous level's kept nodes).

        Returns the next-token logits at the last token of each node in ``leaves`` (float32, one row each)
        and the kept past of the nodes marked ``keep`` (their rows in the order they appear), for the next level.
        """
        torch = self._torch
        plan = _plan(nodes, past, int(root[0][0].shape[1]) if root else 0, self.heads, self.kv_heads, leaves)
        kvh, g, d, hq = self.kv_heads, self.groups, self.head_dim, self.heads * self.head_dim
        total = plan.total
        x = self.embed(plan.ids)
        cos, sin = self.rotary(x[None], plan.positions[None])
        half = d // 2
        cos, sin_lo, sin_hi = cos[0][:, None, :], sin[0][:, None, :half], sin[0][:, None, half:]
        new_keys: list[Any] = []
        new_values: list[Any] = []
        last_layer = len(self._layers) - 1
        for li, layer in enumerate(self._layers):
            qkv = torch.nn.functional.linear(self._rms(layer.ln1, x), layer.w_qkv, layer.b_qkv)
            qk = qkv[:, : hq + kvh * d].view(total, self.heads + kvh, d)
            rot = qk * cos  # rotary embedding: x·cos + rotate_half(x)·sin, without building rotate_half(x)
            rot[..., :half].addcmul_(qk[..., half:], sin_lo, value=-1.0)
            rot[..., half:].addcmul_(qk[..., :half], sin_hi)
            rot_rows, qkv_rows = rot.view(-1, d), qkv.view(-1, d)
            private = [self._private(grp, rot_rows, qkv_rows, past, li) for grp in plan.groups]
            if plan.kept_lengths:
                new_keys.append(_cat([_rows(kb, grp.keep).view(-1, d) for grp, (kb, _) in zip(plan.groups, private)]))
                new_values.append(_cat([_rows(vb, grp.keep).view(-1, d) for grp, (_, vb) in zip(plan.groups, private)]))
            if li == last_layer:
                # The last layer's output is read only at the leaves' final tokens: every other token
                # needed just its keys and values (above), not its query, attention or MLP.
                if leaves:
                    x = self._final_tokens(x, rot, private, root[li] if plan.root else None, plan, layer)
                break
            outs, lses = [], []
            queries = rot[:, : self.heads]
            for grp, (kb, vb) in zip(plan.groups, private):
                if grp.mask is None:  # causal: (node, slot) token rows seen as (node, query head, slot)
                    qb = _rows(queries, grp.q_pad).view(grp.b, grp.wq, self.heads, d).transpose(1, 2)
                else:  # each kv head's query heads one after another: longer query blocks for the kernel
                    qb = _rows(rot_rows, grp.q_pad).view(grp.b, kvh, g * grp.wq, d)
                o_g, lse_g = self._attend(qb, kb, vb, grp.mask, layer.scale, causal=grp.mask is None)
                outs.append(o_g.transpose(1, 2).reshape(-1, d))  # the kernel's own (node, slot, head) layout
                lses.append(lse_g.reshape(-1))
            # back to packed tokens, in the (T, kv heads, groups) order of the query heads
            o = _rows(_cat(outs), plan.back_o).view(total, kvh, g, d)
            if plan.root:
                # every query head as a strided view of the packed rotated queries: no gather
                o_a, lse_a = self._root_attention(queries, root[li], layer.scale)
                _merge(o, _rows(_cat(lses), plan.back_l).view(total, kvh, g), o_a, lse_a)
            x = self._block_tail(x, o.view(total, hq), layer)
        logits = self.head(self.norm(x)) if leaves else None
        kept_past = None
        if plan.kept_lengths:
            kept_past = _Past(new_keys, new_values, plan.kept_lengths, plan.kept_base, plan.kept_width)
        return logits, kept_past

    def extend(self, root: Sequence[tuple[Any, Any]], tokens: Sequence[int]) -> list[tuple[Any, Any]]:
        """Per layer, the keys and values of ``root`` (possibly empty) followed by ``tokens``, each
        ``(kv heads, R + len(tokens), head size)``: the tokens run as one node below ``root``, and, as
        nothing reads their outputs, the last layer stops at their keys and values."""
        torch = self._torch
        _, past = self.level(root, None, [Node(tokens, -1, True)], [])
        assert past is not None
        shape = (self.kv_heads, len(tokens), self.head_dim)
        own = [(k.view(shape), v.view(shape)) for k, v in zip(past.keys, past.values)]
        if not root:
            return own
        return [(torch.cat([rk, k], dim=1), torch.cat([rv, v], dim=1)) for (rk, rv), (k, v) in zip(root, own)]

    def _private(self, grp: _Group, rot_rows: Any, qkv_rows: Any, past: _Past | None, li: int) -> tuple[Any, Any]:
        """One group's private keys and values, padded ``(nodes, kv heads, width, head size)``: each node's
        ancestors below the root (rows of ``past``), then its own tokens."""
        d = self.head_dim
        keys = rot_rows.new_zeros((grp.b * self.kv_heads * grp.width, d))
        values = rot_rows.new_zeros((grp.b * self.kv_heads * grp.width, d))
        keys.index_copy_(0, grp.own_dst, _rows(rot_rows, grp.own_k))
        values.index_copy_(0, grp.own_dst, _rows(qkv_rows, grp.own_v))
        if past is not None and grp.prior_dst.numel():
            keys.index_copy_(0, grp.prior_dst, _rows(past.keys[li], grp.prior_src))
            values.index_copy_(0, grp.prior_dst, _rows(past.values[li], grp.prior_src))
        shape = (grp.b, self.kv_heads, grp.width, d)
        return keys.view(shape), values.view(shape)

    def _final_tokens(
        self,
        x: Any,
        rot: Any,
        private: list[tuple[Any, Any]],
        root: tuple[Any, Any] | None,
        plan: _Plan,
        layer: _Layer,
    ) -> Any:
        """The last layer's output at the final token of each leaf (one row each, in ``leaves`` order): its
        query against the root and its whole private past, then the layer's projection and MLP on those rows."""
        torch = self._torch
        kvh, g, d = self.kv_heads, self.groups, self.head_dim
        outs, lses = [], []
        for grp, (kb, vb) in zip(plan.groups, private):
            n = grp.leaf_local.numel()
            if not n:
                continue
            q = _rows(rot[:, : self.heads], grp.leaf_end).view(n, kvh, g, d)
            width = kb.shape[2]  # a leaf's last token sees its whole private past, nothing of the padding
            beyond = torch.arange(width)[None, None, None, :] >= grp.lengths[grp.leaf_local][:, None, None, None]
            mask = torch.zeros((n, 1, 1, width)).masked_fill_(beyond, float("-inf"))
            o_g, lse_g = self._attend(q, _rows(kb, grp.leaf_local), _rows(vb, grp.leaf_local), mask, layer.scale)
            outs.append(o_g.reshape(n, kvh, g, d))
            lses.append(lse_g.reshape(n, kvh, g))
        o = _rows(_cat(outs), plan.leaf_order)  # a fresh gather: the merge below may work in place
        if root is not None:
            o_a, lse_a = self._root_attention(_rows(rot[:, : self.heads], plan.leaf_ends), root, layer.scale)
            _merge(o, _rows(_cat(lses), plan.leaf_order), o_a, lse_a)
        return self._block_tail(_rows(x, plan.leaf_ends), o.reshape(o.shape[0], self.heads * d), layer)

    def _root_attention(self, q: Any, root: tuple[Any, Any], scale: float) -> tuple[Any, Any]:
        """Queries ``q`` (tokens, query heads, head size; a strided view will do) against one layer's root
        keys and values (the kernel maps each query head to its kv head): output ``(tokens, kv heads,
        groups, head size)`` and log-sum-exp ``(tokens, kv heads, groups)``. The kernel writes its output
        in token order."""
        n, kvh, g, d = q.shape[0], self.kv_heads, self.groups, self.head_dim
        o, lse = self._attend(q.transpose(0, 1)[None], root[0][None], root[1][None], None, scale)
        return o[0].transpose(0, 1).reshape(n, kvh, g, d), lse[0].transpose(0, 1).reshape(n, kvh, g)

    def _block_tail(self, x: Any, attended: Any, layer: _Layer) -> Any:
        """The rest of a decoder layer after attention: output projection and residual, then the gated MLP
        and its residual."""
        functional = self._torch.nn.functional
        x = _linear_add(x, attended, layer.o_proj)
        gu = functional.linear(self._rms(layer.ln2, x), layer.w_gu, layer.b_gu)
        inter = gu.shape[1] // 2
        act = functional.silu(gu[:, :inter], inplace=True).mul_(gu[:, inter:])
        return _linear_add(x, act, layer.down)

    @staticmethod
    def _rms(norm: Any, x: Any) -> Any:
        """The module's RMSNorm. In float32 the root mean square comes from one ``vector_norm`` pass and
        the scaling from one more (``rms_norm``'s CPU kernel makes separate pow, mean and two mul passes)."""
        eps = getattr(norm, "variance_epsilon", None)
        if x.dtype.is_floating_point and x.element_size() == 4 and eps is not None:
            import torch

            inv = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
            inv = inv.square_().mul_(1.0 / x.shape[-1]).add_(eps).rsqrt_()
            return torch.mul(x, inv).mul_(norm.weight)
        return norm(x)

    def _attend(self, q: Any, k: Any, v: Any, mask: Any, scale: float, causal: bool = False) -> tuple[Any, Any]:
        """Attention output and log-sum-exp per query: ``q`` (B, H, L, E) against ``k``/``v`` (B, H or kv
        heads, S, E; query head ``h`` reads kv head ``h // groups``) under an additive ``mask`` broadcast to
        (B, 1, L, S), or none, or ``causal`` (query ``i`` sees keys ``0..i``; the kernel skips the blocks
        above the diagonal), from torch's CPU flash kernel (:func:`supports`). Strided views will do."""
        out, lse = self._flash(q, k, v, 0.0, causal, attn_mask=mask, scale=scale)
        return out, lse


def _linear_add(x: Any, h: Any, linear: Any) -> Any:
    """``x + linear(h)`` into ``x`` itself, the residual added inside the matrix product (``addmm_``: no
    copy of ``x``). Every caller's ``x`` is its own residual stream (the embedding's output, or rows
    gathered from it), read by nothing else once this layer has run."""
    out = x.addmm_(h, linear.weight.t())
    return out if linear.bias is None else out.add_(linear.bias)


def _merge(o: Any, lse: Any, o_root: Any, lse_root: Any) -> None:
    """Fold the root half of cascade attention into ``o`` (the private half), in place, by the halves'
    log-sum-exps: in place so that ``o`` keeps the model's dtype (the weights are float32)."""
    import torch

    both = torch.logaddexp(lse_root, lse)
    o.mul_((lse - both).exp_()[..., None])
    o.addcmul_(o_root, (lse_root - both).exp_()[..., None])


def _rows(t: Any, index: Any) -> Any:
    """``t[index]`` along dim 0 through ``index_select`` (a row copy; ``t[index]`` runs the general
    indexing kernel, several times slower on these row gathers)."""
    return t.index_select(0, index)


def _cat(parts: list[Any]) -> Any:
    import torch

    return parts[0] if len(parts) == 1 else torch.cat(parts)


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
