"""The OpenAI-compatible request shapes the ``openai:`` backend sends, and how it reads the answers.

Four shapes: a top-K request on ``/completions`` (the prompt as text, ``logprobs=K``) or on
``/chat/completions`` (the prompt as one user message, ``top_logprobs=K``), and the exact variants of
both (``logprob_token_ids``: the symbols' ids, asked by id; vLLM and SGLang). Exact chat requests
first ask ``/tokenize`` for the chat-templated prompt and ``/detokenize`` for its tail, so the symbol
ids follow the rule of :mod:`pfr.models.lm.letters` after the text the model really sees.
"""

from __future__ import annotations

from typing import Any

import httpx

from pfr.errors import ModelError
from pfr.models.openai.client import Client

ENDPOINTS = ("completions", "chat")
#: the path each endpoint posts to
PATHS = {"completions": "/completions", "chat": "/chat/completions"}


def request(model: str, text: str, endpoint: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    """(path, body) of one request: ``text`` as the prompt (completions) or as one user message (chat),
    with ``fields`` (sampling, logprobs, ``response_format``) beside it. Every shape here and in
    :mod:`pfr.models.openai.text` is built by it."""
    prompt: dict[str, Any] = {"prompt": text} if endpoint == "completions" else {
        "messages": [{"role": "user", "content": text}]}  # fmt: skip
    return PATHS[endpoint], {"model": model, **prompt, **fields}


def answer_text(data: dict[str, Any], endpoint: str) -> str | None:
    """The generated text of the first choice (``text``, or ``message.content`` on chat); ``None`` when the
    answer has no such choice, ``""`` when its content is empty or null."""
    choices = data.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(first, dict):
        return None
    if endpoint == "completions":
        return str(first.get("text") or "") if "text" in first else None
    message = first.get("message")
    return str(message.get("content") or "") if isinstance(message, dict) else None


def topk_request(model: str, text: str, endpoint: str, top_k: int) -> tuple[str, dict[str, Any]]:
    """(path, body) asking for the top ``top_k`` log-probs of the first generated token."""
    if endpoint == "completions":
        return request(model, text, endpoint, max_tokens=1, temperature=0, logprobs=top_k)
    return request(model, text, endpoint, max_tokens=1, temperature=0, logprobs=True, top_logprobs=top_k)


def top_logprobs(data: dict[str, Any], endpoint: str, url: str, request_id: str) -> list[tuple[str, float]]:
    """The top-K (token, log-prob) of the first generated token, or a ModelError saying why not."""
    choice = (data.get("choices") or [{}])[0] or {}
    lp = choice.get("logprobs") or {}
    top: Any = None
    if endpoint == "completions":
        rows = lp.get("top_logprobs") or []
        top = rows[0] if rows else None
        if isinstance(top, dict):
            return [(str(k), float(v)) for k, v in top.items() if v is not None]
    else:
        content = lp.get("content") or []
        top = content[0].get("top_logprobs") if content and isinstance(content[0], dict) else None
        if isinstance(top, list) and top:
            return [(str(t.get("token", "")), float(t["logprob"])) for t in top if t.get("logprob") is not None]
    answer = answer_text(data, endpoint)
    if choice.get("finish_reason") == "stop" and not answer:
        why = "the model ended its answer at once (end of sequence) and this server gives no logprobs then"
    else:
        why = "it may not support them; try the other endpoint, or a server that returns logprobs"
    raise ModelError(f"server at {url} returned no logprobs for request {request_id} (endpoint={endpoint}): {why}")


def exact_request(model: str, text: str, endpoint: str, ids: list[int]) -> tuple[str, dict[str, Any]]:
    """(path, body) asking for the log-probs of exactly the token ``ids`` (``logprob_token_ids``)."""
    asks: dict[str, Any] = {"logprobs": len(ids)} if endpoint == "completions" else {
        "logprobs": True, "top_logprobs": len(ids)}  # fmt: skip
    return request(model, text, endpoint, max_tokens=1, temperature=0, **asks, logprob_token_ids=ids,
                   return_tokens_as_token_ids=True)  # fmt: skip


def token_id_logprobs(data: dict[str, Any], endpoint: str) -> dict[int, float]:
    """token id → log-prob from an exact answer (tokens named ``token_id:N``)."""
    lp = ((data.get("choices") or [{}])[0] or {}).get("logprobs") or {}
    if endpoint == "completions":
        rows = lp.get("top_logprobs") or [None]
        top = rows[0] if isinstance(rows[0], dict) else {}
    else:
        content = lp.get("content") or [{}]
        top = {str(t.get("token")): t.get("logprob") for t in (content[0] or {}).get("top_logprobs") or []}
    return {int(k.removeprefix("token_id:")): float(v) for k, v in top.items()
            if k.startswith("token_id:") and v is not None}  # fmt: skip


def chat_tail(client: Client, model: str, text: str, request_id: str) -> str:
    """The last 64 tokens of ``text`` as the server's chat template wraps it, as text."""
    messages = [{"role": "user", "content": text}]
    chat = client.post("/tokenize", {"model": model, "messages": messages, "add_generation_prompt": True},
                       request_id, root=True)  # fmt: skip
    tail_ids = [int(t) for t in (chat.get("tokens") or [])][-64:]
    detok = client.post("/detokenize", {"model": model, "tokens": tail_ids}, request_id, root=True)
    return str(detok.get("prompt", ""))


def tokenize(client: Client, model: str, text: str) -> list[int]:
    """Token ids of ``text`` with no special tokens added, from the server's ``/tokenize`` (vLLM, SGLang)."""
    body = {"model": model, "prompt": text, "add_special_tokens": False}
    data = client.post("/tokenize", body, "tokenize", root=True)
    tokens = data.get("tokens")
    if not isinstance(tokens, list):
        raise ModelError(f"server at {client.url} answered /tokenize without a token list")
    return [int(t) for t in tokens]


def takes_token_ids(client: Client, model: str) -> bool:
    """Whether the server returns exact log-probs for requested token ids (``logprob_token_ids``).

    ``/tokenize`` must answer, and a one-token completion that requests the id of ``" A"`` must return
    that id's log-prob. Servers that ignore the field (llama.cpp) or reject it fall back to top-K with
    censoring.
    """
    http = client.http
    try:
        resp = http.post(f"{client.root}/tokenize", json={"model": model, "prompt": "Answer: A",
                                                           "add_special_tokens": False})  # fmt: skip
        ids = resp.json().get("tokens") if resp.status_code == 200 else None
        if not isinstance(ids, list) or not ids:
            return False
        tid = int(ids[-1])
        body = {"model": model, "prompt": "Answer:", "max_tokens": 1, "temperature": 0, "logprobs": 1,
                "logprob_token_ids": [tid], "return_tokens_as_token_ids": True}  # fmt: skip
        resp = http.post(f"{client.base_url}/completions", json=body)
        if resp.status_code != 200:
            return False
        top = (((resp.json().get("choices") or [{}])[0].get("logprobs") or {}).get("top_logprobs") or [None])[0]
        return isinstance(top, dict) and f"token_id:{tid}" in top
    except (httpx.HTTPError, ValueError, TypeError, AttributeError, IndexError):
        return False


def usage_meta(data: dict[str, Any], cached: bool = False) -> dict[str, Any]:
    """``prompt_tokens`` (and, with ``cached``, ``cached_tokens``) from an answer's ``usage``, where given."""
    meta: dict[str, Any] = {}
    usage = data.get("usage") or {}
    if isinstance(usage, dict) and "prompt_tokens" in usage:
        meta["prompt_tokens"] = usage["prompt_tokens"]
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    if cached and isinstance(details, dict) and details.get("cached_tokens") is not None:
        meta["cached_tokens"] = details["cached_tokens"]
    return meta
