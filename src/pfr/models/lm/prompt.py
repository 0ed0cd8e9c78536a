"""Prompt rendering: a request to the exact text a model sees (docs/method.md §5).

The default layout puts what requests share first, so prefix caches reuse as much as possible:
instruction → full inventory (identical for a dataset) → input (identical within a quad) →
options → fallback rule → answer cue. Every piece is a template a study can change; the template
in force is part of the model identity, so it is recorded with every result.

``JsonTemplate`` renders a request as one JSON object — ``instruction``, ``categories`` (the full
inventory, lexicographic), ``input`` (unless the information condition hides it), ``category`` (the
supplied category, where one is), ``options`` (``symbol``, ``label``) and ``rule`` — with its keys
in that order, so requests still share the longest possible prefix; the answer cue follows on its
own line (set ``answer_cue = ""`` for the bare object).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from pfr.design.types import Request, check_letter_symbols


@dataclass(frozen=True)
class PromptTemplate:
    """The wording around a request. ``{n}`` is the option count."""

    instruction: str = (
        "You are a decision model. Read the input and choose exactly one of the options, "
        "following the rule. Answer with the option's letter only."
    )
    inventory_header: str = "Categories:"
    category_line: str = "- {id}: {description}"
    input_line: str = "Input: {text}"
    supplied_line: str = "Category of the input: {id} ({description})"
    options_header: str = "Options:"
    option_line: str = "{symbol}. {label}"
    rule_header: str = "Rule:"
    answer_cue: str = "Answer:"

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


DEFAULT_TEMPLATE = PromptTemplate()


@dataclass(frozen=True)
class JsonTemplate(PromptTemplate):
    """The structured-JSON renderer; ``instruction`` and ``answer_cue`` keep their meaning."""

    renderer: str = "json"

    def to_dict(self) -> dict[str, str]:
        return {"renderer": "json", "instruction": self.instruction, "answer_cue": self.answer_cue}


def render_json(request: Request, template: PromptTemplate) -> str:
    obj: dict[str, Any] = {"instruction": template.instruction}
    if request.inventory:
        obj["categories"] = [{"id": c.id, "description": c.description} for c in request.inventory]
    if request.show_text:
        obj["input"] = request.text
    if request.supplied is not None:
        obj["category"] = {"id": request.supplied.id, "description": request.supplied.description}
    obj["options"] = [{"symbol": o.symbol, "label": o.label} for o in request.options]
    obj["rule"] = request.criterion
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ": "))
    return f"{text}\n{template.answer_cue}" if template.answer_cue else text


def render_prefix(request: Request, template: PromptTemplate = DEFAULT_TEMPLATE) -> str:
    """The part every request of a dataset shares: instruction and full inventory."""
    lines = [template.instruction, ""]
    if request.inventory:  # policy requests over estimates carry no inventory
        lines.append(template.inventory_header)
        lines += [template.category_line.format(id=c.id, description=c.description) for c in request.inventory]
        lines.append("")
    return "\n".join(lines) + "\n"


def render(request: Request, template: PromptTemplate = DEFAULT_TEMPLATE) -> str:
    """The whole prompt; it ends with the answer cue (no trailing space) so the next token is the letter."""
    check_letter_symbols(request)  # more options than A–Z a–z 0–9: refused before anything is scored
    if getattr(template, "renderer", "text") == "json":  # structured JSON for decision services
        return render_json(request, template)
    parts = [render_prefix(request, template)]
    if request.show_text:
        parts.append(template.input_line.format(text=request.text) + "\n")
    if request.supplied is not None:
        parts.append(
            template.supplied_line.format(id=request.supplied.id, description=request.supplied.description) + "\n"
        )
    parts.append("\n" + template.options_header + "\n")
    parts += [template.option_line.format(symbol=o.symbol, label=o.label) + "\n" for o in request.options]
    parts.append("\n" + template.rule_header + " " + request.criterion + "\n\n")
    parts.append(template.answer_cue)
    return "".join(parts)


def chat_wrap(tokenizer: Any, text: str) -> str:
    """``text`` as the user turn of a Hugging Face chat template, ending where the assistant answers."""
    return str(
        tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)
    )
