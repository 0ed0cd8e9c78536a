"""vLLM in process: ``vllm:HUB_ID_OR_PATH`` and the offline presets (``vllm:smollm2-135m``, ``vllm:gemma3-270m``).

Scoring (the rule of :mod:`pfr.models.lm.letters`, shared with the hf, llama.cpp and openai backends):
an option's score is the next-token log-probability of its symbol token after the prompt. A request is
one engine step, ``SamplingParams(max_tokens=1, temperature=0, logprob_token_ids=[symbol ids])``: vLLM
returns the exact full-vocabulary log-probability (its ``raw_logprobs``: the model's own log-softmax,
before any sampling processor) of every symbol token, so no score is censored. Engines without
``logprob_token_ids`` (vLLM before it existed) fall back to the top-K log-probs (``logprobs=K``) with
censoring, as the ``openai:`` backend does; the identity then says ``scoring: top_k=K`` and
``Scores.censored`` flags the options missing from the top K. Prompt log-probs are never used: they
bypass the prefix cache.

Decisions without scores (:mod:`pfr.models.decide`): under ``decide=generate|choice`` the factory
returns :class:`VLLMText`, which the registry wraps in :class:`~pfr.models.generating.Generating`.
``generate`` lets the engine generate the answer (``SamplingParams(max_tokens,
temperature=gen_temperature, seed)``, greedy by default), read by the shared parse rule; ``choice``
constrains the output to exactly one option symbol (vLLM structured outputs,
``StructuredOutputsParams(choice=[symbols])``), so it is never invalid. Both are label-only with the
raw answer in ``meta.raw``; the identity is the scoring identity plus
:attr:`~pfr.models.decide.Decoding.identity`. They run on one engine (``data_parallel_size=1``).

The engine runs with automatic prefix caching: the requests of a run share the instruction and the
inventory, a quad shares its input, so the engine computes each shared block once
(``meta["cached_tokens"]`` counts the prompt tokens served from the cache).

Options (``--model-opt key=value``): those of :data:`BACKEND` (``data_parallel_size``: N engines in N
processes, each on its own devices, requests dealt out by quad; ``distributed_executor_backend``: how
one engine's tensor/pipeline ranks run, ``ray`` spanning the nodes of a Ray cluster; ``seed`` is also
the sampling seed of ``decide``). vLLM is imported only when this backend is asked for. The engine's
start and steps are in :mod:`~pfr.models.vllm.engine`, the data-parallel ranks in
:mod:`~pfr.models.vllm.parallel`; prompts, tokens and symbol checks come from
:class:`~pfr.models.lm.core.LetterLM`.

On CPU every rank of the study (data × pipeline × tensor) gets its own share of the cores through
vLLM's ``VLLM_CPU_OMP_THREADS_BIND`` unless the user set it: vLLM's automatic binding gives rank N the
N-th NUMA node and fails on a one-node machine with more than one rank. Pipeline stages on CPU need the
compiled mode (vLLM's CPU runner sets up the tensors passed between stages only in its compile
warm-up), so ``pipeline_parallel_size`` > 1 on CPU turns ``enforce_eager`` off.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.declaration import Declaration, Option
from pfr.models.generating import Completion
from pfr.models.lm.core import LetterLM, Prepared
from pfr.models.lm.gguf_cache import PRESET_CHAT, PRESETS
from pfr.models.lm.letters import check_context, exact_scores, topk_id_scores
from pfr.models.lm.prompt import DEFAULT_TEMPLATE, PromptTemplate
from pfr.models.lm.weights import resolve, safetensors_params, weights_folder
from pfr.models.options import DTYPES
from pfr.models.vllm.engine import (
    INSTALL,
    Asks,
    Rows,
    engine_step,
    generate_step,
    resolve_scoring,
    sampling,
    shutdown,
    start_engine,
)
from pfr.models.vllm.parallel import DataParallel, rank_envs
from pfr.options import POSITIVE, POSITIVE_INT, SEED, Switch

#: default KV cache on CPU, GiB (the engine's own default reserves 90 % of RAM and fails to start).
CPU_KV_GIB = 1.0


class VLLMBackend(LetterLM):
    """Option symbols scored by a vLLM engine (see the module docstring)."""

    kind = "vllm"
    context_hint = "--model-opt max_model_len"

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
        super().__init__(name=name, source=dict(source), params=params, chat_template=chat_template,
                         temperature=temperature, batch_size=batch_size, template=template)  # fmt: skip
        self.llm = llm
        self.dtype = dtype
        self.top_k = top_k
        self._engines = list(engines)  # data-parallel ranks beyond this process (see DataParallel)
        self.scoring = resolve_scoring(scoring)
        self._asks = Asks(self.scoring, top_k)
        self.tokenizer = llm.get_tokenizer()
        if chat_template and not getattr(self.tokenizer, "chat_template", None):
            raise ModelError(f"vllm: {name} has no chat template; use chat_template=off")
        self.max_model_len = int(llm.llm_engine.model_config.max_model_len)
        self.context_limit = self.max_model_len
        self.init_symbols()
        #: prompt tokens asked for and served from the prefix cache, since construction.
        self.stats = {"prompt_tokens": 0, "cached_tokens": 0}

    def settings(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "scoring": "exact" if self.scoring == "exact" else f"top_k={self.top_k}"}

    def run_prepared(self, prepared: Sequence[Prepared]) -> Rows:
        """Engine step per request: (token id → log-prob returned, prompt tokens, cached tokens)."""
        return engine_step(self.llm, prepared, self._asks)

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
                scores = exact_scores(top, tgt, meta)
            else:
                scores = topk_id_scores(top, tgt, meta)
            self.stats["prompt_tokens"] += n_prompt
            self.stats["cached_tokens"] += n_cached
            out.append(scores)
        return out

    def _dispatch(self, prepared: list[Prepared]) -> Rows:
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
        shutdown(llm)
        del llm
        import gc

        gc.collect()

    def __enter__(self) -> VLLMBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class VLLMText:
    """The engine's text completion for ``decide=generate|choice`` (a
    :class:`~pfr.models.generating.TextEngine`, wrapped by the registry): the backend's prompts (chat
    template, tokens, context checked before anything runs), one engine step for all of them, each
    answer with its prompt and cached token counts. It names the setting as the backend does (the
    scoring identity; the wrapper adds the decoding)."""

    def __init__(self, lm: VLLMBackend) -> None:
        self.lm = lm
        self.batch_size, self.temperature = lm.batch_size, lm.temperature
        self.encode, self.prompt, self.close = lm.encode, lm.prompt, lm.close
        self._sampling: dict[tuple[Any, ...], Any] = {}

    @property
    def identity(self) -> dict[str, Any]:
        return self.lm.identity

    def _set_template(self, value: PromptTemplate) -> None:
        self.lm.template = value

    #: the backend's template: a study's ``[template]`` set here is the one the backend renders and records
    template = property(lambda self: self.lm.template, _set_template)

    def complete(self, prompts: Sequence[str], max_tokens: int, seed: int, temperature: float) -> list[Completion]:
        return self._generate(prompts, [None] * len(prompts), max_tokens, seed, temperature)

    def choose(self, prompts: Sequence[str], symbols: Sequence[Sequence[str]], max_tokens: int, seed: int,
               temperature: float) -> list[Completion]:  # fmt: skip
        return self._generate(prompts, [tuple(s) for s in symbols], max_tokens, seed, temperature)

    def _generate(self, prompts: Sequence[str], allowed: Sequence[tuple[str, ...] | None], max_tokens: int, seed: int,
                  temperature: float) -> list[Completion]:  # fmt: skip
        lm = self.lm
        ids, params = [], []
        for p, key in zip(prompts, allowed):
            tokens = lm.encode(str(p))
            check_context(len(tokens), lm.context_limit, lm.name, getattr(p, "request_id", "?"), lm.context_hint)
            ids.append(tokens)
            asked = (max_tokens, seed, temperature, key)
            if asked not in self._sampling:
                self._sampling[asked] = sampling(max_tokens, seed, temperature, key)
            params.append(self._sampling[asked])
        out = []
        for text, n_prompt, n_cached in generate_step(lm.llm, ids, params):
            lm.stats["prompt_tokens"] += n_prompt
            lm.stats["cached_tokens"] += n_cached
            out.append(Completion(text, {"prompt_tokens": n_prompt, "cached_tokens": n_cached}))
        return out


def from_spec(rest: str, opts: Mapping[str, Any]) -> VLLMBackend | VLLMText:
    """``vllm:HUB_ID_OR_PATH``, ``vllm:PRESET`` or ``vllm:preset:PRESET`` with the options of :data:`BACKEND`,
    parsed: the scoring backend, or under ``decide=generate|choice`` its text completion."""
    decoding = opts["decide"]
    if not rest:
        raise ModelError("vllm model spec must be vllm:HUB_ID_OR_PATH or vllm:PRESET")
    preset = rest.removeprefix("preset:") if rest.startswith("preset:") or rest in PRESETS else None
    chat = PRESET_CHAT.get(preset or "", False) if opts["chat_template"] is None else opts["chat_template"]
    scoring = opts["scoring"]
    if scoring not in ("auto", "exact", "top_k"):
        raise ModelError(f"model option scoring={scoring!r}: use auto, exact or top_k")
    executor = opts["distributed_executor_backend"]
    if executor is not None and executor not in ("mp", "ray"):
        raise ModelError(f"model option distributed_executor_backend={executor!r}: use mp or ray")
    top_k, seed = opts["top_k"], opts["seed"]
    tp, pp, dp = opts["tensor_parallel_size"], opts["pipeline_parallel_size"], opts["data_parallel_size"]
    if decoding is not None and dp > 1:
        raise ModelError(f"model option decide={decoding.mode} runs on one engine: use data_parallel_size=1")
    max_model_len, kv_gib, gpu_util = opts["max_model_len"], opts["kv_cache_gib"], opts["gpu_memory_utilization"]
    if gpu_util is not None and gpu_util > 1:
        raise ModelError(f"model option gpu_memory_utilization={gpu_util}: a fraction in (0, 1]")
    dtype = opts["dtype"]
    if dtype != "auto" and dtype not in DTYPES:
        raise ModelError(f"model option dtype={dtype!r}: use auto, {', '.join(DTYPES)}")

    loaded = resolve(f"preset:{preset}" if preset else rest, opts)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    try:
        from vllm.platforms import current_platform
    except ImportError as exc:
        raise ModelError(f"{INSTALL} ({exc})") from None
    on_cpu = bool(current_platform.is_cpu())
    if dtype == "auto":
        dtype = "float32" if on_cpu else "bfloat16"
    scoring = resolve_scoring(scoring)  # here, so the data-parallel ranks get the resolved one too
    if on_cpu and pp > 1:
        if opts["enforce_eager"]:
            raise ModelError(
                f"pipeline_parallel_size={pp} on CPU needs enforce_eager=off: vLLM's CPU runner sets up the "
                "tensors passed between pipeline stages only in its compile warm-up"
            )
        eager = False
    else:
        eager = on_cpu if opts["enforce_eager"] is None else opts["enforce_eager"]
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
    envs = rank_envs(dp, tp * pp, on_cpu)
    ranks: list[DataParallel] = []
    try:
        for k in range(1, dp):  # a loop, not a comprehension: a rank that fails to spawn stops the ones before it
            ranks.append(DataParallel(kwargs, envs[k], scoring, top_k))
        llm = start_engine(kwargs, envs[0])
        for r in ranks:
            r.wait_ready()
    except BaseException:
        for r in ranks:
            r.close()
        raise
    resolved = str(llm.llm_engine.model_config.dtype).removeprefix("torch.")
    folder = weights_folder(loaded.load_from, loaded.revision)
    params = safetensors_params(folder) if folder is not None else None
    lm = VLLMBackend(llm, **loaded.named(preset), dtype=resolved, params=params, chat_template=chat, scoring=scoring,
                     top_k=top_k, batch_size=opts["batch_size"], temperature=opts["temperature"],
                     engines=ranks)  # fmt: skip
    return lm if decoding is None else VLLMText(lm)


#: the ``vllm:`` backend: options, decide modes and factory (docs/backends-serving.md's table is written from it)
BACKEND = Declaration("vllm", from_spec, options=(
    Option("dtype", "auto", "`float32`, `bfloat16`, `float16`; the *resolved* dtype is in the identity",
           shown="`auto`: float32 on CPU, bfloat16 on GPU"),
    Option("chat_template", None, "wrap the prompt in the tokenizer's chat template", Switch(),
           shown="`on` for the Instruct preset `smollm2-135m`, else `off`"),
    Option("max_model_len", None, "a lower context limit", POSITIVE_INT, shown="the model's"),
    Option("revision", None, "hub revision (branch, tag or commit)", shown="the hub's default"),
    Option("enforce_eager", None, "skip vLLM's compiled mode", Switch(),
           shown="`on` on CPU (compiling costs about 2 minutes per start on two cores), `off` on GPU"),
    Option("kv_cache_gib", None, "KV-cache size; vLLM's `gpu_memory_utilization=0.9` would mean 90 % of RAM on CPU",
           POSITIVE, shown=f"{CPU_KV_GIB:g} on CPU"),
    Option("gpu_memory_utilization", None, "fraction of GPU memory for the engine; GPU only", POSITIVE,
           shown="vLLM's (0.9)"),
    Option("tensor_parallel_size", 1, "split every layer's heads over N workers", POSITIVE_INT),
    Option("pipeline_parallel_size", 1, "split the layers over N workers (compiled mode on CPU)", POSITIVE_INT),
    Option("data_parallel_size", 1, "N engines in N processes, requests dealt out by quad", POSITIVE_INT),
    Option("distributed_executor_backend", None, "`mp` or `ray` (Ray for engines that span nodes; GPU only)",
           shown="vLLM's choice"),
    Option("seed", 0, "engine seed, and the sampling seed of `decide=generate|choice` (in their identity)", SEED),
    Option("scoring", "auto", "`exact` (`logprob_token_ids`), `top_k` (top-K with censoring), `auto` (exact where the "
           "engine has it)", shown="`auto`"),
    Option("top_k", 20, "K of the top-K fallback only", POSITIVE_INT),
    Option("batch_size", 256, "requests per runner batch", POSITIVE_INT),
    Option("temperature", 1.0, "score temperature T", POSITIVE),
), decides=("scores", "generate", "choice"), decide_help={
    "decide": "`generate`: the engine generates the answer, read by the shared parse rule; `choice`: the answer is "
    "constrained to one option symbol (vLLM structured outputs); both label-only, on one engine "
    "(`data_parallel_size=1`)",
    "max_tokens": "tokens generated per answer (`decide=generate|choice` only); in the identity",
    "gen_temperature": "sampling temperature of the generated answer (`decide=generate|choice` only; 0 is greedy); in "
    "the identity",
})  # fmt: skip
