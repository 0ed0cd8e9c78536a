"""The backend contract's shared pieces: one unknown-option message for every backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from pfr.errors import ModelError
from pfr.models.base import check_known
from pfr.models.registry import load_model


def test_check_known_names_the_valid_options() -> None:
    check_known({"seed": "1"}, ("seed", "temperature"), "baseline")
    check_known({}, (), "x")
    with pytest.raises(ModelError, match=r"^unknown baseline option bogus, zz \(known: seed, temperature\)$"):
        check_known({"zz": "1", "bogus": "2", "seed": "0"}, ("seed", "temperature"), "baseline")
    with pytest.raises(ModelError, match=r"\(known: none\)"):
        check_known(["a"], (), "x")


@pytest.mark.parametrize(
    ("spec", "name", "valid"),
    [
        ("baseline:oracle", "baseline", "seed, temperature"),
        ("baseline:random", "baseline", "seed, temperature"),
        ("minilm-router", "router", "tau, scale, device, temperature"),
        ("python:{file}:score", "python", "temperature, params, family"),
        ("smollm2-135m", "hf", "gguf_file, chat_template"),
        ("openai:m@http://127.0.0.1:9/v1", "openai", "endpoint, top_k"),
        ("llamacpp:preset:smollm2-135m", "llamacpp", "n_ctx, n_threads"),
        ("vllm:smollm2-135m", "vllm", "dtype, chat_template"),
    ],
)
def test_every_backend_refuses_an_unknown_option(spec: str, name: str, valid: str, tmp_path: Path) -> None:
    """``--model-opt bogus=1`` fails in one line naming the valid options, before any weights load."""
    file = tmp_path / "m.py"
    file.write_text("def score(request):\n    return [0.0] * len(request.options)\n")
    with pytest.raises(ModelError, match=rf"^unknown {name} option bogus \(known: {valid}"):
        load_model(spec.format(file=file), {"bogus": "1"})


@pytest.mark.parametrize("prefix", ["http", "python"])
def test_http_and_python_are_declared_once(prefix: str, tmp_path: Path) -> None:
    """``http:`` and ``python:`` are built from their declaration alone: no factory, decide or option list
    beside it in the registry, and the unknown-option message lists the declaration's options."""
    from pfr.models import registry

    decl = registry.declaration(prefix)
    assert decl is not None and decl.prefix == prefix and decl.decides == ("scores",)
    file = tmp_path / "m.py"
    file.write_text("def score(request):\n    return [0.0] * len(request.options)\n")
    spec = {"http": "http:http://127.0.0.1:9/", "python": f"python:{file}:score"}[prefix]
    known = ", ".join(o.name for o in decl.options)
    with pytest.raises(ModelError, match=rf"^unknown {prefix} option bogus \(known: {known}\)$"):
        load_model(spec, {"bogus": "1"})


@pytest.mark.parametrize(
    ("prefix", "decides"),
    [
        ("hf", ("scores", "generate")),
        ("llamacpp", ("scores", "generate", "choice")),
        ("openai", ("scores", "generate", "choice")),
        ("vllm", ("scores", "generate", "choice")),
    ],
)
def test_every_built_in_backend_is_one_declaration(prefix: str, decides: tuple[str, ...]) -> None:
    """hf, llama.cpp, openai and vLLM are declared in their own module like http: (options typed once, decide
    modes once): the registry holds nothing else about them, and declaring costs no heavy import."""
    import subprocess
    import sys

    from pfr.models import registry

    assert not hasattr(registry, "_FACTORIES") and not hasattr(registry, "DECIDES")
    decl = registry.declaration(prefix)
    assert decl is not None and decl.prefix == prefix and decl.decides == decides
    assert registry._DECLARED[prefix] == f"pfr.models.{prefix}.backend:BACKEND"
    assert not hasattr(__import__(f"pfr.models.{prefix}", fromlist=["x"]), "OPTIONS")
    code = (
        "import sys; from pfr.models import registry; registry.declaration(sys.argv[1]); "
        "heavy = sorted(m for m in ('torch', 'vllm', 'llama_cpp', 'openai', 'transformers') if m in sys.modules); "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code, prefix], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
