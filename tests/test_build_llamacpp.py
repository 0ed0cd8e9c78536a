"""scripts/build_llamacpp_wheel.sh: portable flags, a cache keyed by version and flags.

The compile itself takes ~10 minutes and is exercised by ``make test`` (and the llama.cpp tests that
evaluate a real GGUF); here the cache logic is checked with a ``PIP`` that records what it was asked
to build, so that a wheel of other flags is shown never to be reused.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "build_llamacpp_wheel.sh"
VERSION = "0.3.36"


def _run(cache: Path, tmp: Path, cmake_args: str | None = None) -> subprocess.CompletedProcess[str]:
    # A fake pip: logs its arguments and CMAKE_ARGS, then writes a wheel where `pip wheel -w DIR` would.
    log = tmp / "pip.log"
    fake = tmp / "fake-pip"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "$* | CMAKE_ARGS=$CMAKE_ARGS" >> {log}\n'
        "while [[ $# -gt 0 ]]; do if [[ $1 == -w ]]; then out=$2; fi; shift; done\n"
        f'touch "$out/llama_cpp_python-{VERSION}-cp311-cp311-linux_x86_64.whl"\n'
    )
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "CMAKE_ARGS"}
    env.update(PFR_WHEEL_CACHE=str(cache), PIP=str(fake), LLAMA_CPP_VERSION=VERSION)
    if cmake_args is not None:
        env["CMAKE_ARGS"] = cmake_args
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)


def _builds(tmp: Path) -> list[str]:
    log = tmp / "pip.log"
    return log.read_text().splitlines() if log.exists() else []


def test_default_build_is_portable_and_keyed_by_flags(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # An old, unkeyed native wheel at the top of the cache must never be picked up.
    cache.mkdir()
    (cache / f"llama_cpp_python-{VERSION}-cp311-cp311-linux_x86_64.whl").write_bytes(b"native")
    first = _run(cache, tmp_path)
    assert first.returncode == 0, first.stderr
    builds = _builds(tmp_path)
    assert len(builds) == 1
    flags = builds[0].split("CMAKE_ARGS=", 1)[1]
    for flag in (
        "-DGGML_NATIVE=OFF",
        "-DGGML_AVX512=OFF",
        "-DGGML_AMX_TILE=OFF",
        "-DGGML_AMX_INT8=OFF",
        "-DGGML_AMX_BF16=OFF",
    ):
        assert flag in flags
    key = hashlib.sha256(flags.encode()).hexdigest()[:12]
    dest = cache / f"llama-cpp-python-{VERSION}-{key}"
    assert first.stdout.strip() == str(dest)
    assert [p.name for p in dest.glob("*.whl")] == [f"llama_cpp_python-{VERSION}-cp311-cp311-linux_x86_64.whl"]
    assert (dest / "CMAKE_ARGS").read_text().strip() == flags

    # Same flags again: the cached wheel, no second build.
    again = _run(cache, tmp_path)
    assert again.returncode == 0 and again.stdout.strip() == str(dest)
    assert len(_builds(tmp_path)) == 1

    # Other flags (a native build, say): another folder and a fresh build, the portable wheel untouched.
    native = _run(cache, tmp_path, cmake_args="-DGGML_NATIVE=ON")
    assert native.returncode == 0
    assert len(_builds(tmp_path)) == 2
    assert native.stdout.strip() != str(dest) and Path(native.stdout.strip()).is_dir()
    assert len(list(dest.glob("*.whl"))) == 1


def test_failed_build_leaves_no_wheel_behind(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    fake = tmp_path / "failing-pip"
    fake.write_text("#!/usr/bin/env bash\nwhile [[ $# -gt 0 ]]; do if [[ $1 == -w ]]; then out=$2; fi; shift; done\n"
                    f'echo partial > "$out/llama_cpp_python-{VERSION}-x.whl"\nexit 1\n')  # fmt: skip
    fake.chmod(0o755)
    env = {**os.environ, "PFR_WHEEL_CACHE": str(cache), "PIP": str(fake)}
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode != 0
    assert list(cache.rglob("*.whl")) == []
