"""Transformers backend: score option symbols as next-token log-probabilities of a causal LM.

Spec: ``hf:HUB_ID``, ``hf:PATH`` (a model folder, or a ``.gguf`` file) and the presets
``smollm2-135m`` / ``gemma3-270m``; the options are :data:`BACKEND`'s (docs/backends-hf.md).
Prompts, tokens and symbol checks come from :class:`~pfr.models.lm.core.LetterLM`, the scores from
:mod:`pfr.models.lm.letters`.

Requests of a run share long token prefixes (instruction + inventory for all; the input within a
quad; the options between the U and C requests of an assignment). Every prompt is tokenized whole,
the batch is arranged as a trie on those token ids (:mod:`~pfr.models.hf.trie`), and each shared
prefix is run once. Below the prefix every request shares (kept across ``score`` calls), the trie
runs one level per batched forward pass on padded, masked copies of the parents' key/value caches
(plain cache layers, :mod:`~pfr.models.hf.cache`), or one branch at a time on forks of its parent's
cache (sliding-window layers). The tokens fed are exactly the tokens of each whole prompt, and a
cached score equals a full forward pass up to float rounding. On CPU, Llama and Qwen2 models run each
level, and the shared prefix itself, through :mod:`pfr.models.hf.packed` instead (one packed sequence
per level, the root attended once for all rows); ``packed=off`` keeps transformers' forward.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.decide import Decoding
from pfr.models.declaration import Declaration, Option
from pfr.models.hf.attention import gqa_attention
from pfr.models.hf.cache import fill_layer, fork_cache, is_plain, log_probs
from pfr.models.hf.packed import PackedDecoder
from pfr.models.hf.packed import supports as packed_supports
from pfr.models.hf.plan import Node as PackedNode
from pfr.models.hf.trie import TrieNode, build_trie, chunks, lcp
from pfr.models.lm.core import LetterLM
from pfr.models.lm.gguf_cache import PRESET_CHAT
from pfr.models.lm.letters import exact
from pfr.models.lm.prompt import DEFAULT_TEMPLATE, PromptTemplate
from pfr.models.lm.weights import first_line, resolve
from pfr.models.options import DTYPES
from pfr.options import POSITIVE, POSITIVE_INT, Switch

#: how many shared prefixes (batch size 1 key/value caches) are kept between ``score`` calls.
KEEP_PREFIXES = 4


def from_spec(rest: str, opts: Mapping[str, Any]) -> HFBackend:
    """The backend for ``hf:REST`` (or a preset, ``preset:NAME``) with the options of :data:`BACKEND`,
    parsed; under ``decide=generate`` the registry wraps it (:mod:`pfr.models.hf.decoding` writes the text)."""
    import torch

    preset = rest.removeprefix("preset:") if rest.startswith("preset:") else None
    chat = opts["chat_template"]
    if chat is None:
        chat = PRESET_CHAT.get(preset or "", False)
    device_opt = opts["device"]
    device = ("cuda" if torch.cuda.is_available() else "cpu") if device_opt == "auto" else device_opt
    try:
        torch.device(device)
    except RuntimeError:
        raise ModelError(f"model option device={device_opt!r}: use auto, cpu, cuda or cuda:N") from None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"model option device={device}: this torch build sees no CUDA device")
    dtype = opts["dtype"]
    if dtype == "auto":
        from pfr.models.hf.auto_dtype import auto_dtype

        dtype = auto_dtype(device)  # bfloat16 only where it runs fast; the identity records the choice
    if dtype not in DTYPES:
        raise ModelError(f"model option dtype={dtype!r}: use auto, {', '.join(DTYPES)}")

    loaded = resolve(rest, opts)
    if device == "cpu":
        from pfr.models.hf.malloc import keep_freed_memory

        keep_freed_memory()  # activations reused, not page-faulted anew in every layer
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the weight-loading bar is noise next to pfr's own progress

    try:
        tokenizer = AutoTokenizer.from_pretrained(loaded.load_from, revision=loaded.revision)
        placement = {} if device == "cpu" else {"device_map": device}  # load straight onto the accelerator
        model: Any = AutoModelForCausalLM.from_pretrained(
            loaded.load_from, revision=loaded.revision, dtype=getattr(torch, dtype), **placement
        )
    except (OSError, ValueError, KeyError) as exc:
        raise ModelError(f"hf:{rest}: cannot load the model ({first_line(exc)})") from None
    model.to(device)
    model.eval()
    named = loaded.named(preset, getattr(model.config, "_commit_hash", None))
    return HFBackend(model, tokenizer, **named, dtype=dtype, chat_template=chat, temperature=opts["temperature"],
                     batch_size=opts["batch_size"], max_length=opts["max_length"], prefix_cache=opts["prefix_cache"],
                     packed=opts["packed"])  # fmt: skip


class HFBackend(LetterLM):
    """A causal LM that scores each option symbol by its next-token log-probability after the prompt."""

    kind = "hf"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        name: str,
        source: Mapping[str, str],
        dtype: str,
        chat_template: bool = False,
        temperature: float = 1.0,
        batch_size: int = 16,
        max_length: int | None = None,
        prefix_cache: bool = True,
        packed: bool = True,
        template: PromptTemplate = DEFAULT_TEMPLATE,
    ) -> None:
        import torch

        #: parameters counted from the loaded weights (tied embeddings once): part of the identity.
        params = int(sum(p.numel() for p in model.parameters()))
        super().__init__(name=name, source=dict(source), params=params, chat_template=chat_template,
                         temperature=temperature, batch_size=batch_size, template=template)  # fmt: skip
        self.model = model
        self.tokenizer = tokenizer
        self.dtype = dtype
        self.prefix_cache = prefix_cache
        if chat_template and not getattr(tokenizer, "chat_template", None):
            raise ModelError(f"{name}: chat_template=on but the tokenizer has no chat template")
        get_text = getattr(model.config, "get_text_config", None)
        text_config = get_text() if get_text is not None else model.config
        limit = getattr(text_config, "max_position_embeddings", None)
        if max_length is not None:
            limit = max_length if limit is None else min(limit, max_length)
        self.max_length: int | None = limit
        self.context_limit = limit
        forward = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in forward else "past_key_values"
        self._keep_kw = "logits_to_keep" in forward
        self._device = next(model.parameters()).device
        #: whether attention runs grouped-query heads inside SDPA under a padding mask (see attention.py)
        self.gqa_attention = gqa_attention(model, self._device)
        #: the packed level forward (:mod:`pfr.models.hf.packed`) where the architecture allows it, else None
        self.packed = PackedDecoder(model) if packed and prefix_cache and packed_supports(model, self._device) else None
        self._pad_id = 0 if tokenizer.pad_token_id is None else int(tokenizer.pad_token_id)
        self.init_symbols()
        self._prefixes: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        #: chunk caches kept across ``decide=generate`` calls (:mod:`pfr.models.hf.decoding`)
        self._gen_prefixes: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        #: the batched greedy path's logit gap below which a request is decoded again (set by its first batch)
        self._gen_close: float | None = None
        #: tokens fed to the model vs tokens in the prompts, since construction (the benchmark reads these).
        self.stats = {"prompt_tokens": 0, "computed_tokens": 0, "padded_tokens": 0, "forward_calls": 0}
        self._torch = torch

    def clear_prefixes(self) -> None:
        """Forget the prefix caches kept across calls (a benchmark's repeat then starts cold)."""
        self._prefixes.clear()
        self._gen_prefixes.clear()

    def settings(self) -> dict[str, Any]:
        return {"dtype": self.dtype}

    def close(self) -> None:
        """Drop the kept prefix caches (the weights go with the backend object)."""
        self._prefixes.clear()
        self._gen_prefixes.clear()

    def complete(self, tokens: list[int], request: Request, decoding: Decoding) -> str:
        return self.complete_many([tokens], [request], decoding)[0]

    def complete_many(self, tokens: Sequence[list[int]], requests: Sequence[Request], decoding: Decoding) -> list[str]:
        """The answers after each prompt's ``tokens``, shared prefixes run once (:mod:`pfr.models.hf.decoding`):
        each the same as :meth:`complete` alone gives it."""
        from pfr.models.hf.decoding import generate_many

        return generate_many(self, tokens, decoding)

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        if not requests:
            return []
        torch = self._torch
        prepared = self.prepare(requests)
        ids = [p.tokens for p in prepared]
        self.stats["prompt_tokens"] += sum(len(t) for t in ids)
        logprobs: list[Any] = [None] * len(ids)
        with torch.inference_mode():
            if self.prefix_cache and len(ids) > 0:
                root, depth = self._root(ids)
                trie = build_trie(ids, depth)
                if is_plain(root) and self.packed is not None:
                    self._packed_levels(root, trie, logprobs)
                elif is_plain(root):
                    self._levels(root, trie, logprobs)
                else:  # sliding-window or other cache layers: one branch at a time
                    self._descend(root, depth, trie, ids, logprobs)
            else:
                for i in range(len(ids)):
                    self._leaves(None, 0, [i], ids, logprobs)
        out = []
        for p, lp in zip(prepared, logprobs):
            sel = lp[torch.tensor(p.symbols)]  # float64: the option mass summed as torch sums it
            out.append(exact(sel.tolist(), {"prompt_tokens": len(p.tokens)}, mass=float(sel.exp().sum())))
        return out

    # ------------------------------------------------------------------ prefix-cached forward passes
    def _root(self, ids: list[list[int]]) -> tuple[Any, int]:
        """The cache of the prefix all rows share, from (or extending) one kept from earlier calls."""
        depth = lcp(ids)
        best: tuple[int, ...] = ()
        for key in self._prefixes:
            if len(best) < len(key) <= depth and tuple(ids[0][: len(key)]) == key:
                best = key
        cache = self._prefixes[best] if best else None
        if best:
            self._prefixes.move_to_end(best)
        if len(best) < depth:
            cache = self._extend(cache, ids[0][len(best) : depth])
            if len(ids) > 1:
                self._prefixes[tuple(ids[0][:depth])] = cache
                while len(self._prefixes) > KEEP_PREFIXES:
                    self._prefixes.popitem(last=False)
        return cache, depth

    def _levels(self, root: Any, level: list[TrieNode], out: list[Any]) -> None:
        """Score every row below the shared ``root`` cache, one trie *level* per batched forward.

        ``level`` is the first level of the rows' token trie below the root (:func:`_trie`). All the
        nodes of one level (the inputs of every quad, then every assignment's options, then every
        request's rule and answer cue) run together: each row of the batch is one node, its past is its
        parent's keys and values, left-padded to the longest parent and masked, and its positions
        continue from its parent's length. A node keeps a view of its own real positions for its children, so a padded
        token is never attended to. Few, wide forward passes instead of one per branch: the weights are
        read once per level, not once per node.
        """
        layers: Any = root.layers
        root_kv = [(layer.keys, layer.values) for layer in layers]
        parents: dict[int, list[tuple[Any, Any]]] = {-1: root_kv}  # node id → its keys/values per layer
        while level:
            nxt: list[TrieNode] = []
            order = sorted(level, key=lambda n: len(n.tokens))
            for chunk in chunks([(len(n.tokens), i) for i, n in enumerate(order)], self.batch_size):
                nodes = [order[i] for i in chunk]
                self._level_forward(nodes, parents, out)
                for n in nodes:
                    nxt.extend(n.children)
            for n in level:  # this level's parents are done with; the next level's are this level's nodes
                parents.pop(n.parent, None)
            level = nxt

    def _packed_levels(self, root: Any, level: list[TrieNode], out: list[Any]) -> None:
        """Score every row below the shared ``root`` cache with the packed forward, one whole trie level
        per pass (:mod:`pfr.models.packed`): no padding in the weight products, no copy of the root per row."""
        for nodes, leaves, logits, _ in self._packed_trie(root, level):
            if leaves:
                lp = log_probs(logits)
                for j, i in enumerate(leaves):
                    out[nodes[i].row] = lp[j]  # type: ignore[index]

    def _packed_trie(
        self, root: Any, level: list[TrieNode], keep_leaves: bool = False
    ) -> Iterator[tuple[list[TrieNode], list[int], Any, Any]]:
        """The packed forward over the trie below ``root``, one whole level per pass: yields each level's
        nodes, its leaves (indices into the nodes), their next-token logits and the level's kept past —
        the rows of the nodes with children, and with ``keep_leaves`` of every node (a leaf's row is then
        its index), which generation continues from (:mod:`pfr.models.hf.decoding`)."""
        assert self.packed is not None
        layers: Any = root.layers
        root_kv = [(layer.keys[0], layer.values[0]) for layer in layers]
        past = None
        row_of = {-1: -1}  # node id → its row among the previous level's kept nodes
        while level:
            nodes = [PackedNode(n.tokens, row_of[n.parent], keep_leaves or bool(n.children)) for n in level]
            leaves = [i for i, n in enumerate(level) if n.row is not None]
            logits, past = self.packed.level(root_kv, past, nodes, leaves)
            real = sum(len(n.tokens) for n in level)
            self._count(real, real)
            yield level, leaves, logits, past
            kept = [n for n in level if keep_leaves or n.children]
            row_of = {n.id: j for j, n in enumerate(kept)}
            level = [c for n in kept for c in n.children]

    def _level_forward(self, nodes: list[TrieNode], parents: dict[int, list[tuple[Any, Any]]], out: list[Any]) -> None:
        """One batched forward over ``nodes`` (see :meth:`_levels`)."""
        from transformers import DynamicCache

        torch = self._torch
        past = [parents[n.parent] for n in nodes]
        lengths = [kv[0][0].shape[-2] for kv in past]
        t_max = max(lengths)
        width = max(len(n.tokens) for n in nodes)
        b = len(nodes)
        cache = DynamicCache(config=self.model.config)
        n_layers = len(past[0])
        for li in range(n_layers):
            k0, v0 = past[0][li]
            shape = (b, k0.shape[1], t_max, k0.shape[3])
            keys = k0.new_zeros(shape)
            values = v0.new_zeros(shape)
            for i, kv in enumerate(past):
                k, v = kv[li]
                keys[i, :, t_max - lengths[i] :] = k[0]
                values[i, :, t_max - lengths[i] :] = v[0]
            fill_layer(cache, li, keys, values)
        x = self._padded([n.tokens for n in nodes])
        mask = torch.zeros((b, t_max + width), dtype=torch.long, device=self._device)
        for i, n in enumerate(nodes):
            mask[i, t_max - lengths[i] : t_max + len(n.tokens)] = 1
        pos = torch.tensor(lengths, device=self._device)[:, None] + torch.arange(width, device=self._device)[None, :]
        leaves = [i for i, n in enumerate(nodes) if n.row is not None]
        kwargs: dict[str, Any] = {self._cache_kw: cache, "use_cache": True, "attention_mask": mask,
                                  "position_ids": pos}  # fmt: skip
        lp = self._answers(x, kwargs, leaves, [len(nodes[i].tokens) - 1 for i in leaves])
        for j, i in enumerate(leaves):
            out[nodes[i].row] = lp[j]  # type: ignore[index]
        grown: Any = cache.layers
        for i, n in enumerate(nodes):
            if n.children:  # a view of this node's real positions: its parent's, then its own tokens
                start, end = t_max - lengths[i], t_max + len(n.tokens)
                parents[n.id] = [(layer.keys[i : i + 1, :, start:end], layer.values[i : i + 1, :, start:end])
                                 for layer in grown]  # fmt: skip
        self._count(sum(len(n.tokens) for n in nodes), width * b)

    def _descend(self, cache: Any, depth: int, nodes: list[TrieNode], ids: list[list[int]], out: list[Any]) -> None:
        """Score the trie ``nodes`` below ``cache`` (which holds ``depth`` tokens) one branch at a time:
        each internal node extends a fork of the cache, and the leaves run together on it."""
        for n in nodes:
            if n.row is None:
                self._descend(self._extend(cache, n.tokens), depth + len(n.tokens), n.children, ids, out)
        leaves = [n.row for n in nodes if n.row is not None]
        if leaves:
            self._leaves(cache, depth, leaves, ids, out)

    def _extend(self, cache: Any, tokens: list[int]) -> Any:
        """A new batch-1 cache: ``cache`` (or nothing) followed by ``tokens``; through the packed forward
        where it applies (fused products, the last layer only up to its keys and values)."""
        from transformers import DynamicCache

        torch = self._torch
        if self.packed is not None and (cache is None or is_plain(cache)):
            root = [(layer.keys[0], layer.values[0]) for layer in cache.layers] if cache is not None else []
            grown = DynamicCache(config=self.model.config)
            for li, (k, v) in enumerate(self.packed.extend(root, tokens)):
                fill_layer(grown, li, k[None], v[None])
            self._count(len(tokens), len(tokens))
            return grown
        past = fork_cache(cache, 1) if cache is not None else DynamicCache(config=self.model.config)
        x = torch.tensor([tokens], device=self._device)
        kwargs: dict[str, Any] = {self._cache_kw: past, "use_cache": True}
        if self._keep_kw:
            kwargs["logits_to_keep"] = 1
        self.model(input_ids=x, **kwargs)
        self._count(len(tokens), len(tokens))
        return past

    def _leaves(self, cache: Any, depth: int, rows: list[int], ids: list[list[int]], out: list[Any]) -> None:
        """Run the rest of each row after the shared prefix, right-padded, and keep the next-token log-probs.

        Padding after a row's last token cannot reach it under the causal mask, and position ids
        continue from the prefix, so no attention mask is needed.
        """
        for chunk in chunks(sorted((len(ids[r]) - depth, r) for r in rows), self.batch_size):
            tails = [ids[r][depth:] for r in chunk]
            x = self._padded(tails)
            kwargs: dict[str, Any] = {"use_cache": cache is not None}
            if cache is not None:
                kwargs[self._cache_kw] = fork_cache(cache, len(chunk))
            lp = self._answers(x, kwargs, list(range(len(chunk))), [len(t) - 1 for t in tails])
            for i, r in enumerate(chunk):
                out[r] = lp[i]
            self._count(sum(len(t) for t in tails), x.numel())

    def _padded(self, rows: list[list[int]]) -> Any:
        """The token rows as one right-padded ``(rows × longest)`` input tensor."""
        torch = self._torch
        x = torch.full((len(rows), max(len(t) for t in rows)), self._pad_id, dtype=torch.long, device=self._device)
        for i, t in enumerate(rows):
            x[i, : len(t)] = torch.tensor(t, device=self._device)
        return x

    def _answers(self, x: Any, kwargs: dict[str, Any], rows: list[int], last: list[int]) -> Any:
        """Run the model on ``x`` and return the next-token log-probs (float64, CPU) at position
        ``last[j]`` of batch row ``rows[j]``; only those positions' logits are computed (``logits_to_keep``)."""
        torch = self._torch
        keep = sorted(set(last)) or [0]
        if self._keep_kw:
            kwargs["logits_to_keep"] = torch.tensor(keep, device=self._device)
        logits = self.model(input_ids=x, **kwargs).logits
        if not rows:
            return None
        col = [keep.index(j) for j in last] if self._keep_kw else last
        return log_probs(logits[torch.tensor(rows), torch.tensor(col)])

    def _count(self, real: int, padded: int) -> None:
        """Tokens fed to the model in one forward pass (the benchmarks read these)."""
        self.stats["computed_tokens"] += real
        self.stats["padded_tokens"] += padded
        self.stats["forward_calls"] += 1


#: the ``hf:`` backend: options, decide modes and factory (docs/backends-hf.md's table is written from it)
BACKEND = Declaration("hf", from_spec, options=(
    Option("gguf_file", None, "GGUF file name inside a hub repo or a local folder (`hf:PATH.gguf` needs no option)"),
    Option("chat_template", None, "wrap the rendered prompt as one user message with the tokenizer's chat template "
           "and `add_generation_prompt=True`", Switch(), shown="`on` for `smollm2-135m`, else `off`"),
    Option("dtype", "auto", "`float32`, `bfloat16`, `float16`; part of the identity (it changes scores)",
           shown="`auto`: `bfloat16` on CUDA and on CPUs with AMX (`amx_bf16`; with `avx512_bf16` alone, if a short "
           "probe finds it 1.5× faster), else `float32`; `PFR_CPU_DTYPE=float32\\|bfloat16` fixes the CPU choice"),
    Option("device", "auto", "`cpu`, `cuda`, `cuda:N`", shown="`auto` (CUDA if torch sees one)"),
    Option("temperature", 1.0, "score temperature T (also `--temperature`)", POSITIVE),
    Option("revision", None, "hub revision (branch, tag or commit); the resolved commit is recorded", shown="`main`"),
    Option("batch_size", 16, "requests per `score` call (the runner's batch) and most rows per forward pass; keep it "
           "a multiple of 4 so a quad's requests share their prefixes", POSITIVE_INT),
    Option("max_length", None, "a lower context limit", POSITIVE_INT,
           shown="the model's `max_position_embeddings`"),
    Option("prefix_cache", True, "`off` runs one plain forward pass per request (for checking; same scores)",
           Switch()),
    Option("packed", True, "on CPU, Llama and Qwen2 models (with a torch whose CPU flash kernel takes grouped "
           "key/value heads and a causal mode, as 2.13's does; probed once) run the shared prefix and each trie level "
           "as one packed sequence (`pfr.models.hf.packed`: no padding, fused q/k/v and gate/up products, root prefix "
           "attended once for all rows, merged by log-sum-exp); `off` keeps transformers' level-batched forward (same "
           "scores within 1e-4)", Switch()),
), decides=("scores", "generate"), decide_help={
    "decide": "`generate`: the greedy answer the model writes after the same prompt decides, read by the one parse "
    'rule (docs/backends-serving.md, "Decisions from generated text"); `choice` is refused on `hf:`',
    "max_tokens": "new tokens generated per request (with `decide`)",
    "seed": "sampling seed of each request's generation, recorded in the identity",
    "gen_temperature": "0: greedy (argmax of the full-vocabulary distribution); above 0: sampled from "
    "softmax(logits / T)",
})  # fmt: skip
