"""Data parallelism for the vLLM backend: one engine per rank in its own process, each on its own
devices (GPU) or share of the cores (CPU); requests are dealt out by whole quads."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

from pfr.errors import ModelError
from pfr.models.vllm.engine import Asks, Rows, engine_step, shutdown, start_engine


def _dp_worker(conn: Any, engine_kwargs: dict[str, Any], env: dict[str, str], scoring: str, top_k: int) -> None:
    """One data-parallel rank: its own engine on its own devices (or cores), scoring what the parent sends."""
    os.environ.update(env)
    try:
        llm = start_engine(engine_kwargs)
        conn.send(("ready", None))
    except ModelError as exc:
        conn.send(("error", str(exc)))
        return
    asks = Asks(scoring, top_k)  # the parent's resolved scoring and K: asked exactly as the parent asks
    while True:
        try:
            job = conn.recv()
        except EOFError:  # the parent is gone: stop the engine rather than linger
            break
        if job is None:
            break
        conn.send(engine_step(llm, job, asks))
    shutdown(llm)


class DataParallel:
    """A data-parallel rank in a child process (``spawn``: vLLM and CUDA do not survive ``fork``).

    Not a daemon: vLLM's engine starts its own engine-core process, which a daemon may not have. The
    rank stops when :meth:`close` asks, when the parent's end of the pipe closes (the parent died), or
    at the parent's exit: a multiprocessing finalizer with an exit priority runs before multiprocessing
    joins its non-daemon children, so an unclosed backend cannot hang the interpreter's exit.
    """

    def __init__(self, engine_kwargs: dict[str, Any], env: dict[str, str], scoring: str, top_k: int) -> None:
        import multiprocessing as mp
        from multiprocessing.util import Finalize

        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_dp_worker, args=(child, engine_kwargs, env, scoring, top_k), daemon=False)
        self.proc.start()
        child.close()  # only the rank holds its end now, so the rank's death reads as EOF here
        self._finalizer = Finalize(self, _stop_rank, args=(self.conn, self.proc), exitpriority=10)

    def wait_ready(self) -> None:
        if not self.conn.poll(3600):
            raise ModelError("vllm: a data-parallel rank did not start within an hour")
        kind, message = self.conn.recv()
        if kind != "ready":
            raise ModelError(f"vllm data-parallel rank: {message}")

    def send(self, job: list[tuple[list[int], list[int]]]) -> None:
        self.conn.send(job)

    def receive(self) -> Rows:
        try:
            rows: Rows = self.conn.recv()
        except EOFError:
            raise ModelError(f"vllm: a data-parallel rank died (exit code {self.proc.exitcode})") from None
        return rows

    def close(self) -> None:
        self._finalizer()


def _stop_rank(conn: Any, proc: Any) -> None:
    with contextlib.suppress(Exception):
        conn.send(None)
    proc.join(timeout=60)
    if proc.is_alive():
        proc.kill()
        proc.join()
    with contextlib.suppress(Exception):
        conn.close()


def cpu_binding(ranks: int, cpus: Sequence[int]) -> list[str]:
    """``VLLM_CPU_OMP_THREADS_BIND`` lists for ``ranks`` ranks: the cores split into contiguous shares.

    With fewer cores than ranks each rank gets one core, and cores are shared in turn.
    """
    cpus = sorted(cpus)
    if not cpus:
        raise ModelError("vllm: no CPU is available to this process")
    if ranks <= len(cpus):
        bounds = [len(cpus) * k // ranks for k in range(ranks + 1)]
        shares = [cpus[bounds[k] : bounds[k + 1]] for k in range(ranks)]
    else:
        shares = [[cpus[k % len(cpus)]] for k in range(ranks)]
    return [",".join(str(c) for c in share) for share in shares]


def rank_envs(dp: int, per_rank: int, on_cpu: bool) -> list[dict[str, str]]:
    """The environment each data-parallel rank's engine starts in: its devices (GPU) or cores (CPU).

    GPU: rank k sees devices ``k·per_rank … (k+1)·per_rank − 1`` of ``CUDA_VISIBLE_DEVICES`` (or of all).
    CPU: when the user has not set ``VLLM_CPU_OMP_THREADS_BIND``, the cores this process may use are
    split over all ``dp × per_rank`` workers and rank k gets its ``per_rank`` shares (see the module
    docstring); a single worker keeps vLLM's own binding.
    """
    if on_cpu:
        if dp * per_rank == 1 or os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "auto") != "auto":
            return [{} for _ in range(dp)]
        shares = cpu_binding(dp * per_rank, sorted(os.sched_getaffinity(0)))
        return [{"VLLM_CPU_OMP_THREADS_BIND": "|".join(shares[k * per_rank : (k + 1) * per_rank])} for k in range(dp)]
    if dp == 1:
        return [{}]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    devices = visible.split(",") if visible else [str(i) for i in range(dp * per_rank)]
    if len(devices) < dp * per_rank:
        raise ModelError(f"data_parallel_size={dp} × {per_rank} devices per rank needs {dp * per_rank} devices")
    return [{"CUDA_VISIBLE_DEVICES": ",".join(devices[k * per_rank : (k + 1) * per_rank])} for k in range(dp)]
