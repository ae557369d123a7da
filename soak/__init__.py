"""The soak: the whole fleet on this machine (two gateway nodes on one Redis, the upstream
fakes, a load driver) under a mix of sessions and faults for minutes, with invariants checked
as it goes and a report at the end. ``scripts/soak --help``; the design is in ``soak/runner.py``.

A tool, not the product: it may import ``fakes``, ``bench`` and the product's helpers; nothing
in the product imports it (``tests/test_layering.py``).
"""
