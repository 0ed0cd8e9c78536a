"""pfr: the Paired Fallback Robustness Test for decision models.

Public API: :func:`build`, :func:`run`, :func:`metrics`, :class:`Design`, :func:`load_model`.
"""

from pfr.api import build, compare, indicators, metrics, read_requests, run, write_requests
from pfr.design.types import Design, Option, Request
from pfr.models.registry import load_model

__all__ = [
    "Design",
    "Option",
    "Request",
    "build",
    "compare",
    "indicators",
    "load_model",
    "metrics",
    "read_requests",
    "run",
    "write_requests",
]
__version__ = "0.1.0"
