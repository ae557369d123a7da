"""``scripts/bench relay --provider gemini``: the older direct-against-gateway relay bench, and
the process and statistics tools (``procs``, ``stats``, ``targets``) the other suites reuse."""
