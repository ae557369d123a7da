"""``scripts/bench console``: what the operator console costs the relay (``bench.console``)."""
