"""The letter-scoring core of the in-process LM backends (hf, vLLM, llama.cpp) and what it reads:
:mod:`~pfr.models.lm.core` prepares requests (:class:`~pfr.models.lm.core.LetterLM`),
:mod:`~pfr.models.lm.prompt` and :mod:`~pfr.models.lm.templates` write the prompt,
:mod:`~pfr.models.lm.letters` turns answer-token log-probs into scores, and
:mod:`~pfr.models.lm.weights` and :mod:`~pfr.models.lm.gguf_cache` say where a model's weights come from."""
