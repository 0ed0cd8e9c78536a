"""The ``openai:`` backend under its earlier module name; it lives in :mod:`pfr.models.openai`."""

from pfr.models.openai.backend import OPTIONS, OpenAIBackend, from_spec, parse_spec, symbol_scores

__all__ = ["OPTIONS", "OpenAIBackend", "from_spec", "parse_spec", "symbol_scores"]
