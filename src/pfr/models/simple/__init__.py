"""Models without a language model: :mod:`~pfr.models.simple.baselines` (``baseline:``, fixed and random
answers) and :mod:`~pfr.models.simple.router` (``router:``, an embedding router)."""
