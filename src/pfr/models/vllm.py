"""vLLM in process (``vllm:HUB_ID_OR_PATH``), for users on GPUs; install with ``pip install 'pfr[vllm]'``.

The engine runs with automatic prefix caching (``enable_prefix_caching=True``): requests of a run
share the instruction and inventory, and a quad shares its input, so vLLM computes each shared
block once. A request is one greedy step, ``SamplingParams(max_tokens=1, temperature=0,
logprobs=K)``; vLLM returns the top-K log-probabilities of the first generated token (its default
``raw_logprobs`` mode: the model's own log-softmax, before any sampling processor).

Scoring follows the in-process backends (:mod:`pfr.models.hf`, :mod:`pfr.models.llamacpp`): each
option symbol is the one token that writes it after the prompt (``" A"`` after ``Answer:``,
``"A"`` after a chat template's trailing whitespace), checked with the model's tokenizer. An
option whose token is not among the returned top-K is *censored* as in :mod:`pfr.models.openai_api`:
its score is the K-th (lowest returned) log-prob and ``Scores.censored`` flags it. Raise ``top_k``
(default 20; the engine is started with ``max_logprobs`` at least that) to censor less.

Options: ``top_k``, ``chat_template`` (on/off), ``max_model_len``, ``dtype`` (auto), ``revision``,
``tensor_parallel_size`` (1), ``gpu_memory_utilization`` (0.9), ``temperature`` (the score
temperature T). vLLM is imported only when this backend is asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.prompt import DEFAULT_TEMPLATE, PromptTemplate, chat_wrap, render

OPTIONS = (
    "top_k",
    "chat_template",
    "max_model_len",
    "dtype",
    "revision",
    "tensor_parallel_size",
    "gpu_memory_utilization",
    "temperature",
)


class VLLMBackend:
    """A causal LM served by an in-process vLLM engine (see the module docstring)."""

    def __init__(
        self,
        model: str,
        *,
        top_k: int = 20,
        chat_template: bool = False,
        max_model_len: int | None = None,
        dtype: str = "auto",
        revision: str | None = None,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        temperature: float = 1.0,
        template: PromptTemplate = DEFAULT_TEMPLATE,
    ) -> None:
        try:
            from vllm import LLM, SamplingParams
        except ImportError:
            raise ModelError("the vllm backend needs vLLM on a GPU machine (pip install 'pfr[vllm]')") from None
        self.model_ref = model
        self.top_k = top_k
        self.chat_template = chat_template
        self.dtype = dtype
        self.revision = revision
        self.template = template
        self._temperature = temperature
        kwargs: dict[str, Any] = {
            "model": model,
            "enable_prefix_caching": True,
            "max_logprobs": max(top_k, 20),
            "dtype": dtype,
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            "seed": 0,
        }
        if revision:
            kwargs["revision"] = revision
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
        try:
            self.llm = LLM(**kwargs)
        except Exception as exc:  # engine start-up fails in many ways (hub, CUDA, memory); each is the user's to fix
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ModelError(f"vllm: cannot start an engine for {model}: {first}") from None
        self.tokenizer = self.llm.get_tokenizer()
        if chat_template and not getattr(self.tokenizer, "chat_template", None):
            raise ModelError(f"vllm: {model} has no chat template; use chat_template=off")
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)
        self._params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=top_k)
        self._symbol_ids: dict[tuple[str, str], int] = {}

    @property
    def identity(self) -> dict[str, Any]:
        return {
            "backend": "vllm",
            "name": self.model_ref,
            "revision": self.revision or "main",
            "dtype": self.dtype,
            "top_k": self.top_k,
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

    def symbol_id(self, prompt: str, symbol: str, request_id: str) -> int:
        """The one token that writes ``symbol`` right after ``prompt`` (same rule as the hf backend)."""
        form = symbol if not prompt or prompt[-1].isspace() else " " + symbol
        tail = prompt[-200:]
        key = (tail, form)
        if key not in self._symbol_ids:
            base = self.tokenizer(tail, add_special_tokens=False)["input_ids"]
            full = self.tokenizer(tail + form, add_special_tokens=False)["input_ids"]
            if len(full) != len(base) + 1 or full[: len(base)] != base:
                raise ModelError(
                    f"request {request_id}: option symbol {symbol!r} is not one token after the prompt in "
                    f"{self.model_ref}'s vocabulary ({form!r}); use fewer options or another prompt ending"
                )
            self._symbol_ids[key] = int(full[-1])
        return self._symbol_ids[key]

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        if not requests:
            return []
        prompts = []
        targets = []
        for r in requests:
            text = self.prompt(r)
            ids = list(self.tokenizer(text, add_special_tokens=not self.chat_template)["input_ids"])
            if len(ids) + 1 > self.max_model_len:
                raise ModelError(
                    f"request {r.request_id}: prompt is {len(ids)} tokens, over {self.model_ref}'s context length "
                    f"{self.max_model_len} (prompt + 1 answer token must fit)"
                )
            prompts.append({"prompt_token_ids": ids})
            targets.append([self.symbol_id(text, o.symbol, r.request_id) for o in r.options])
        outputs = self.llm.generate(prompts, self._params, use_tqdm=False)
        out = []
        for r, res, tgt in zip(requests, outputs, targets):
            steps = res.outputs[0].logprobs if res.outputs else None
            if not steps:
                raise ModelError(f"vllm returned no logprobs for request {r.request_id}")
            top = {int(t): float(lp.logprob) for t, lp in steps[0].items()}
            lowest = min(top.values())
            logits = tuple(top.get(t, lowest) for t in tgt)
            censored = tuple(t not in top for t in tgt)
            meta = {"prompt_tokens": len(res.prompt_token_ids or []), "returned": len(top)}
            out.append(Scores(logits, censored, meta))
        return out


def from_spec(rest: str, opts: Mapping[str, str]) -> VLLMBackend:
    """``vllm:HUB_ID_OR_PATH`` with the options in the module docstring."""
    from pfr.models.llamacpp import _float_opt, _int_opt, _on_off

    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise ModelError(f"unknown vllm option {', '.join(unknown)} (known: {', '.join(OPTIONS)})")
    if not rest:
        raise ModelError("vllm model spec must be vllm:HUB_ID_OR_PATH")
    return VLLMBackend(
        rest,
        top_k=_int_opt(opts, "top_k", 20) or 20,
        chat_template=_on_off(opts, "chat_template", False),
        max_model_len=_int_opt(opts, "max_model_len", None),
        dtype=opts.get("dtype", "auto"),
        revision=opts.get("revision"),
        tensor_parallel_size=_int_opt(opts, "tensor_parallel_size", 1) or 1,
        gpu_memory_utilization=_float_opt(opts, "gpu_memory_utilization", 0.9),
        temperature=_float_opt(opts, "temperature", 1.0),
    )
