"""Moved to :mod:`pfr.models.lm.letters`; this re-export stays until models/openai/backend.py imports from there."""

from pfr.models.lm.letters import (
    MERGES,
    SPACE_MARKS,
    SYMBOL_CONTEXT,
    SymbolTokens,
    answer_form,
    censored,
    check_context,
    exact,
    exact_scores,
    option_mass,
    topk_id_scores,
    topk_text_scores,
)

__all__ = [
    "MERGES",
    "SPACE_MARKS",
    "SYMBOL_CONTEXT",
    "SymbolTokens",
    "answer_form",
    "censored",
    "check_context",
    "exact",
    "exact_scores",
    "option_mass",
    "topk_id_scores",
    "topk_text_scores",
]
