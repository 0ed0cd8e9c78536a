"""Transformers backend: score option symbols as next-token log-probabilities of a causal LM.

Spec: ``hf:HUB_ID``, ``hf:PATH`` (a model folder, or a ``.gguf`` file) and the presets
``smollm2-135m`` / ``gemma3-270m``. Options (``--model-opt key=value``): ``gguf_file``,
``chat_template`` (on/off), ``dtype`` (auto/float32/bfloat16/float16), ``device`` (auto/cpu/cuda[:N]),
``temperature``, ``revision``, ``batch_size``, ``max_length``, ``prefix_cache`` (on/off).

The symbol's score is its log-probability as the *next* token after the prompt, in the form the
model would write it there: ``" A"`` after a prompt that ends in a visible character (``Answer:``),
``"A"`` after one that ends in whitespace (a chat template's ``assistant\\n``). Each symbol must be
one token in that position, and the prompt plus the answer token must fit the context length.

Requests of a run share long token prefixes (instruction + inventory for all; the input within a
quad; the options between the U and C requests of an assignment). Every prompt is tokenized whole,
the batch is arranged as a trie on those token ids, and each shared prefix is run once. Below the
prefix every request shares (kept across ``score`` calls), the trie runs one level per batched
forward pass on padded, masked copies of the parents' key/value caches (plain cache layers), or one
branch at a time on forks of its parent's cache (sliding-window layers). The tokens fed are exactly
the tokens of each whole prompt, and a cached score equals a full forward pass up to float rounding.
On CPU, Llama and Qwen2 models run each level, and the shared prefix itself, through
:mod:`pfr.models.packed` instead (one packed sequence per level, the root attended once for all rows);
``packed=off`` keeps transformers' forward.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.gguf_cache import PRESET_CHAT, PRESETS, GGUFSource, ensure_converted, file_sha256
from pfr.models.letters import SymbolTokens, check_context
from pfr.models.options import on_off, positive
from pfr.models.packed import Node as PackedNode
from pfr.models.packed import PackedDecoder
from pfr.models.packed import supports as packed_supports
from pfr.models.prompt import DEFAULT_TEMPLATE, PromptTemplate, chat_wrap, render

OPTIONS = (
    "gguf_file",
    "chat_template",
    "dtype",
    "device",
    "temperature",
    "revision",
    "batch_size",
    "max_length",
    "prefix_cache",
    "packed",
)
#: how many shared prefixes (batch size 1 key/value caches) are kept between ``score`` calls.
KEEP_PREFIXES = 4
#: a leaf batch may hold at most this many times its real tokens once right-padded (padding costs compute).
PAD_WASTE = 1.25
_DTYPES = ("float32", "bfloat16", "float16")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def _dir_sha256(path: Path) -> str:
    """One hash over every file of a model folder (names and contents): the identity of local weights."""
    digest = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = f.relative_to(path)
        if not any(part.startswith(".") for part in rel.parts):
            digest.update(f"{rel.as_posix()}\0{file_sha256(f)}\n".encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class _Loaded:
    """What from_spec resolved: where the weights are, and the identity fields that name them."""

    load_from: str
    name: str
    source: dict[str, str]
    revision: str | None = None
    hub: bool = False


def _resolve(rest: str, opts: Mapping[str, str]) -> _Loaded:
    """Spec remainder → the folder or hub id to load, its display name and its weight identity."""
    if rest.startswith("preset:"):
        preset = rest.removeprefix("preset:")
        if preset not in PRESETS:
            raise ModelError(f"unknown hf preset {preset!r} (known: {', '.join(PRESETS)})")
        return _from_gguf(PRESETS[preset]())
    gguf_file = opts.get("gguf_file")
    path = Path(rest).expanduser()
    if path.exists():
        if path.is_file():
            if path.suffix != ".gguf":
                raise ModelError(f"{path}: a model file must be a .gguf (or give the model folder)")
            return _from_gguf(GGUFSource(path.name, path.resolve(), file_sha256(path)))
        if gguf_file:
            file = path / gguf_file
            if not file.is_file():
                raise ModelError(f"{file}: GGUF file not found (model option gguf_file)")
            return _from_gguf(GGUFSource(file.name, file.resolve(), file_sha256(file)))
        if not (path / "config.json").is_file():
            raise ModelError(f"{path}: not a transformers model folder (no config.json; for a GGUF give gguf_file=)")
        folder = path.resolve()
        return _Loaded(str(folder), folder.name, {"model": folder.name, "dir_sha256": _dir_sha256(folder)})
    if rest.startswith(("/", ".", "~")) or rest.endswith(".gguf") or rest.count("/") > 1:
        raise ModelError(f"{rest}: no such model file or folder")
    if not rest:
        raise ModelError("hf model spec needs a hub id or a path: hf:ID_OR_PATH")
    revision = opts.get("revision")
    if gguf_file:
        try:
            from huggingface_hub import hf_hub_download

            local = Path(hf_hub_download(rest, gguf_file, revision=revision))
        except Exception as exc:  # hub errors have many types; all mean "cannot get this file"
            raise ModelError(f"hf:{rest}: cannot fetch {gguf_file} ({_first_line(exc)})") from None
        src = GGUFSource(f"{rest.replace('/', '--')}--{gguf_file}", local, file_sha256(local))
        loaded = _from_gguf(src)
        return _Loaded(loaded.load_from, rest, {"model": rest, "gguf_file": gguf_file, "file_sha256": src.sha256})
    return _Loaded(rest, rest, {"model": rest}, revision, hub=True)


def _from_gguf(src: GGUFSource) -> _Loaded:
    folder = ensure_converted(src)
    return _Loaded(str(folder), src.name, {"model": src.path.name, "file_sha256": src.sha256})


def from_spec(rest: str, opts: Mapping[str, str]) -> HFBackend:
    """The backend for ``hf:REST`` (or a preset, ``preset:NAME``) with ``--model-opt`` options."""
    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise ModelError(f"unknown hf model option(s) {', '.join(unknown)} (known: {', '.join(OPTIONS)})")
    import torch

    preset = rest.removeprefix("preset:") if rest.startswith("preset:") else None
    chat = on_off(opts, "chat_template", PRESET_CHAT.get(preset or "", False))
    device_opt = opts.get("device", "auto")
    device = ("cuda" if torch.cuda.is_available() else "cpu") if device_opt == "auto" else device_opt
    try:
        torch.device(device)
    except RuntimeError:
        raise ModelError(f"model option device={device_opt!r}: use auto, cpu, cuda or cuda:N") from None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"model option device={device}: this torch build sees no CUDA device")
    dtype = opts.get("dtype", "auto")
    if dtype == "auto":
        from pfr.models.auto_dtype import auto_dtype

        dtype = auto_dtype(device)  # bfloat16 only where it runs fast; the identity records the choice
    if dtype not in _DTYPES:
        raise ModelError(f"model option dtype={dtype!r}: use auto, {', '.join(_DTYPES)}")
    temperature = positive(opts, "temperature", float, 1.0)
    batch_size = positive(opts, "batch_size", int, 16)
    max_length = positive(opts, "max_length", int, None)
    prefix_cache = on_off(opts, "prefix_cache", True)
    packed_forward = on_off(opts, "packed", True)

    loaded = _resolve(rest, opts)
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
        raise ModelError(f"hf:{rest}: cannot load the model ({_first_line(exc)})") from None
    model.to(device)
    model.eval()
    source = dict(loaded.source)
    if loaded.hub:
        source["revision"] = getattr(model.config, "_commit_hash", None) or loaded.revision or "main"
    return HFBackend(
        model,
        tokenizer,
        name=preset or loaded.name,
        source=source,
        dtype=dtype,
        chat_template=chat,
        temperature=temperature,
        batch_size=batch_size,
        max_length=max_length,
        prefix_cache=prefix_cache,
        packed=packed_forward,
    )


class HFBackend:
    """A causal LM that scores each option symbol by its next-token log-probability after the prompt."""

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

        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.source = dict(source)
        self.dtype = dtype
        self.chat_template = chat_template
        self._temperature = temperature
        #: requests per ``score`` call the runner sends; a multiple of 4 keeps each quad in one call.
        self.batch_size = batch_size
        self.prefix_cache = prefix_cache
        self.template = template
        if chat_template and not getattr(tokenizer, "chat_template", None):
            raise ModelError(f"{name}: chat_template=on but the tokenizer has no chat template")
        get_text = getattr(model.config, "get_text_config", None)
        text_config = get_text() if get_text is not None else model.config
        limit = getattr(text_config, "max_position_embeddings", None)
        if max_length is not None:
            limit = max_length if limit is None else min(limit, max_length)
        self.max_length: int | None = limit
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_kw = "logits_to_keep" in params
        self._device = next(model.parameters()).device
        #: whether attention runs grouped-query heads inside SDPA under a padding mask (see _gqa_attention)
        self.gqa_attention = _gqa_attention(model, self._device)
        #: the packed level forward (:mod:`pfr.models.packed`) where the architecture allows it, else None
        self.packed = PackedDecoder(model) if packed and prefix_cache and packed_supports(model, self._device) else None
        self._pad_id = 0 if tokenizer.pad_token_id is None else int(tokenizer.pad_token_id)
        self._symbols = SymbolTokens(
            lambda text: tokenizer(text, add_special_tokens=False)["input_ids"],
            name,
            pieces=tokenizer.convert_ids_to_tokens,
        )
        #: parameters counted from the loaded weights (tied embeddings once): part of the identity.
        self.params = int(sum(p.numel() for p in model.parameters()))
        self._prefixes: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        #: tokens fed to the model vs tokens in the prompts, since construction (the benchmark reads these).
        self.stats = {"prompt_tokens": 0, "computed_tokens": 0, "padded_tokens": 0, "forward_calls": 0}
        self._torch = torch

    def clear_prefixes(self) -> None:
        """Forget the prefix caches kept across ``score`` calls (a benchmark's repeat then starts cold)."""
        self._prefixes.clear()

    # ------------------------------------------------------------------ Backend protocol
    @property
    def identity(self) -> dict[str, Any]:
        return {
            "backend": "hf",
            "name": self.name,
            **self.source,
            "params": self.params,
            "dtype": self.dtype,
            "chat_template": "on" if self.chat_template else "off",
            "temperature": self._temperature,
            "template": self.template.to_dict(),
        }

    @property
    def temperature(self) -> float:
        return self._temperature

    def prompt(self, request: Request) -> str:
        """The exact string that is tokenized (see :meth:`encode`): the rendered prompt, chat-wrapped if on."""
        text = render(request, self.template)
        if not self.chat_template:
            return text
        return chat_wrap(self.tokenizer, text)

    def encode(self, prompt: str) -> list[int]:
        """Token ids of a whole prompt: the tokenizer's special tokens (BOS) for plain text; none
        added to chat-templated text, whose template writes its own."""
        return list(self.tokenizer(prompt, add_special_tokens=not self.chat_template)["input_ids"])

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        if not requests:
            return []
        torch = self._torch
        ids = []
        targets = []
        for r in requests:
            prompt = self.prompt(r)
            toks = self.encode(prompt)
            check_context(len(toks), self.max_length, self.name, r.request_id)
            ids.append(toks)
            targets.append(self._symbols.ids(prompt, (o.symbol for o in r.options), r.request_id))
        self.stats["prompt_tokens"] += sum(len(t) for t in ids)
        logprobs: list[Any] = [None] * len(ids)
        with torch.inference_mode():
            if self.prefix_cache and len(ids) > 0:
                root, depth = self._root(ids)
                trie = _trie(ids, depth)
                if _plain(root) and self.packed is not None:
                    self._packed_levels(root, trie, logprobs)
                elif _plain(root):
                    self._levels(root, trie, logprobs)
                else:  # sliding-window or other cache layers: one branch at a time
                    self._descend(root, depth, trie, ids, logprobs)
            else:
                for i in range(len(ids)):
                    self._leaves(None, 0, [i], ids, logprobs)
        out = []
        for toks, tgt, lp in zip(ids, targets, logprobs):
            sel = lp[torch.tensor(tgt)]
            out.append(
                Scores(
                    tuple(float(x) for x in sel.tolist()),
                    meta={"prompt_tokens": len(toks), "option_mass": float(sel.exp().sum())},
                )
            )
        return out

    # ------------------------------------------------------------------ symbols
    def symbol_id(self, prompt: str, symbol: str, request_id: str = "?") -> int:
        """The one token that writes ``symbol`` right after ``prompt`` (:mod:`pfr.models.letters`)."""
        return self._symbols(prompt, symbol, request_id)

    # ------------------------------------------------------------------ prefix-cached forward passes
    def _root(self, ids: list[list[int]]) -> tuple[Any, int]:
        """The cache of the prefix all rows share, from (or extending) one kept from earlier calls."""
        depth = _lcp(ids)
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

    def _levels(self, root: Any, level: list[_Node], out: list[Any]) -> None:
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
            nxt: list[_Node] = []
            order = sorted(level, key=lambda n: len(n.tokens))
            for chunk in _chunks([(len(n.tokens), i) for i, n in enumerate(order)], self.batch_size):
                nodes = [order[i] for i in chunk]
                self._level_forward(nodes, parents, out)
                for n in nodes:
                    nxt.extend(n.children)
            for n in level:  # this level's parents are done with; the next level's are this level's nodes
                parents.pop(n.parent, None)
            level = nxt

    def _packed_levels(self, root: Any, level: list[_Node], out: list[Any]) -> None:
        """Score every row below the shared ``root`` cache with the packed forward, one whole trie level
        per pass (:mod:`pfr.models.packed`): no padding in the weight products, no copy of the root per row."""
        assert self.packed is not None
        layers: Any = root.layers
        root_kv = [(layer.keys[0], layer.values[0]) for layer in layers]
        past = None
        row_of = {-1: -1}  # node id → its row among the previous level's kept nodes
        while level:
            nodes = [PackedNode(n.tokens, row_of[n.parent], bool(n.children)) for n in level]
            leaves = [i for i, n in enumerate(level) if n.row is not None]
            logits, past = self.packed.level(root_kv, past, nodes, leaves)
            if leaves:
                lp = _log_probs(logits)
                for j, i in enumerate(leaves):
                    out[level[i].row] = lp[j]  # type: ignore[index]
            kept = [n for n in level if n.children]
            row_of = {n.id: j for j, n in enumerate(kept)}
            real = sum(len(n.tokens) for n in level)
            self._count(real, real)
            level = [c for n in kept for c in n.children]

    def _level_forward(self, nodes: list[_Node], parents: dict[int, list[tuple[Any, Any]]], out: list[Any]) -> None:
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
            _fill(cache, li, keys, values)
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

    def _descend(self, cache: Any, depth: int, nodes: list[_Node], ids: list[list[int]], out: list[Any]) -> None:
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
        if self.packed is not None and (cache is None or _plain(cache)):
            root = [(layer.keys[0], layer.values[0]) for layer in cache.layers] if cache is not None else []
            grown = DynamicCache(config=self.model.config)
            for li, (k, v) in enumerate(self.packed.extend(root, tokens)):
                _fill(grown, li, k[None], v[None])
            self._count(len(tokens), len(tokens))
            return grown
        past = _fork(cache, 1) if cache is not None else DynamicCache(config=self.model.config)
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
        for chunk in _chunks(sorted((len(ids[r]) - depth, r) for r in rows), self.batch_size):
            tails = [ids[r][depth:] for r in chunk]
            x = self._padded(tails)
            kwargs: dict[str, Any] = {"use_cache": cache is not None}
            if cache is not None:
                kwargs[self._cache_kw] = _fork(cache, len(chunk))
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
        return _log_probs(logits[torch.tensor(rows), torch.tensor(col)])

    def _count(self, real: int, padded: int) -> None:
        """Tokens fed to the model in one forward pass (the benchmarks read these)."""
        self.stats["computed_tokens"] += real
        self.stats["padded_tokens"] += padded
        self.stats["forward_calls"] += 1


def _fill(cache: Any, li: int, keys: Any, values: Any) -> None:
    """Layer ``li`` of a fresh ``DynamicCache`` holding exactly ``keys``/``values`` (``update()`` would copy
    them once more)."""
    layer: Any = cache.layers[li]
    layer.lazy_initialization(keys, values)
    layer.keys, layer.values = keys, values


def _log_probs(logits: Any) -> Any:
    """Next-token log-probs (float64, CPU) from one row of logits per answer."""
    import torch

    return torch.log_softmax(logits.double(), dim=-1).cpu()  # fp32 sums over a 262k vocabulary drift by 1e-4


#: the attention implementation registered by :func:`_gqa_attention`
GQA_SDPA = "pfr_sdpa_gqa"


def _sdpa_gqa(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """Transformers' SDPA attention, except that under a padding mask grouped key/value heads go to
    ``scaled_dot_product_attention(enable_gqa=True)`` instead of being repeated per query head first:
    the same arithmetic (identical scores here) without copying every layer's past once per head group.
    The level-batched trie always passes a mask, so on CPU this is most of its attention."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = getattr(module, "num_key_value_groups", 1)
    if attention_mask is None or groups == 1 or kwargs.get("position_bias") is not None or dropout:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)  # fmt: skip
    import torch

    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, scale=scaling, enable_gqa=True
    )
    return out.transpose(1, 2).contiguous(), None


def _gqa_attention(model: Any, device: Any) -> bool:
    """Use :func:`_sdpa_gqa` for a CPU model on SDPA whose layers are all full attention (sliding-window
    models keep transformers' own). Returns whether it is in use."""
    config = model.config
    get_text = getattr(config, "get_text_config", None)
    text = get_text() if get_text is not None else config
    kinds = getattr(text, "layer_types", None) or ["full_attention"]
    if getattr(device, "type", "cpu") != "cpu" or getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    kv_heads = getattr(text, "num_key_value_heads", None)
    if any(k != "full_attention" for k in kinds) or kv_heads in (None, getattr(text, "num_attention_heads", None)):
        return False
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(GQA_SDPA, _sdpa_gqa)
        AttentionMaskInterface.register(GQA_SDPA, sdpa_mask)
        model.set_attn_implementation(GQA_SDPA)
    except (ImportError, AttributeError, ValueError, TypeError):  # an older transformers: keep its SDPA
        return False
    return True


@dataclass
class _Node:
    """A trie node below the shared root: the tokens after its parent's; ``row`` is set on a leaf
    (the request whose answer is read at its last token)."""

    id: int
    parent: int
    tokens: list[int]
    row: int | None = None
    children: list[_Node] = field(default_factory=list)


def _trie(ids: list[list[int]], depth: int) -> list[_Node]:
    """The first level of the compressed token trie of ``ids`` below their shared ``depth``: an
    internal node holds a run of tokens two or more rows share; each row ends in a leaf that holds
    its remaining tokens (at least one, the one after which the answer is read)."""
    counter = [0]

    def build(rows: list[int], at: int, parent: int) -> list[_Node]:
        groups: dict[int, list[int]] = {}
        for r in rows:
            groups.setdefault(ids[r][at], []).append(r)
        nodes: list[_Node] = []
        for group in groups.values():
            if len(group) > 1:
                end = _lcp([ids[r] for r in group])
                if end > at:
                    node = _Node(counter[0], parent, ids[group[0]][at:end])
                    counter[0] += 1
                    node.children = build(group, end, node.id)
                    nodes.append(node)
                    continue
            for r in group:
                nodes.append(_Node(counter[0], parent, ids[r][at:], row=r))
                counter[0] += 1
        return nodes

    return build(list(range(len(ids))), depth, -1)


def _plain(cache: Any) -> bool:
    """Whether every layer of ``cache`` is a plain growing key/value layer (no sliding window), so that
    its tensors can be padded, masked and stacked across rows."""
    from transformers.cache_utils import DynamicLayer

    layers: Any = getattr(cache, "layers", None) or []
    return bool(layers) and all(type(layer) is DynamicLayer and layer.keys is not None and layer.keys.numel()
                                for layer in layers)  # fmt: skip


def _chunks(rows: list[tuple[int, int]], size: int) -> list[list[int]]:
    """``(length, row)`` pairs sorted by length → batches of at most ``size`` rows, padded by ≤ PAD_WASTE."""
    out: list[list[int]] = []
    chunk: list[int] = []
    real = 0
    for n, r in rows:
        if chunk and (len(chunk) == size or n * (len(chunk) + 1) > PAD_WASTE * (real + n)):
            out.append(chunk)
            chunk, real = [], 0
        chunk.append(r)
        real += n
    if chunk:
        out.append(chunk)
    return out


def _lcp(seqs: list[list[int]]) -> int:
    """Longest common prefix length, at most ``min(len) - 1``: each row keeps one token to predict from."""
    limit = min(len(s) for s in seqs) - 1
    first = seqs[0]
    n = 0
    while n < limit and all(s[n] == first[n] for s in seqs):
        n += 1
    return max(n, 0)


def _fork(cache: Any, n: int) -> Any:
    """An independent copy of a batch-1 cache, repeated to ``n`` rows; the original stays as it was.

    Dynamic (and sliding-window) layers replace their tensors on update instead of writing into
    them, so a shallow copy whose tensors are broadcast views is enough; other layer kinds are
    deep-copied.
    """
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    if layers is not None and all(isinstance(layer, DynamicLayer) for layer in layers):
        new = copy.copy(cache)
        new.layers = []
        for layer in layers:
            twin = copy.copy(layer)
            if n > 1 and getattr(layer, "is_initialized", False) and layer.keys is not None and layer.keys.numel():
                twin.keys = layer.keys.expand(n, *layer.keys.shape[1:])
                twin.values = layer.values.expand(n, *layer.values.shape[1:])
            new.layers.append(twin)
        return new
    new = copy.deepcopy(cache)
    if n > 1:
        new.batch_repeat_interleave(n)
    return new
