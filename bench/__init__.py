"""Benchmarks run by ``scripts/bench`` (``python -m bench SUBCOMMAND``); never by the tests.

One subpackage per suite:

- ``bench.suite``: ``relay``, ``capacity``, ``scale`` and ``all``. Every target (``direct``, the
  gateway's rows, the floor relay, LiteLLM, Pipecat) in front of one OpenAI fake in echo mode,
  driven by the Go load generator. ``relay``: the latency each target adds over ``direct`` and
  its CPU per frame pair; ``capacity``: a session ramp up to the knee (sessions per core), with
  setup time and memory per session; ``scale``: what Redis costs (setup, resume, relay CPU) and
  what a second worker gives; ``all``: relay, capacity and dispatch in one go, then the plots
  (``bench.suite.plots``) into ``docs/bench/``.
- ``bench.relay``: ``relay --provider gemini``, the older two-target bench (``direct`` against
  the gateway, with a Python load generator, since the Go one speaks no Gemini Live). It came
  first, and the other suites and ``soak`` still build on its tools: ``procs`` (the children,
  the fakes, the gateway, core pinning, ``/proc`` snapshots), ``stats`` (frame stamps,
  percentiles, spreads, CPU arithmetic) and ``targets`` (each provider's client codec).
- ``bench.dispatch``: ``dispatch``, the cost of one tool call on the fake's clock with a no-op
  tool, alone and under background echo load, against ``direct`` and Pipecat; then the HTTP tool
  row (the gateway's HTTP tool path against the same request made directly).
- ``bench.latency``: ``latency``, the voice-to-voice latency the gateway adds per audio path
  (browser at 16, 24 and 48 kHz, a Twilio phone call in µ-law), on the OpenAI and Gemini fakes,
  each lane beside a direct lane to the same fake.

A suite that is one module stays at the top: ``registry_bench`` (``registry``: registry build and
load, the compiled argument validator against ``jsonschema``), ``gateway_bench`` (``gateway``:
text turn, tool turn, voice uplink and session start through the gateway against the same work
on a ``LocalTransport``, in one process) and ``trace_waterfall`` (``trace``: one real trace of a
voice turn with an HTTP tool call, drawn as a waterfall).

What more than one suite uses stays at the top too, not in a ``common`` package, because who
imports it decides: ``goload_runner`` builds and runs the Go load generator of ``goload/`` (its
sources, found at ``bench/goload`` under the repository root) for ``suite`` and ``dispatch``;
``peers/`` starts and equips the peer targets (floor relay, LiteLLM, Pipecat) for the same two;
``baseline`` (``--baseline REV``: a worktree of another commit) serves the command line for
``relay``, ``capacity`` and ``dispatch``. ``tools/noop`` is the no-op tool of ``dispatch``'s
registry. A helper only one suite imports lives in that suite (``plots`` in ``bench.suite``).
"""
