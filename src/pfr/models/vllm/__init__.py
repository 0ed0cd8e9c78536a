"""The vLLM backend (``vllm:``): :mod:`~pfr.models.vllm.backend` scores, :mod:`~pfr.models.vllm.engine`
starts and steps an engine, :mod:`~pfr.models.vllm.parallel` runs data-parallel ranks."""

from pfr.models.vllm.backend import BACKEND, VLLMBackend, VLLMText, from_spec
from pfr.models.vllm.engine import root_cause
from pfr.models.vllm.parallel import cpu_binding

__all__ = ["BACKEND", "VLLMBackend", "VLLMText", "cpu_binding", "from_spec", "root_cause"]
