"""``scripts/bench dispatch``: the cost of one tool call, with a no-op tool and with the HTTP
tool."""
