"""How an alias spreads new sessions over its targets (``spread_order``): the file's order without
weights; with weights, a pick per session id in proportion to them, then the rest in file order."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.routing.aliases import Alias, CatalogError, Target, parse_catalog, spread_order

PROVIDER_NAMES = ("openai", "gemini", "chat", "local")
IDS = [f"sess_{i:05d}" for i in range(20_000)]

A = Target("openai", "a")
B = Target("gemini", "b")
C = Target("chat", "c")
D = Target("local")


def firsts(targets: tuple[Target, ...], ids: list[str] = IDS) -> Counter[Target]:
    return Counter(spread_order(targets, sid)[0] for sid in ids)


def weighted(target: Target, weight: float) -> Target:
    return Target(target.provider, target.model, target.voice, weight)


def test_without_weights_every_session_takes_the_files_order() -> None:
    targets = (A, B, C)
    for sid in ["", "a", "sess_1", "x" * 1000, "é"]:
        assert spread_order(targets, sid) == targets
    assert spread_order([A, B], "s") == (A, B)  # any sequence; a tuple comes back
    assert spread_order((), "s") == ()


@given(st.text())
def test_without_weights_the_order_never_depends_on_the_session(sid: str) -> None:
    assert spread_order((C, A, D, B), sid) == (C, A, D, B)


def test_the_pick_is_the_same_for_the_same_session_id() -> None:
    targets = (weighted(A, 1), weighted(B, 1), weighted(C, 1))
    for sid in IDS[:500]:
        order = spread_order(targets, sid)
        assert spread_order(targets, sid) == order
        assert spread_order(list(targets), sid) == order


def test_the_pick_follows_the_sha256_of_the_session_id() -> None:
    # The contract with other nodes: any gateway picks the same target for one session id.
    wa, wb = weighted(A, 1), weighted(B, 3)
    for sid in IDS[:200]:
        digest = hashlib.sha256(sid.encode()).digest()
        point = int.from_bytes(digest[:8], "big") / 2**64 * 4
        expected = wa if point < 1 else wb
        assert spread_order((wa, wb), sid)[0] == expected


@pytest.mark.parametrize(
    "weights",
    [(1.0, 1.0), (1.0, 3.0), (5.0, 3.0, 2.0), (0.1, 0.2, 0.7), (70.0, 20.0, 9.0, 1.0)],
)
def test_over_many_sessions_the_shares_follow_the_weights(weights: tuple[float, ...]) -> None:
    targets = tuple(weighted(t, w) for t, w in zip((A, B, C, D), weights, strict=False))
    counts = firsts(targets)
    total = sum(weights)
    for target, weight in zip(targets, weights, strict=True):
        share = counts[target] / len(IDS)
        assert share == pytest.approx(weight / total, abs=0.02), (target.key, share)


def test_every_weighted_target_is_picked_for_some_session() -> None:
    targets = (weighted(A, 1), weighted(B, 1), weighted(C, 1), weighted(D, 1))
    assert set(firsts(targets, IDS[:200])) == set(targets)
    small = (weighted(A, 100), weighted(B, 1))
    assert firsts(small)[small[1]] > 0


def test_a_single_weighted_target_takes_every_session() -> None:
    wa = weighted(A, 0.5)
    for sid in IDS[:300]:
        assert spread_order((B, wa, C), sid) == (wa, B, C)


def test_unweighted_targets_are_never_first_while_one_is_weighted() -> None:
    wb, wd = weighted(B, 2), weighted(D, 1)
    targets = (A, wb, C, wd)
    counts = firsts(targets, IDS[:2000])
    assert set(counts) == {wb, wd}


def test_after_the_pick_the_rest_follow_in_the_files_order() -> None:
    wb, wd = weighted(B, 1), weighted(D, 1)
    targets = (A, wb, C, wd)
    seen = set()
    for sid in IDS[:500]:
        order = spread_order(targets, sid)
        picked = order[0]
        seen.add(picked)
        assert order[1:] == tuple(t for t in targets if t is not picked)
        assert sorted(order, key=targets.index) == list(targets)
    assert seen == {wb, wd}


@given(
    st.lists(st.one_of(st.none(), st.floats(0.01, 1000)), min_size=1, max_size=6),
    st.text(max_size=40),
)
def test_any_order_is_a_permutation_with_a_weighted_target_first(
    weights: list[float | None], sid: str
) -> None:
    targets = tuple(Target("openai", f"m{i}", weight=w) for i, w in enumerate(weights))
    order = spread_order(targets, sid)
    assert sorted(order, key=targets.index) == list(targets)
    assert len(order) == len(targets)
    if any(w is not None for w in weights):
        assert order[0].weight is not None
        assert order[1:] == tuple(t for t in targets if t is not order[0])
    else:
        assert order == targets


def test_an_alias_orders_its_targets_by_spread_order() -> None:
    alias = Alias("x", (A, weighted(B, 1), weighted(C, 2)))
    for sid in IDS[:100]:
        assert alias.order(sid) == spread_order(alias.targets, sid)


def _catalog_with_weights(first: object, second: object) -> tuple[Target, ...] | None:
    document = {
        "models": {
            "x": {
                "targets": [
                    {"provider": "openai", "weight": first},
                    {"provider": "gemini", "weight": second},
                ]
            }
        }
    }
    try:
        catalog = parse_catalog(document, PROVIDER_NAMES)
    except CatalogError:
        return None
    alias = catalog.get("x")
    assert alias is not None
    return alias.targets


def test_an_infinite_weight_is_refused_or_takes_the_sessions() -> None:
    targets = _catalog_with_weights(float("inf"), 1)
    if targets is not None:  # refused: fine; accepted: it must win, not lose every session
        assert {spread_order(targets, sid)[0].provider for sid in IDS[:200]} == {"openai"}


def test_huge_weights_are_refused_or_still_spread() -> None:
    targets = _catalog_with_weights(1e308, 1e308)
    if targets is not None:
        providers = Counter(spread_order(targets, sid)[0].provider for sid in IDS[:2000])
        assert set(providers) == {"openai", "gemini"}
