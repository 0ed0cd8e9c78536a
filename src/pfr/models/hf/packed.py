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
from typing import Any, NamedTuple

from pfr.models.hf.plan import Node, _Group, _Past, _Plan, _plan

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
