"""Grouped-query attention inside SDPA for the level-batched trie on CPU (registered with transformers)."""

from __future__ import annotations

from typing import Any

#: the attention implementation registered by :func:`_gqa_attention`
GQA_SDPA = "pfrsdpa_gqa"


def sdpa_gqa(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """Transformers' SDPA attention, except that under a padding mask grouped key/value heads go to
    ``scaled_dot_product_attention(enable_gqa=True)`` instead of being repeated per query head first:
    the same arithmetic (identical scores here) without copying every layer's past once per head group.
    The level-batched trie always passes a mask, so on CPU this is most of its attention."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = getattr(module, "num_key_value_groups", 1)
    if attention_mask is None or groups == 1 or kwargs.get("position_bias") is not None or dropout:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)  # fmt: skip
    import torch

    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, scale=scaling, enable_gqa=True
    )
    return out.transpose(1, 2).contiguous(), None


def gqa_attention(model: Any, device: Any) -> bool:
    """Use :func:`sdpa_gqa` for a CPU model on SDPA whose layers are all full attention (sliding-window
    models keep transformers' own). Returns whether it is in use."""
    config = model.config
    get_text = getattr(config, "get_text_config", None)
    text = get_text() if get_text is not None else config
    kinds = getattr(text, "layer_types", None) or ["full_attention"]
    if getattr(device, "type", "cpu") != "cpu" or getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    kv_heads = getattr(text, "num_key_value_heads", None)
    if any(k != "full_attention" for k in kinds) or kv_heads in (None, getattr(text, "num_attention_heads", None)):
        return False
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(GQA_SDPA, sdpa_gqa)
        AttentionMaskInterface.register(GQA_SDPA, sdpa_mask)
        model.set_attn_implementation(GQA_SDPA)
    except (ImportError, AttributeError, ValueError, TypeError):  # an older transformers: keep its SDPA
        return False
    return True
