"""Where keys and budget counters are kept (``ports``): SQLite on one node, Redis for several."""

from gateway.governance.ports import BudgetCounters, Governance, KeyStore
from gateway.governance.sqlite import SqliteGovernance

__all__ = ["BudgetCounters", "Governance", "KeyStore", "SqliteGovernance"]
