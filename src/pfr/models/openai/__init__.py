"""The ``openai:`` backend (an OpenAI-compatible server): :mod:`~pfr.models.openai.backend` scores,
:mod:`~pfr.models.openai.decider` decides from generated or constrained answers (``decide=generate|choice``),
:mod:`~pfr.models.openai.protocol` shapes requests and reads answers, :mod:`~pfr.models.openai.client`
sends them."""

from pfr.models.openai.backend import OPTIONS, OpenAIBackend, from_spec, parse_spec, symbol_scores

__all__ = ["OPTIONS", "OpenAIBackend", "from_spec", "parse_spec", "symbol_scores"]
