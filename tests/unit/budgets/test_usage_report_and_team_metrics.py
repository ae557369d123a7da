"""The usage report's rules (gateway.admin.usage) and the team totals of Prometheus: a query is
checked whole; CSV cells a spreadsheet would run are quoted; only the operator's listed teams
get a label."""

from __future__ import annotations

from datetime import date

import pytest

from gateway.admin.usage import UsageQuery, usage_csv
from gateway.keys import KeyInputError
from gateway.observability import Metrics

TODAY = date(2026, 11, 29)


def test_a_query_defaults_to_this_month_by_key_and_refuses_what_it_cannot_read() -> None:
    query = UsageQuery({}, TODAY)
    assert (query.group_by, query.days[0], query.days[-1]) == ("key", "d2026-11-01", "d2026-11-29")
    for params, field in (
        ({"group_by": "session"}, "group_by"),
        ({"from": "29/11/2026"}, "from"),
        ({"from": "2026-11-29", "to": "2026-11-01"}, "from/to"),
        ({"from": "2024-01-01"}, "from/to"),  # more than 400 days
        ({"colour": "x"}, "unknown parameters"),
    ):
        with pytest.raises(KeyInputError) as refused:
            UsageQuery(params, TODAY)
        assert str(refused.value).startswith(field)


def test_csv_cells_a_spreadsheet_would_run_are_quoted() -> None:
    rows = [
        {
            "day": "2026-11-29",
            "group_by": "user",
            "id": "=HYPERLINK(1)",
            "tokens": 5,
            "spend": 0.5,
            "minutes": 1.0,
        },
        {
            "day": "2026-11-29",
            "group_by": "user",
            "id": "bob",
            "tokens": 1,
            "spend": 0,
            "minutes": 0,
        },
    ]
    lines = usage_csv(rows).splitlines()
    assert lines[0] == "day,group_by,id,tokens,spend,minutes"
    assert lines[1] == "2026-11-29,user,'=HYPERLINK(1),5,0.5,1.0"
    assert lines[2] == "2026-11-29,user,bob,1,0,0"


def test_only_the_listed_teams_are_counted() -> None:
    metrics = Metrics(teams=["support"])
    assert metrics.counts_team("support")
    assert not metrics.counts_team("sales")
    assert not metrics.counts_team(None)
    metrics.count_team("support", 120, 0.25, 5.0)
    sample = metrics.registry.get_sample_value
    assert sample("gateway_team_usage_total", {"team": "support", "metric": "tokens"}) == 120
    assert sample("gateway_team_usage_total", {"team": "support", "metric": "spend"}) == 0.25
    assert sample("gateway_team_usage_total", {"team": "support", "metric": "seconds"}) == 5.0
