"""G.711 A-law ("pcma") as a session's audio format: 8 kHz both ways, as µ-law is."""

from __future__ import annotations

import pytest

from gateway.protocol import AudioFormat, ErrorCode, ProtocolError


def test_a_law_is_accepted_at_8_khz_both_ways_and_said_in_the_wire_form() -> None:
    audio = AudioFormat(input_rate=8000, output_rate=8000, encoding="pcma")
    assert audio.encoding == "pcma"
    assert audio.to_dict() == {"input_rate": 8000, "output_rate": 8000, "encoding": "pcma"}


@pytest.mark.parametrize("encoding", ["pcma", "pcmu"])
@pytest.mark.parametrize("rates", [(16000, 8000), (8000, 24000), (48000, 48000)])
def test_a_law_at_another_rate_is_refused_as_mu_law_is(
    encoding: str, rates: tuple[int, int]
) -> None:
    with pytest.raises(ProtocolError) as refused:
        AudioFormat(input_rate=rates[0], output_rate=rates[1], encoding=encoding)
    assert refused.value.code == ErrorCode.INVALID_EVENT
    assert str(refused.value) == f"session.start: 'audio.encoding' {encoding} is 8000 Hz both ways"


def test_an_unknown_encoding_names_a_law_among_the_allowed() -> None:
    with pytest.raises(ProtocolError, match='"pcm16", "pcmu" or "pcma"'):
        AudioFormat(input_rate=8000, output_rate=8000, encoding="alaw")
