"""Key/value caches of transformers' ``DynamicCache`` as the trie forward uses them: filled without a copy,
forked per row as broadcast views, and tested for plain (no sliding-window) layers."""

from __future__ import annotations

import copy
from typing import Any


def fill_layer(cache: Any, li: int, keys: Any, values: Any) -> None:
    """Layer ``li`` of a fresh ``DynamicCache`` holding exactly ``keys``/``values`` (``update()`` would copy
    them once more)."""
    layer: Any = cache.layers[li]
    layer.lazy_initialization(keys, values)
    layer.keys, layer.values = keys, values


def is_plain(cache: Any) -> bool:
    """Whether every layer of ``cache`` is a plain growing key/value layer (no sliding window), so that
    its tensors can be padded, masked and stacked across rows."""
    from transformers.cache_utils import DynamicLayer

    layers: Any = getattr(cache, "layers", None) or []
    return bool(layers) and all(type(layer) is DynamicLayer and layer.keys is not None and layer.keys.numel()
                                for layer in layers)  # fmt: skip


def fork_cache(cache: Any, n: int) -> Any:
    """An independent copy of a batch-1 cache, repeated to ``n`` rows; the original stays as it was.

    Dynamic (and sliding-window) layers replace their tensors on update instead of writing into
    them, so a shallow copy whose tensors are broadcast views is enough; other layer kinds are
    deep-copied.
    """
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    if layers is not None and all(isinstance(layer, DynamicLayer) for layer in layers):
        new = copy.copy(cache)
        new.layers = []
        for layer in layers:
            twin = copy.copy(layer)
            if n > 1 and getattr(layer, "is_initialized", False) and layer.keys is not None and layer.keys.numel():
                twin.keys = layer.keys.expand(n, *layer.keys.shape[1:])
                twin.values = layer.values.expand(n, *layer.values.shape[1:])
            new.layers.append(twin)
        return new
    new = copy.deepcopy(cache)
    if n > 1:
        new.batch_repeat_interleave(n)
    return new


def log_probs(logits: Any) -> Any:
    """Next-token log-probs (float64, CPU) from one row of logits per answer."""
    import torch

    return torch.log_softmax(logits.double(), dim=-1).cpu()  # fp32 sums over a 262k vocabulary drift by 1e-4
