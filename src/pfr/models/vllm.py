"""vLLM in process: ``vllm:HUB_ID_OR_PATH`` and the offline presets (``vllm:smollm2-135m``, ``vllm:gemma3-270m``).

Scoring (the rule of :mod:`pfr.models.letters`, shared with the hf, llama.cpp and openai backends):
an option's score is the next-token log-probability of its symbol token after the prompt. A request is
one engine step, ``SamplingParams(max_tokens=1, temperature=0, logprob_token_ids=[symbol ids])``: vLLM
returns the exact full-vocabulary log-probability (its ``raw_logprobs``: the model's own log-softmax,
before any sampling processor) of every symbol token, so no score is censored. Engines without
``logprob_token_ids`` (vLLM before it existed) fall back to the top-K log-probs (``logprobs=K``) with
censoring, as :mod:`pfr.models.openai_api` does; the identity then says ``scoring: top_k=K`` and
``Scores.censored`` flags the options missing from the top K. Prompt log-probs are never used: they
bypass the prefix cache.

The engine runs with automatic prefix caching: the requests of a run share the instruction and the
inventory, a quad shares its input, so the engine computes each shared block once
(``meta["cached_tokens"]`` counts the prompt tokens served from the cache).

Options (``--model-opt key=value``): ``dtype`` (``auto``: float32 on CPU, bfloat16 on GPU; the
*resolved* dtype is in the identity), ``chat_template`` (on/off; on for the Instruct preset
``smollm2-135m``), ``max_model_len``, ``revision``, ``enforce_eager`` (on/off; default on on CPU, where
compiling costs minutes per start, off on GPU), ``kv_cache_gib`` (KV-cache size; default 1 on CPU),
``gpu_memory_utilization`` (GPU only; default 0.9), ``tensor_parallel_size``,
``pipeline_parallel_size``, ``data_parallel_size`` (N engines in N processes, each on its own devices;
requests are dealt out by quad), ``distributed_executor_backend`` (``mp`` or ``ray``: how one engine's
tensor/pipeline ranks run; ``ray`` spans the nodes of a Ray cluster), ``seed`` (0), ``scoring``
(``auto``/``exact``/``top_k``), ``top_k`` (20; top-K fallback only), ``batch_size`` (requests per runner
batch, 256), ``temperature`` (the score temperature T). vLLM is imported only when this backend is asked
for.

On CPU every rank of the study (data × pipeline × tensor) gets its own share of the cores through
vLLM's ``VLLM_CPU_OMP_THREADS_BIND`` unless the user set it: vLLM's automatic binding gives rank N the
N-th NUMA node and fails on a one-node machine with more than one rank. Pipeline stages on CPU need the
compiled mode (vLLM's CPU runner sets up the tensors passed between stages only in its compile
warm-up), so ``pipeline_parallel_size`` > 1 on CPU turns ``enforce_eager`` off.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import struct
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.letters import SymbolTokens, check_context, exact_scores, option_mass, topk_id_scores
from pfr.models.options import model_option, on_off, positive
from pfr.models.prompt import DEFAULT_TEMPLATE, PromptTemplate, chat_wrap, render
from pfr.options import SEED

OPTIONS = (
    "dtype",
    "chat_template",
    "max_model_len",
    "revision",
    "enforce_eager",
    "kv_cache_gib",
    "gpu_memory_utilization",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "distributed_executor_backend",
    "seed",
    "scoring",
    "top_k",
    "batch_size",
    "temperature",
)
_DTYPES = ("float32", "bfloat16", "float16")
#: vLLM's cap on ``logprob_token_ids`` (``vllm.sampling_params.MAX_LOGPROB_TOKEN_IDS``).
MAX_TOKEN_IDS = 128
#: default KV cache on CPU, GiB (the engine's own default reserves 90 % of RAM and fails to start).
CPU_KV_GIB = 1.0
_INSTALL = "the vllm backend needs vLLM: `make vllm` (CPU engine into .venv), or pip install 'pfr[vllm]' on GPUs"


# ---------------------------------------------------------------------------------------------- errors
_EXC_LINE = re.compile(r"(?:^|\s)((?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit)): (\S.*)$")


_QUOTED_CAUSE = re.compile(r"failed with error '(.+)', please check")


def root_cause(exc: BaseException, log: str = "") -> str:
    """One line naming what went wrong at engine start.

    With the engine core in a child process, the parent only raises "Engine core initialization
    failed. See root cause above"; the cause is the last exception line the child wrote to stderr
    (``log``). Otherwise it is the innermost exception of the chain.
    """
    inner: BaseException = exc
    while inner.__cause__ is not None or inner.__context__ is not None:
        inner = inner.__cause__ or inner.__context__  # type: ignore[assignment]
    text = " ".join(str(inner).split())
    low = text.lower()
    if "see root cause above" in low or "stack trace above" in low or "engine core" in low or not text:
        for line in reversed(log.splitlines()):
            m = _EXC_LINE.search(line.strip())
            if not m:
                continue
            name, message = m.group(1).rsplit(".", 1)[-1], " ".join(m.group(2).split())
            if "above" not in message.lower():
                return f"{name}: {message}"
            # "Worker failed with error '<the cause>', please check the stack trace above": the cause is quoted
            quoted = _QUOTED_CAUSE.search(message)
            if quoted:
                return f"{name}: {quoted.group(1)}"
    head = text.split(" For further information")[0]
    return f"{type(inner).__name__}: {head[:400]}" if head else type(inner).__name__


@contextlib.contextmanager
def _stderr_tail(limit: int = 1 << 16) -> Iterator[list[bytes]]:
    """Copy file descriptor 2 (this process's and its children's stderr) through a pipe, keeping the tail.

    Child processes started meanwhile (vLLM's engine core) keep writing into the pipe after the block
    ends, so the forwarding thread lives on (a daemon) and passes their output through unchanged.
    """
    tail: list[bytes] = []
    try:
        saved = os.dup(2)
        r, w = os.pipe()
    except OSError:  # no usable fd 2 (embedded interpreters): no capture, the exception text still counts
        yield tail
        return
    keep = [True]
    last = [time.monotonic()]  # when the pump last received output

    def pump() -> None:
        while True:
            try:
                chunk = os.read(r, 1 << 14)
            except OSError:
                return
            if not chunk:
                return
            last[0] = time.monotonic()
            with contextlib.suppress(OSError):
                os.write(saved, chunk)
            if keep[0]:
                tail.append(chunk)
                while sum(len(c) for c in tail) > limit and len(tail) > 1:
                    tail.pop(0)

    thread = threading.Thread(target=pump, name="pfr-vllm-stderr", daemon=True)
    thread.start()
    os.dup2(w, 2)
    os.close(w)
    try:
        yield tail
    finally:
        os.dup2(saved, 2)  # this process writes to the real stderr again; children keep the pipe
        # Let what the children wrote so far arrive: a failing engine core prints its traceback just
        # before the parent raises, so wait until the pipe has been quiet for 0.3 s (at most 3 s).
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and time.monotonic() - last[0] < 0.3:
            time.sleep(0.05)
        keep[0] = False


# ---------------------------------------------------------------------------------------------- weights
def safetensors_params(folder: Path) -> int | None:
    """Parameters stored in a folder's ``*.safetensors`` files, from their headers (no tensor is read)."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for f in files:
        with f.open("rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(n))
        for key, info in header.items():
            if key != "__metadata__":
                count = 1
                for d in info["shape"]:
                    count *= int(d)
                total += count
    return total


def _weights_folder(load_from: str, revision: str | None) -> Path | None:
    path = Path(load_from)
    if path.is_dir():
        return path
    try:  # a hub id: the engine downloaded it into the hub cache already
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(load_from, revision=revision, local_files_only=True))
    except Exception:  # not in the cache (another loader, a mirror): no count rather than no model
        return None


# ---------------------------------------------------------------------------------------------- backend
def _resolve_scoring(scoring: str) -> str:
    """``auto`` → ``exact`` when this vLLM takes ``logprob_token_ids``, else ``top_k``."""
    from vllm import SamplingParams

    fields = getattr(SamplingParams, "__struct_fields__", ()) or getattr(SamplingParams, "__dataclass_fields__", {})
    supported = "logprob_token_ids" in tuple(fields)
    if scoring == "auto":
        scoring = "exact" if supported else "top_k"
    if scoring == "exact" and not supported:
        raise ModelError("vllm: this vLLM has no SamplingParams.logprob_token_ids (exact scores); scoring=top_k")
    if scoring not in ("exact", "top_k"):
        raise ModelError(f"model option scoring={scoring!r}: use auto, exact or top_k")
    return scoring


Rows = list[tuple[dict[int, float], int, int]]  # per request: token id → log-prob, prompt tokens, cached tokens


class _Asks:
    """The ``SamplingParams`` that ask for a request's letter log-probs: exactly (``logprob_token_ids``)
    or the top K, one object per set of symbol ids. The backend and its data-parallel ranks share it,
    so every engine is asked the same way."""

    def __init__(self, scoring: str, top_k: int) -> None:
        from vllm import SamplingParams

        self.scoring = scoring
        self.top_k = top_k
        self._SamplingParams = SamplingParams
        self._cache: dict[tuple[int, ...], Any] = {}

    def __call__(self, ids: Sequence[int]) -> Any:
        key = tuple(ids)
        if key not in self._cache:
            if len(self._cache) > 4096:
                self._cache.clear()
            if self.scoring == "exact":
                if len(key) > MAX_TOKEN_IDS:
                    raise ModelError(f"vllm: {len(key)} options is over vLLM's {MAX_TOKEN_IDS} logprob_token_ids")
                p = self._SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=list(key))
            else:
                p = self._SamplingParams(max_tokens=1, temperature=0.0, logprobs=self.top_k)
            self._cache[key] = p
        return self._cache[key]


def _engine_step(llm: Any, prepared: Sequence[tuple[list[int], list[int]]], asks: _Asks) -> Rows:
    """One engine step per (prompt ids, symbol ids): the log-probs returned, prompt and cached tokens."""
    if not prepared:
        return []
    prompts = [{"prompt_token_ids": ids} for ids, _ in prepared]
    rows = []
    for res in llm.generate(prompts, [asks(tgt) for _, tgt in prepared], use_tqdm=False):
        steps = res.outputs[0].logprobs if res.outputs else None
        top = {int(t): float(lp.logprob) for t, lp in steps[0].items()} if steps else {}
        rows.append((top, len(res.prompt_token_ids or []), int(getattr(res, "num_cached_tokens", 0) or 0)))
    return rows


def _shutdown(llm: Any) -> None:
    """Stop an engine's core (its process, when it has one); an engine already stopped is fine."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    with contextlib.suppress(Exception):
        if core is not None:
            core.shutdown()


class VLLMBackend:
    """Option symbols scored by a vLLM engine (see the module docstring)."""

    def __init__(
        self,
        llm: Any,
        *,
        name: str,
        source: Mapping[str, str],
        dtype: str,
        params: int | None = None,
        chat_template: bool = False,
        scoring: str = "auto",
        top_k: int = 20,
        batch_size: int = 256,
        temperature: float = 1.0,
        template: PromptTemplate = DEFAULT_TEMPLATE,
        engines: Sequence[Any] = (),
    ) -> None:
        self.llm = llm
        self.name = name
        self.source = dict(source)
        self.dtype = dtype
        self.params = params
        self.chat_template = chat_template
        self.top_k = top_k
        self.batch_size = batch_size
        self.template = template
        self._temperature = temperature
        self._engines = list(engines)  # data-parallel ranks beyond this process (see _DataParallel)
        self.scoring = _resolve_scoring(scoring)
        self._asks = _Asks(self.scoring, top_k)
        self.tokenizer = llm.get_tokenizer()
        if chat_template and not getattr(self.tokenizer, "chat_template", None):
            raise ModelError(f"vllm: {name} has no chat template; use chat_template=off")
        self.max_model_len = int(llm.llm_engine.model_config.max_model_len)
        tok = self.tokenizer
        self._symbols = SymbolTokens(
            lambda text: tok(text, add_special_tokens=False)["input_ids"], name, pieces=tok.convert_ids_to_tokens
        )
        #: prompt tokens asked for and served from the prefix cache, since construction.
        self.stats = {"prompt_tokens": 0, "cached_tokens": 0}

    # ------------------------------------------------------------------ Backend protocol
    @property
    def identity(self) -> dict[str, Any]:
        return {
            "backend": "vllm",
            "name": self.name,
            **self.source,
            "params": self.params,
            "dtype": self.dtype,
            "scoring": "exact" if self.scoring == "exact" else f"top_k={self.top_k}",
            "chat_template": "on" if self.chat_template else "off",
            "temperature": self._temperature,
            "template": self.template.to_dict(),
        }

    @property
    def temperature(self) -> float:
        return self._temperature

    def prompt(self, request: Request) -> str:
        text = render(request, self.template)
        if not self.chat_template:
            return text
        return chat_wrap(self.tokenizer, text)

    def encode(self, prompt: str) -> list[int]:
        """Token ids of a whole prompt, as the hf backend makes them (BOS for plain text, none added in chat)."""
        return list(self.tokenizer(prompt, add_special_tokens=not self.chat_template)["input_ids"])

    def symbol_id(self, prompt: str, symbol: str, request_id: str = "?") -> int:
        return self._symbols(prompt, symbol, request_id)

    def prepare(self, requests: Sequence[Request]) -> list[tuple[list[int], list[int]]]:
        """(prompt token ids, symbol token ids) per request, every check done before anything runs."""
        out = []
        for r in requests:
            text = self.prompt(r)
            ids = self.encode(text)
            check_context(len(ids), self.max_model_len, self.name, r.request_id, "--model-opt max_model_len")
            out.append((ids, self._symbols.ids(text, (o.symbol for o in r.options), r.request_id)))
        return out

    def run_prepared(self, prepared: Sequence[tuple[list[int], list[int]]]) -> Rows:
        """Engine step per request: (token id → log-prob returned, prompt tokens, cached tokens)."""
        return _engine_step(self.llm, prepared, self._asks)

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        if not requests:
            return []
        prepared = self.prepare(requests)
        rows = self._dispatch(prepared)
        out = []
        for r, (_, tgt), (top, n_prompt, n_cached) in zip(requests, prepared, rows):
            if not top:
                raise ModelError(f"vllm returned no logprobs for request {r.request_id}")
            meta: dict[str, Any] = {"prompt_tokens": n_prompt, "cached_tokens": n_cached}
            if self.scoring == "exact":
                missing = [t for t in tgt if t not in top]
                if missing:
                    raise ModelError(f"vllm returned no log-prob for token(s) {missing} of request {r.request_id}")
                logits = exact_scores(top, tgt)
                scores = Scores(logits, (False,) * len(logits), {**meta, "option_mass": option_mass(logits)})
            else:
                logits, censored = topk_id_scores(top, tgt)
                scores = Scores(logits, censored, {**meta, "returned": len(top), "censored": sum(censored)})
            self.stats["prompt_tokens"] += n_prompt
            self.stats["cached_tokens"] += n_cached
            out.append(scores)
        return out

    def _dispatch(self, prepared: list[tuple[list[int], list[int]]]) -> Rows:
        if not self._engines:
            return self.run_prepared(prepared)
        # Data parallel: deal whole quads (4 consecutive requests share a prefix) to the ranks in turn.
        ranks = 1 + len(self._engines)
        shards: list[list[int]] = [[] for _ in range(ranks)]
        for i in range(len(prepared)):
            shards[(i // 4) % ranks].append(i)
        for engine, shard in zip(self._engines, shards[1:]):
            engine.send([prepared[i] for i in shard])
        rows: list[Any] = [None] * len(prepared)
        for i, row in zip(shards[0], self.run_prepared([prepared[i] for i in shards[0]])):
            rows[i] = row
        for engine, shard in zip(self._engines, shards[1:]):
            for i, row in zip(shard, engine.receive()):
                rows[i] = row
        return rows

    def close(self) -> None:
        """Stop the engine (and any data-parallel ranks); the backend cannot score afterwards."""
        for engine in self._engines:
            engine.close()
        self._engines = []
        llm, self.llm = self.llm, None
        if llm is None:
            return
        _shutdown(llm)
        del llm
        import gc

        gc.collect()

    def __enter__(self) -> VLLMBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------- data parallel
def _dp_worker(conn: Any, engine_kwargs: dict[str, Any], env: dict[str, str], scoring: str, top_k: int) -> None:
    """One data-parallel rank: its own engine on its own devices (or cores), scoring what the parent sends."""
    os.environ.update(env)
    try:
        llm = _start_engine(engine_kwargs)
        conn.send(("ready", None))
    except ModelError as exc:
        conn.send(("error", str(exc)))
        return
    asks = _Asks(scoring, top_k)  # the parent's resolved scoring and K: asked exactly as the parent asks
    while True:
        try:
            job = conn.recv()
        except EOFError:  # the parent is gone: stop the engine rather than linger
            break
        if job is None:
            break
        conn.send(_engine_step(llm, job, asks))
    _shutdown(llm)


class _DataParallel:
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


# ---------------------------------------------------------------------------------------------- start-up
@contextlib.contextmanager
def _environ(env: Mapping[str, str]) -> Iterator[None]:
    """Set ``env`` while an engine starts (its worker processes inherit it), then restore the old values."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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


def _start_engine(kwargs: dict[str, Any], env: Mapping[str, str] | None = None) -> Any:
    """``vllm.LLM(**kwargs)``, with a failure as one ModelError line carrying its root cause."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # vLLM's INFO/WARNING lines drown pfr's own output
    try:
        from vllm import LLM
    except ImportError as exc:
        raise ModelError(f"{_INSTALL} ({exc})") from None
    failure: Exception | None = None
    with _environ(env or {}), _stderr_tail() as tail:
        try:
            return LLM(**kwargs)
        except Exception as exc:  # start-up fails in many ways (hub, memory, config); each is the user's to fix
            failure = exc
    # read after the block: leaving it waits for the engine core's last lines to arrive
    assert failure is not None  # the try either returned or caught
    log = b"".join(tail).decode("utf-8", errors="replace")
    raise ModelError(f"vllm: cannot start an engine for {kwargs['model']}: {root_cause(failure, log)}") from None


def _rank_envs(dp: int, per_rank: int, on_cpu: bool) -> list[dict[str, str]]:
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


def from_spec(rest: str, opts: Mapping[str, str]) -> VLLMBackend:
    """``vllm:HUB_ID_OR_PATH``, ``vllm:PRESET`` or ``vllm:preset:PRESET`` with the options in the module docstring."""
    from pfr.models.gguf_cache import PRESET_CHAT, PRESETS
    from pfr.models.hf import _resolve

    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise ModelError(f"unknown vllm option(s) {', '.join(unknown)} (known: {', '.join(OPTIONS)})")
    if not rest:
        raise ModelError("vllm model spec must be vllm:HUB_ID_OR_PATH or vllm:PRESET")
    preset = rest.removeprefix("preset:") if rest.startswith("preset:") or rest in PRESETS else None
    chat = on_off(opts, "chat_template", PRESET_CHAT.get(preset or "", False))
    scoring = opts.get("scoring", "auto")
    if scoring not in ("auto", "exact", "top_k"):
        raise ModelError(f"model option scoring={scoring!r}: use auto, exact or top_k")
    executor = opts.get("distributed_executor_backend")
    if executor is not None and executor not in ("mp", "ray"):
        raise ModelError(f"model option distributed_executor_backend={executor!r}: use mp or ray")
    top_k = positive(opts, "top_k", int, 20)
    tp = positive(opts, "tensor_parallel_size", int, 1)
    pp = positive(opts, "pipeline_parallel_size", int, 1)
    dp = positive(opts, "data_parallel_size", int, 1)
    seed = model_option(opts, "seed", SEED, 0)
    batch_size = positive(opts, "batch_size", int, 256)
    temperature = positive(opts, "temperature", float, 1.0)
    max_model_len = positive(opts, "max_model_len", int, None)
    kv_gib = positive(opts, "kv_cache_gib", float, None)
    gpu_util = positive(opts, "gpu_memory_utilization", float, None)
    if gpu_util is not None and gpu_util > 1:
        raise ModelError(f"model option gpu_memory_utilization={gpu_util}: a fraction in (0, 1]")
    dtype = opts.get("dtype", "auto")
    if dtype != "auto" and dtype not in _DTYPES:
        raise ModelError(f"model option dtype={dtype!r}: use auto, {', '.join(_DTYPES)}")

    loaded = _resolve(f"preset:{preset}" if preset else rest, opts)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    try:
        from vllm.platforms import current_platform
    except ImportError as exc:
        raise ModelError(f"{_INSTALL} ({exc})") from None
    on_cpu = bool(current_platform.is_cpu())
    if dtype == "auto":
        dtype = "float32" if on_cpu else "bfloat16"
    scoring = _resolve_scoring(scoring)  # here, so the data-parallel ranks get the resolved one too
    if on_cpu and pp > 1:
        if on_off(opts, "enforce_eager", False):
            raise ModelError(
                f"pipeline_parallel_size={pp} on CPU needs enforce_eager=off: vLLM's CPU runner sets up the "
                "tensors passed between pipeline stages only in its compile warm-up"
            )
        eager = False
    else:
        eager = on_off(opts, "enforce_eager", on_cpu)
    kwargs: dict[str, Any] = {
        "model": loaded.load_from,
        "dtype": dtype,
        "enable_prefix_caching": True,
        "max_logprobs": max(top_k, 20),
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": pp,
        "seed": seed,
        "enforce_eager": eager,
    }
    if executor is not None:
        kwargs["distributed_executor_backend"] = executor
    if loaded.revision:
        kwargs["revision"] = loaded.revision
    if max_model_len:
        kwargs["max_model_len"] = max_model_len
    if kv_gib is None and on_cpu:
        kv_gib = CPU_KV_GIB
    if kv_gib is not None:
        kwargs["kv_cache_memory_bytes"] = int(kv_gib * (1 << 30))
    if gpu_util is not None:
        kwargs["gpu_memory_utilization"] = gpu_util
    envs = _rank_envs(dp, tp * pp, on_cpu)
    ranks: list[_DataParallel] = []
    try:
        for k in range(1, dp):  # a loop, not a comprehension: a rank that fails to spawn stops the ones before it
            ranks.append(_DataParallel(kwargs, envs[k], scoring, top_k))
        llm = _start_engine(kwargs, envs[0])
        for r in ranks:
            r.wait_ready()
    except BaseException:
        for r in ranks:
            r.close()
        raise
    resolved = str(llm.llm_engine.model_config.dtype).removeprefix("torch.")
    source = dict(loaded.source)
    if loaded.hub:
        source["revision"] = loaded.revision or "main"
    folder = _weights_folder(loaded.load_from, loaded.revision)
    return VLLMBackend(
        llm,
        name=preset or loaded.name,
        source=source,
        dtype=resolved,
        params=safetensors_params(folder) if folder is not None else None,
        chat_template=chat,
        scoring=scoring,
        top_k=top_k,
        batch_size=batch_size,
        temperature=temperature,
        engines=ranks,
    )
