"""A packed forward pass for Llama-type decoders: one trie level as one sequence of real tokens.

transformers runs a batch as a padded (rows × longest) tensor over one padded cache, so every trie
level pays for padding in each matrix product and, in attention, for a copy of the whole shared
prefix per row. Here (CPU only) a level's tokens are packed end to end, so:

* the weight products see only real tokens, with q/k/v and gate/up each fused into one wider product
  (the fused weights replace the modules' own: the module parameters become views of them, so no
  memory is added and transformers' own forward still runs on the same numbers);
* attention is split in two (cascade attention): every query of the level against the shared root
  prefix in one unmasked call, then each node against its *private* past (its ancestors below the root,
  then its own tokens, causally), padded only to the level's longest private past; the halves are
  merged by their log-sum-exp. The root is never copied per row.

The arithmetic is the model's own: its embedding, RMSNorm epsilon, rotary-embedding module (every
RoPE scaling type it implements), attention scale, activation, final norm and head. Tests check the
scores against transformers' forward pass within 1e-4 (float32).

Supported: decoder layers of the Llama block (RMSNorm → attention with RoPE → residual → RMSNorm →
gated MLP → residual), full attention in every layer, on CPU: ``llama`` and ``qwen2`` models
(:func:`supports`). Others keep transformers' forward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True)
class Node:
    """One trie node of a level: its tokens, the row of its parent in the previous level (``-1``: the
    root) and whether its past must be kept for children."""

    tokens: Sequence[int]
    parent: int
    keep: bool


@dataclass
class _Past:
    """The private keys and values of one level's kept nodes, per layer: ``(kv heads, rows × width, head
    size)`` with each row's real positions first (``lengths``)."""

    keys: list[Any]
    values: list[Any]
    lengths: list[int]
    width: int


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
        self._layers: list[tuple[Any, ...]] = []
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
                self._layers.append((
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
        plan = _plan(nodes, past, int(root[0][0].shape[1]) if root else 0, self.heads, self.kv_heads)
        kvh, g, d, hq = self.kv_heads, self.groups, self.head_dim, self.heads * self.head_dim
        total, b, wq, width = plan.total, len(nodes), plan.wq, plan.width
        x = self.embed(plan.ids)
        cos, sin = self.rotary(x[None], plan.positions[None])
        half = d // 2
        cos, sin_lo, sin_hi = cos[0][:, None, :], sin[0][:, None, :half], sin[0][:, None, half:]
        rows = b * kvh * width
        new_keys: list[Any] = []
        new_values: list[Any] = []
        for li, (ln1, w_qkv, b_qkv, o_proj, scale, ln2, w_gu, b_gu, down) in enumerate(self._layers):
            qkv = torch.nn.functional.linear(self._rms(ln1, x), w_qkv, b_qkv)
            qk = qkv[:, : hq + kvh * d].view(total, self.heads + kvh, d)
            rot = qk * cos  # rotary embedding: x·cos + rotate_half(x)·sin, without building rotate_half(x)
            rot[..., :half].addcmul_(qk[..., half:], sin_lo, value=-1.0)
            rot[..., half:].addcmul_(qk[..., :half], sin_hi)
            rot_rows, qkv_rows = rot.view(-1, d), qkv.view(-1, d)
            # each node's private keys/values, padded: its parent's kept row, then its own tokens
            keys = rot_rows.new_zeros((rows, d))
            values = rot_rows.new_zeros((rows, d))
            keys[plan.own_dst] = rot_rows[plan.own_k]
            values[plan.own_dst] = qkv_rows[plan.own_v]
            if past is not None and plan.prior_dst.numel():
                keys[plan.prior_dst] = past.keys[li][plan.prior_src]
                values[plan.prior_dst] = past.values[li][plan.prior_src]
            kb = keys.view(b, kvh, width, d)
            vb = values.view(b, kvh, width, d)
            qb = rot_rows[plan.q_pad].view(b, kvh, g * wq, d)
            o_b, lse_b = self._attend(qb, kb, vb, plan.mask, scale)
            # back to packed tokens, in the (T, kv heads, groups) order of the query heads
            o = o_b.reshape(-1, d)[plan.back].view(total, kvh, g, d)
            if plan.root:
                rk, rv = root[li]
                qa = rot_rows[plan.q_packed].view(1, kvh, g * total, d)
                o_a, lse_a = self._attend(qa, rk[None], rv[None], None, scale)
                lse_a = lse_a.reshape(kvh, g, total).permute(2, 0, 1)
                lse_b = lse_b.reshape(-1)[plan.back].view(total, kvh, g)
                lse = torch.logaddexp(lse_a, lse_b)
                o.mul_((lse_b - lse).exp_()[..., None])
                o.addcmul_(o_a.view(kvh, g, total, d).permute(2, 0, 1, 3), (lse_a - lse).exp_()[..., None])
            x = _linear_add(x, o.view(total, hq), o_proj)
            gu = torch.nn.functional.linear(self._rms(ln2, x), w_gu, b_gu)
            inter = gu.shape[1] // 2
            act = torch.nn.functional.silu(gu[:, :inter], inplace=True).mul_(gu[:, inter:])
            x = _linear_add(x, act, down)
            if plan.keep.numel():
                new_keys.append(kb[plan.keep].reshape(-1, d))
                new_values.append(vb[plan.keep].reshape(-1, d))
        logits = None
        if leaves:
            last = torch.tensor([plan.offsets[i] + len(nodes[i].tokens) - 1 for i in leaves])
            logits = self.head(self.norm(x[last]))
        kept_past = None
        if plan.keep.numel():
            kept_past = _Past(new_keys, new_values, plan.kept_lengths, width)
        return logits, kept_past

    @staticmethod
    def _rms(norm: Any, x: Any) -> Any:
        """The module's RMSNorm; in float32 the fused ``rms_norm`` computes the same values."""
        eps = getattr(norm, "variance_epsilon", None)
        if x.dtype.is_floating_point and x.element_size() == 4 and eps is not None:
            import torch

            return torch.nn.functional.rms_norm(x, (x.shape[-1],), norm.weight, eps)
        return norm(x)

    def _attend(self, q: Any, k: Any, v: Any, mask: Any, scale: float) -> tuple[Any, Any]:
        """Attention output and log-sum-exp per query: ``q`` (B, H, L, E) against ``k``/``v`` (B, H, S, E)
        under an additive ``mask`` (B, 1, L, S) or none, from torch's CPU flash kernel (:func:`supports`)."""
        out, lse = self._flash(q, k, v, 0.0, False, attn_mask=mask, scale=scale)
        return out, lse


def _linear_add(x: Any, h: Any, linear: Any) -> Any:
    """``x + linear(h)`` with the residual added inside the matrix product (``addmm``)."""
    import torch

    out = torch.addmm(x, h, linear.weight.t())
    return out if linear.bias is None else out.add_(linear.bias)


@dataclass(frozen=True)
class _Plan:
    """Index tensors of one level (the same for every layer): where each packed token, padded query
    slot and private key slot comes from (rows of ``(tokens × heads, head size)`` views)."""

    ids: Any
    positions: Any
    offsets: list[int]
    total: int
    wq: int
    width: int
    root: int
    q_packed: Any  # (kv head, group, token) → row of the rotated q/k
    q_pad: Any  # (node, kv head, group, slot) → row of the rotated q/k (pad slots: row 0)
    back: Any  # (token, kv head, group) → row of the padded attention output
    own_dst: Any  # private key slots of the nodes' own tokens → their rows below
    own_k: Any
    own_v: Any
    prior_dst: Any  # private key slots of the ancestors' tokens → rows of the previous level's kept past
    prior_src: Any
    mask: Any  # (node, 1, group × slot, key) additive causal mask over the private keys
    keep: Any
    kept_lengths: list[int]


def _plan(nodes: Sequence[Node], past: _Past | None, root: int, heads: int, kv_heads: int) -> _Plan:
    import torch

    groups = heads // kv_heads
    own = [len(n.tokens) for n in nodes]
    prior = [past.lengths[n.parent] if past is not None and n.parent >= 0 else 0 for n in nodes]
    offsets = [0]
    for n in own:
        offsets.append(offsets[-1] + n)
    total, b, wq = offsets[-1], len(nodes), max(own)
    width = max(p + n for p, n in zip(prior, own))
    qk_heads, all_heads = heads + kv_heads, heads + 2 * kv_heads
    tok = torch.arange(total)
    node_of = torch.repeat_interleave(torch.arange(b), torch.tensor(own))
    j_of = tok - torch.tensor(offsets[:-1])[node_of]
    kv = torch.arange(kv_heads)
    grp = torch.arange(groups)
    head = kv[:, None] * groups + grp[None, :]  # (kv, group) → query head
    q_packed = (tok[None, None, :] * qk_heads + head[:, :, None]).reshape(-1)
    slot = torch.arange(wq)
    start = torch.tensor(offsets[:-1])
    slot_tok = torch.where(slot[None, :] < torch.tensor(own)[:, None], start[:, None] + slot[None, :], 0)  # (b, wq)
    q_pad = (slot_tok[:, None, None, :] * qk_heads + head[None, :, :, None]).reshape(-1)
    back = ((node_of[:, None, None] * kv_heads + kv[None, :, None]) * groups + grp[None, None, :]) * wq
    back = (back + j_of[:, None, None]).reshape(-1)
    pri = torch.tensor(prior)
    own_dst = ((node_of[:, None] * kv_heads + kv[None, :]) * width + (pri[node_of] + j_of)[:, None]).reshape(-1)
    own_k = (tok[:, None] * qk_heads + heads + kv[None, :]).reshape(-1)
    own_v = (tok[:, None] * all_heads + heads + kv_heads + kv[None, :]).reshape(-1)
    dst: list[int] = []
    src: list[int] = []
    if past is not None:
        for i, node in enumerate(nodes):
            if prior[i]:
                for h in range(kv_heads):
                    dst.extend(range((i * kv_heads + h) * width, (i * kv_heads + h) * width + prior[i]))
                    base = (node.parent * kv_heads + h) * past.width
                    src.extend(range(base, base + prior[i]))
    keys = torch.arange(width)
    allowed = keys[None, None, :] <= (pri[:, None] + slot[None, :])[:, :, None]  # (b, wq, width)
    mask = torch.zeros((b, 1, wq, width)).masked_fill_(~allowed[:, None], float("-inf")).repeat(1, 1, groups, 1)
    keep = [i for i, n in enumerate(nodes) if n.keep]
    return _Plan(
        ids=torch.tensor([t for n in nodes for t in n.tokens]),
        positions=root + pri[node_of] + j_of,
        offsets=offsets, total=total, wq=wq, width=width, root=root,
        q_packed=q_packed, q_pad=q_pad, back=back, own_dst=own_dst, own_k=own_k, own_v=own_v,
        prior_dst=torch.tensor(dst, dtype=torch.long), prior_src=torch.tensor(src, dtype=torch.long),
        mask=mask, keep=torch.tensor(keep, dtype=torch.long), kept_lengths=[prior[i] + own[i] for i in keep],
    )  # fmt: skip
