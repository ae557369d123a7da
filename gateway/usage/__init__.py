"""Usage accounting: what each response consumed (``tokens``), summed per session
(``account``), and priced with the operator's table (``prices``)."""

from gateway.usage.account import SessionUsage
from gateway.usage.prices import PRICED_FIELDS, PriceTable
from gateway.usage.report import UsageCounters, UsageReporter
from gateway.usage.tokens import TokenCounts, token_counts

__all__ = [
    "PRICED_FIELDS",
    "PriceTable",
    "SessionUsage",
    "TokenCounts",
    "UsageCounters",
    "UsageReporter",
    "token_counts",
]
