"""The llama.cpp backend (``llamacpp:``), in process through ``llama-cpp-python``:
:mod:`~pfr.models.llamacpp.backend` scores and generates."""

from pfr.models.llamacpp.backend import BACKEND, LlamaCppModel, file_sha256, from_spec, preset_path, render_chat

__all__ = ["BACKEND", "LlamaCppModel", "file_sha256", "from_spec", "preset_path", "render_chat"]
