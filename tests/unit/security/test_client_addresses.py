"""Client addresses through trusted proxies, and the per-address connection rate: pure."""

from __future__ import annotations

import pytest

from gateway.security import ConnectionRateLimiter, TrustedProxies, parse_networks


def proxies(*networks: str) -> TrustedProxies:
    return TrustedProxies(parse_networks(networks))


def test_without_trusted_proxies_the_header_is_ignored() -> None:
    assert proxies().client_address("203.0.113.9", "198.51.100.1") == "203.0.113.9"


def test_a_trusted_proxy_names_the_client() -> None:
    lb = proxies("10.0.0.0/8")
    assert lb.client_address("10.0.0.2", "198.51.100.7") == "198.51.100.7"
    # The left part is the client's own words; the right-most untrusted hop is believed.
    assert lb.client_address("10.0.0.2", "1.2.3.4, 198.51.100.7, 10.0.0.9") == "198.51.100.7"


def test_an_untrusted_peer_cannot_claim_an_address() -> None:
    lb = proxies("10.0.0.0/8")
    assert lb.client_address("203.0.113.9", "198.51.100.7") == "203.0.113.9"


def test_unreadable_or_all_proxy_chains_fall_back_to_the_peer() -> None:
    lb = proxies("10.0.0.0/8", "::1")
    assert lb.client_address("10.0.0.2", "not-an-address") == "10.0.0.2"
    assert lb.client_address("10.0.0.2", "10.1.1.1, 10.2.2.2") == "10.0.0.2"
    assert lb.client_address("::1", "[2001:db8::5]:443") == "2001:db8::5"
    assert lb.client_address("10.0.0.2", "198.51.100.7:5555") == "198.51.100.7"
    assert lb.client_address(None, "198.51.100.7") == "?"


def test_ipv4_mapped_peers_are_matched_as_ipv4() -> None:
    assert proxies("127.0.0.1").trusts("::ffff:127.0.0.1")


def test_bad_networks_are_named() -> None:
    with pytest.raises(ValueError, match="'nope'"):
        parse_networks(["10.0.0.0/8", "nope"])


def test_the_rate_is_per_address_per_sliding_minute() -> None:
    limiter = ConnectionRateLimiter(per_minute=3)
    assert [limiter.admit("a", t) for t in (0.0, 1.0, 2.0, 3.0)] == [True, True, True, False]
    assert limiter.admit("b", 3.0)  # another address has its own window
    assert not limiter.admit("a", 59.9)
    assert limiter.admit("a", 60.0)  # the first admission left the window


def test_quiet_addresses_are_forgotten_when_many() -> None:
    limiter = ConnectionRateLimiter(per_minute=1)
    for n in range(5000):
        limiter.admit(f"10.0.{n // 256}.{n % 256}", float(n) * 0.001)
    limiter.admit("late", 1000.0)
    assert len(limiter) < 4097
