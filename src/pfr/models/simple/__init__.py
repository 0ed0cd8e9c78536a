"""Models without a language model: :mod:`~pfr.models.simple.baselines` (``baseline:``, fixed and random
answers), :mod:`~pfr.models.simple.router` (``router:``, an embedding router) and
:mod:`~pfr.models.simple.callable` (``python:``, a Python function as a model)."""
