"""Every provider the gateway ships (``gateway.providers.BUILTIN``) has its transport in the
contract suite (``transports_under_test.TRANSPORTS``), the suite tests nothing else, and each
transport is what its provider's record says of it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from contract_kit import TransportUnderTest, config, contract
from transports_under_test import TRANSPORTS

from gateway.providers import BUILTIN, PROVIDERS
from transports.base import Transport


def test_the_contract_suite_runs_on_every_built_in_provider() -> None:
    assert sorted(entry.name for entry in TRANSPORTS) == sorted(record.name for record in BUILTIN)


@contract("connect")
async def test_the_transport_is_what_its_record_says(
    under_test: TransportUnderTest, build: Callable[[], Transport]
) -> None:
    """The modes and rates a transport declares before it connects, and whether it takes a
    phone call's G.711 (µ-law, A-law) as it is, are its record's."""
    record = PROVIDERS[under_test.name]
    declared = build().capabilities
    assert (declared.modes, declared.input_rate, declared.output_rate) == (
        record.modes,
        record.input_rate,
        record.output_rate,
    )
    for law in ("pcmu", "pcma"):
        phone_call = replace(
            config("voice" if record.speaks else "text"),
            client_input_rate=8000,
            client_output_rate=8000,
            client_encoding=law,
        )
        transport = build()
        await transport.connect(phone_call)
        try:
            takes_it = transport.capabilities.encoding == law
        finally:
            await transport.close()
        assert takes_it == (law in record.encodings), law
