"""Two versions of the packed level forward on the same requests, alternating, in one process.

Machine speed on the shared 2-core hosts drifts by tens of percent within minutes, so a change to
``pfr.models.packed`` is judged against the previous version in the same process, round by round (the
order flips every round). The old version is a file, e.g. from git:

    git show 3d23297:src/pfr/models/packed.py > /tmp/packed_old.py
    PFR_DATA_DIR=../shared/data .venv/bin/python benchmarks/compare_packed.py /tmp/packed_old.py --rounds 5

Each round scores the benchmark's 32 TREC requests (two ``score`` calls of 16, the shared root prefix
kept from a warm-up) once with each version; the script prints every round's seconds and the largest
score difference between the two.

``--prefix`` instead times the shared prefix itself (the 535 tokens every request starts with, from
nothing): the current packed path against transformers' forward pass (the old file is not used), and
prints the largest difference between the two caches' keys and values.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("packed_old", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules["packed_old"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path, nargs="?", help="an earlier src/pfr/models/packed.py")
    ap.add_argument("--prefix", action="store_true", help="time the shared prefix: packed vs transformers")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", default="smollm2-135m")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import pfr

    reqs = pfr.build("trec", "main", data_dir=os.environ.get("PFR_DATA_DIR"), limit=8)[:32]
    backend: Any = pfr.load_model(args.model, {"batch_size": "16"})
    if backend.packed is None:
        raise SystemExit(f"{args.model}: the packed forward does not apply")
    if args.prefix:
        _prefix(backend, reqs, args.rounds)
        return
    if args.old is None:
        raise SystemExit("give an earlier packed.py, or --prefix")
    decoders = {"old": _load(args.old).PackedDecoder(backend.model), "new": backend.packed}
    backend.score(reqs[:16])  # warm-up; the root prefix is kept from here on
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    seconds: dict[str, list[float]] = {"old": [], "new": []}
    scores: dict[str, list[Any]] = {}
    for r in range(args.rounds):
        for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
            backend.packed = decoders[name]
            t0 = time.perf_counter()
            scores[name] = backend.score(reqs[:16]) + backend.score(reqs[16:])
            seconds[name].append(time.perf_counter() - t0)
    diff = max(abs(a - b) for s, t in zip(scores["old"], scores["new"]) for a, b in zip(s.logits, t.logits))
    for name, times in seconds.items():
        print(f"{name}: {' / '.join(f'{t:.2f}' for t in times)} s")
    faster = sum(n < o for n, o in zip(seconds["new"], seconds["old"]))
    print(f"new faster in {faster}/{args.rounds} rounds; max |Δ score| {diff:.2e}")
    print(f"load average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def _prefix(backend: Any, reqs: list[Any], rounds: int) -> None:
    import torch

    from pfr.models.hf.trie import lcp as _lcp

    ids = [backend.encode(backend.prompt(r)) for r in reqs]
    shared = ids[0][: _lcp(ids)]
    decoder = backend.packed
    paths = {"packed": decoder, "transformers": None}
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; shared prefix {len(shared)} tokens")
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    caches: dict[str, Any] = {}
    for r in range(rounds + 1):  # round 0 warms both paths up and is not counted
        for name in paths if r % 2 == 0 else reversed(list(paths)):
            backend.packed = paths[name]
            t0 = time.perf_counter()
            with torch.inference_mode():  # as in ``score``
                caches[name] = backend._extend(None, shared)
            if r:
                seconds[name].append(time.perf_counter() - t0)
    backend.packed = decoder
    diff = max(
        float((a - b).abs().max())
        for la, lb in zip(caches["packed"].layers, caches["transformers"].layers)
        for a, b in ((la.keys, lb.keys), (la.values, lb.values))
    )
    for name, times in seconds.items():
        print(f"{name}: {' / '.join(f'{t:.3f}' for t in times)} s")
    faster = sum(p < t for p, t in zip(seconds["packed"], seconds["transformers"]))
    print(f"packed faster in {faster}/{rounds} rounds; max |Δ key/value| {diff:.2e}")


if __name__ == "__main__":
    main()
