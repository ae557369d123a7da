"""``InOrderAudio``: each packet goes to the decoder as it arrives, a gap is counted lost at once
(no stall), a packet older than one already decoded is dropped as late; sequence numbers wrap."""

from __future__ import annotations

from aiortc.rtp import RtpPacket

from gateway.edges.rtc.jitter import InOrderAudio


def packet(sequence: int) -> RtpPacket:
    made = RtpPacket(payload_type=111, sequence_number=sequence, timestamp=sequence * 960)
    made._data = bytes([sequence % 256])  # type: ignore[attr-defined]  # as the receiver sets
    return made


def fed(buffer: InOrderAudio, *sequences: int) -> list[int | None]:
    out = []
    for sequence in sequences:
        pli, frame = buffer.add(packet(sequence))
        assert pli is False
        out.append(None if frame is None else frame.timestamp // 960)
    return out


def test_packets_in_order_pass_at_once_and_a_gap_waits_for_nothing() -> None:
    buffer = InOrderAudio()
    assert fed(buffer, 10, 11, 12, 15, 16) == [10, 11, 12, 15, 16]
    assert (buffer.lost, buffer.late) == (2, 0)
    assert fed(buffer, 13, 14) == [None, None]  # too late: 15 was decoded already
    assert buffer.late == 2
    assert fed(buffer, 17) == [17]


def test_sequence_numbers_wrap() -> None:
    buffer = InOrderAudio()
    assert fed(buffer, 65534, 65535, 0, 2) == [65534, 65535, 0, 2]
    assert (buffer.lost, buffer.late) == (1, 0)
    assert fed(buffer, 65535) == [None]
    assert buffer.late == 1
