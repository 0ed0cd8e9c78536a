"""What a model identity says about the model itself: its size and its family (the recall-against-size
figure draws one line per family, in order of size)."""

from __future__ import annotations

import re
from typing import Any

#: identity keys read as a parameter count (for the recall-against-size figure)
PARAM_KEYS = ("params", "n_params", "num_parameters", "parameters")


def parse_params(identity: dict[str, Any]) -> float | None:
    """A parameter count from a model identity: a number or a string such as ``135M`` / ``4B``."""
    for key in PARAM_KEYS:
        value = identity.get(key)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, (int, float)) and value > 0:
            return float(value)
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kKmMbBtT]?)\s*", str(value))
        if m:
            scale = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}[m.group(2).lower()]
            return float(m.group(1)) * scale
    return None


#: a size token inside a model name (``135m``, ``1.5b``, ``7B``) and quantisation / precision suffixes
_SIZE_TOKEN = re.compile(r"(?<![a-z0-9.])\d+(?:\.\d+)?[kmbt](?![a-z0-9])")
_QUANT_TOKEN = re.compile(r"[-_.](?:q\d[a-z0-9_]*|i?q\d_[a-z0-9_]+|f16|f32|bf16|fp16|fp32)$")


def model_family(identity: dict[str, Any], label: str) -> str:
    """A model's family: the identity's ``family`` (a model option) when given, else its name without
    the size (``smollm2-135m`` → ``smollm2``, ``Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf`` →
    ``qwen2.5-coder-instruct``), so that the sizes of one family share a line and no line ever joins
    two families."""
    given = identity.get("family")
    if isinstance(given, str) and given.strip():
        return given.strip()
    name = label.split(" [", 1)[0].rstrip("/")
    if name.startswith(("python:", "baseline:")):  # a function or a baseline is its own family
        return name
    name = name.rsplit("/", 1)[-1].rsplit(":", 1)[-1].lower()
    name = name.removesuffix(".gguf")
    name = _QUANT_TOKEN.sub("", name)
    name = _SIZE_TOKEN.sub("", name)
    name = re.sub(r"[-_.]{2,}", "-", name).strip("-_.")
    return name or label
