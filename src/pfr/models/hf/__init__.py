"""The Transformers backend (``hf:``): :mod:`~pfr.models.hf.backend` scores, :mod:`~pfr.models.hf.trie`
shares prefixes, :mod:`~pfr.models.hf.cache` holds key/value caches, :mod:`~pfr.models.hf.attention` and
:mod:`~pfr.models.hf.packed` are the CPU forward paths."""

from pfr.models.hf.backend import BACKEND, KEEP_PREFIXES, HFBackend, from_spec

__all__ = ["BACKEND", "KEEP_PREFIXES", "HFBackend", "from_spec"]
