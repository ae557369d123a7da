"""Benchmarks run by ``scripts/bench``; never part of the test suite."""
