"""Faithful fake servers of every upstream protocol, for tests, benchmarks and demos without a
key: OpenAI Realtime (``fakes.openai_realtime``), Gemini Live over TLS (``fakes.gemini_live``)
and chat completions (``fakes.chat``), on one shell (``fakes.shell``).

Not part of the product: the runtime wheel leaves this package out, nothing in ``gateway``,
``transports`` or ``tools`` imports it (``tests/test_layering.py``), and its own dependencies are
the ``fakes`` extra (``pip install -e '.[fakes]'``, which ``scripts/*`` do). Run one from the
repository root: ``python -m fakes.openai_realtime --port 9000``.
"""

__all__: list[str] = []
