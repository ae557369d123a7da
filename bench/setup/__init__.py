"""``scripts/bench setup``: session set-up time with the warm connection pool against without
(``bench.setup.bench``)."""
