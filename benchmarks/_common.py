"""What the benchmark scripts share: the load average, offline defaults, how two runs agree, and the results file.

Imported by scripts run as ``python benchmarks/NAME.py`` (their folder is first on ``sys.path``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def load_average() -> str:
    a, b, c = os.getloadavg()
    return f"{a:.2f} {b:.2f} {c:.2f}"


def offline_defaults() -> None:
    """No hub at run time; the data beside the checkout unless PFR_DATA_DIR says otherwise."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("PFR_DATA_DIR", str(ROOT.parent / "shared" / "data"))


def agreement(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Decisions two runs share and the largest |Δ| of their letter log-probs (``choices``, ``logits``)."""
    same = sum(x == y for x, y in zip(a["choices"], b["choices"]))
    diff = max(abs(x - y) for la, lb in zip(a["logits"], b["logits"]) for x, y in zip(la, lb))
    return {"same_decisions": same, "n": len(a["choices"]), "max_abs_diff": diff}


def cpu_facts() -> dict[str, Any]:
    """The CPU's model name and the instruction-set flags that decide kernel speed (AVX2/AVX-512/AMX)."""
    model, flags = "", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    wanted = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8", "amx_tile")
    return {"cpu": model, "cores": os.cpu_count(), "flags": [f for f in wanted if f in flags]}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a server a benchmark starts)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_results(name: str, figures: dict[str, Any], **context: Any) -> Path:
    """Write ``benchmarks/results/<name>.json``: the figures with machine, CPU flags, load, date, command.

    Every benchmark calls this after printing its figures so that docs can quote one file per goal.
    """
    import json
    import platform
    import sys
    from datetime import datetime, timezone

    out = ROOT / "benchmarks" / "results" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "benchmark": name,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), **cpu_facts()},
        "load_average": load_average(),
        **context,
        "figures": figures,
    }
    out.write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")
    return out


def serve(cmd: list[str], url: str, log: Path, timeout: float = 300.0) -> Any:
    """A context manager running server ``cmd`` (output to ``log``) until ``url`` answers; stopped at exit."""
    import contextlib
    import subprocess
    import time
    import urllib.request

    @contextlib.contextmanager
    def running() -> Any:
        with log.open("w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"{cmd[0]} exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
                try:
                    with urllib.request.urlopen(url, timeout=5):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"{url} did not answer within {timeout:.0f} s") from None
                    time.sleep(0.5)
            yield
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()

    return running()
