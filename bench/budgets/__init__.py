"""``scripts/bench budgets``: what keys and budgets cost (``bench.budgets.bench``)."""
