"""The ``openai:`` backend (an OpenAI-compatible server): :mod:`~pfr.models.openai.backend` scores and
declares it, :mod:`~pfr.models.openai.text` completes text for ``decide=generate|choice``,
:mod:`~pfr.models.openai.protocol` shapes requests and reads answers, :mod:`~pfr.models.openai.client`
sends them."""

from pfr.models.openai.backend import BACKEND, OpenAIBackend, from_spec, parse_spec, symbol_scores

__all__ = ["BACKEND", "OpenAIBackend", "from_spec", "parse_spec", "symbol_scores"]
