"""Peer targets for the benchmarks: their virtualenvs, configs and launchers."""
