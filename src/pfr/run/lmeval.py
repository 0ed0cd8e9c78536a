"""lm-evaluation-harness interchange: ``pfr export --format lm-eval`` and ``pfr import --from lm-eval``.

The export writes a task folder that ``lm_eval --include_path DIR --tasks NAME`` runs as a
``multiple_choice`` task: one doc per scored request of the store, whose ``prompt`` is pfr's exact
prompt string for that model and whose ``choices`` are the option symbols in the form pfr scores them
(``" A"`` after a prompt ending in a visible character, ``"A"`` after whitespace), with
``target_delimiter: ""`` so lm-eval's continuation is exactly that text. lm-eval's per-choice
log-likelihood is then the same quantity pfr's letter scoring reads (the log-probability of the
symbol's one token after the prompt), so the import stores it as the option's raw score.

Each doc also carries ``pfr_request`` (the request as JSON, inventory included) and ``pfr_model``
(the identity of the model the prompts were rendered for), so lm-eval's ``--log_samples`` file maps
back to pfr's requests without the original store. Imported results get the identity
``{"backend": "lm-eval", "name": "lm-eval:<name>", "prompts_of": <that identity>}``: they never count
as, or mix with, pfr's own results for that model. lm-eval's samples carry no per-request time, so
imported results store ``seconds = 0`` (a ``pfr export`` file keeps each request's seconds).
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

from pfr.design.types import Request
from pfr.files import atomic_write
from pfr.models.base import native_choice, normalise_scores
from pfr.models.lm.letters import answer_form
from pfr.run.records import Imported
from pfr.run.records import RowError as _RowError
from pfr.run.store import Store, request_key, request_problem

#: the docs file the task reads, next to the YAML
DOCS_NAME = "docs.jsonl"
_TASK_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def _yaml_str(s: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(s, ensure_ascii=False)


def task_yaml(name: str, docs: Path) -> str:
    """The task file: a ``multiple_choice`` task over the JSONL ``docs`` (absolute path: lm-eval reads
    ``data_files`` relative to where it runs, not to the YAML)."""
    return "\n".join([
        "# written by `pfr export --format lm-eval`: pfr's exact prompts and option symbols",
        f"task: {_yaml_str(name)}",
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        f"    test: {_yaml_str(str(docs))}",
        "test_split: test",
        "output_type: multiple_choice",
        "doc_to_text: prompt",
        "doc_to_choice: choices",
        "doc_to_target: target",
        'target_delimiter: ""',
        "num_fewshot: 0",
        "metric_list:",
        "  - metric: acc",
        "    aggregation: mean",
        "    higher_is_better: true",
        "metadata:",
        "  version: 1.0",
        "",
    ])  # fmt: skip


def export_task(store: str | os.PathLike[str], out: str | os.PathLike[str], name: str = "pfr") -> int:
    """Write ``out/<name>.yaml`` and ``out/docs.jsonl`` for the store's scored requests (with prompts);
    returns the doc count. The doc's ``target`` is the correct option (``expected``)."""
    if not _TASK_NAME.match(name):
        raise ValueError(f"--task {name!r}: use letters, digits, '_', '-' and '.'")
    rows = []
    models: dict[str, str] = {}  # identity → name
    with Store(store, create=False) as st:
        for r in st.results():
            if r.prompt is None:
                continue
            req = r.request
            ident = json.dumps(r.model, sort_keys=True)
            models[ident] = str(r.model.get("name", "?"))
            rows.append(json.dumps({
                "request_id": req.request_id,
                "request_key": request_key(req, r.prompt),
                "prompt": r.prompt,
                "choices": [answer_form(r.prompt, o.symbol) for o in req.options],
                "target": req.expected,
                "pfr_request": req.to_json(),
                "pfr_model": ident,
            }, ensure_ascii=False))  # fmt: skip
    if not rows:
        raise ValueError(
            f"{store}: no scored request with a prompt (baselines and the router have none): nothing to export"
        )
    if len(models) > 1:
        names = ", ".join(sorted(models.values()))
        raise ValueError(f"{store}: prompts of {len(models)} models ({names}); lm-eval runs one model per task: "
                         "export a store of one LM model")  # fmt: skip
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    docs = (d / DOCS_NAME).resolve()
    atomic_write(docs, rows)
    atomic_write(d / f"{name}.yaml", task_yaml(name, docs).splitlines())
    return len(rows)


# ------------------------------------------------------------------------------------------ import
def _loglik(resp: Any) -> float:
    """The log-likelihood of one ``filtered_resps`` entry (``[loglik, is_greedy]``, or a bare number)."""
    value = resp[0] if isinstance(resp, list) and resp else resp
    if isinstance(value, str):  # lm-eval may write numbers as strings
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value > 0:
        raise _RowError("filtered_resps: need [log-likelihood (finite, ≤ 0), is_greedy] per choice")
    return float(value)


def lmeval_row(row: Any) -> Imported:
    """One row of an lm-eval ``--log_samples`` file of a task from ``pfr export --format lm-eval``."""
    if not isinstance(row, dict):
        raise _RowError("not a JSON object")
    doc = row.get("doc")
    if not isinstance(doc, dict) or "pfr_request" not in doc or "pfr_model" not in doc:
        raise _RowError("doc: no pfr_request/pfr_model (not a task from `pfr export --format lm-eval`)")
    try:
        request = Request.from_dict(json.loads(doc["pfr_request"]))
        prompts_of = json.loads(doc["pfr_model"])
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise _RowError(f"doc.pfr_request: not a pfr request ({type(exc).__name__}: {exc})") from None
    problem = request_problem(request)
    if problem:
        raise _RowError(problem)
    resps = row.get("filtered_resps", row.get("resps"))
    if (
        isinstance(resps, list)
        and resps
        and all(isinstance(x, list) and len(x) == 1 for x in resps)
        and "filtered_resps" not in row
    ):  # resps nests each choice's response once more
        resps = [x[0] for x in resps]
    k = len(request.options)
    if not isinstance(resps, list) or len(resps) != k:
        raise _RowError(f"filtered_resps: need {k} responses (one per option)")
    logits = tuple(_loglik(x) for x in resps)
    identity = {"backend": "lm-eval", "name": f"lm-eval:{prompts_of.get('name', '?')}", "prompts_of": prompts_of}
    prompt = doc.get("prompt")
    if not isinstance(prompt, str):
        raise _RowError("doc.prompt: need the prompt string")
    logprobs = tuple(normalise_scores(logits))
    meta = {"lm_eval_doc_id": row.get("doc_id"), "option_mass": sum(math.exp(x) for x in logits)}
    return Imported(identity, request, prompt, logits, logprobs, tuple(False for _ in logits),
                    native_choice(logprobs), 0.0, meta)  # fmt: skip
