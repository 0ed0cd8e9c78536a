"""A pfr backend in one file: a text-completing engine and its declaration.

The engine reads the prompt pfr renders (``Input: …``, then one ``X. label`` line per option) and
writes the letter of the option whose label shares the most words with the input; with none in
common it writes the first (or last) option's letter. It only completes text: pfr reads the answer
by its parse rule (``--model-opt decide=generate``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pfr.models.declaration import Declaration, Option
from pfr.options import OneOf

_OPTION = re.compile(r"^([A-Z])\. (.+)$", re.M)


def _words(text: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9]+", text.lower()) if len(w) > 2}


class Echo:
    """Completes each prompt with one option letter (deterministic: seed and temperature change nothing)."""

    batch_size = 16

    def __init__(self, version: str, otherwise: str) -> None:
        self.version, self.otherwise = version, otherwise

    @property
    def identity(self) -> dict[str, Any]:
        return {"version": self.version, "otherwise": self.otherwise}

    def complete(self, prompts: Sequence[str], max_tokens: int, seed: int, temperature: float) -> list[str]:
        return [self._answer(p) for p in prompts]

    def _answer(self, prompt: str) -> str:
        found = re.search(r"^Input: (.*)$", prompt, re.M)
        said = _words(found.group(1) if found else prompt)
        options = _OPTION.findall(prompt)
        if not options:
            return ""
        best = max(options, key=lambda o: len(_words(o[1]) & said))
        if _words(best[1]) & said:
            return best[0]
        return options[0 if self.otherwise == "first" else -1][0]


def from_spec(rest: str, opts: Mapping[str, Any]) -> Echo:
    """``echo:VERSION``: the version names the rule in the identity (a new one is scored again)."""
    return Echo(rest or "v1", opts["otherwise"])


BACKEND = Declaration(
    "echo",
    from_spec,
    options=(
        Option(
            "otherwise", "first", "the option answered when no label word is in the input", OneOf(("first", "last"))
        ),
    ),
    decides=("generate",),
)
