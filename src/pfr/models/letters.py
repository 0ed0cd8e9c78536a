"""Moved to :mod:`pfr.models.lm.letters`; kept until models/openai/backend.py imports from there."""

from pfr.models.lm.letters import MERGES, SymbolTokens, exact_scores, topk_text_scores

__all__ = ["MERGES", "SymbolTokens", "exact_scores", "topk_text_scores"]
