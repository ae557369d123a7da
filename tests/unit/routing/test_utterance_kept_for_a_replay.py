"""What a failover gives the next target of the user's audio (``Utterance``): everything since
the last completed reply, bounded, converted to the next provider's format with nothing lost."""

from __future__ import annotations

from gateway.routing.utterance import Utterance, converted, silence

PCM24 = ("pcm16", 24000)
PCM16 = ("pcm16", 16000)
ULAW = ("pcmu", 8000)


def chunk(ms: int, rate: int = 24000) -> bytes:
    return bytes(2 * rate * ms // 1000)


def test_a_completed_reply_drops_what_was_said_before_its_turn_ended() -> None:
    said = Utterance(PCM24)
    said.keep(chunk(20))
    said.keep(chunk(20))
    said.turn_ended()
    said.keep(chunk(20))  # the user goes on talking while the reply is on its way
    said.answered()
    assert len(said) == 1
    assert said.size == len(chunk(20))


def test_a_turn_with_no_reply_is_kept_whole() -> None:
    said = Utterance(PCM24)
    for _ in range(10):
        said.keep(chunk(20))
    said.turn_ended()
    assert len(said) == 10  # nothing answered it: all of it goes to the next target


def test_at_most_the_buffer_is_kept_oldest_first_and_the_mark_follows() -> None:
    said = Utterance(PCM24, keep_s=0.1)
    for _ in range(4):
        said.keep(chunk(20))
    said.turn_ended()
    for _ in range(4):
        said.keep(chunk(20))
    assert said.size <= len(chunk(100))
    said.answered()  # only what is left of the answered turn goes
    assert len(said) == 4


def test_a_replay_in_another_format_keeps_the_length() -> None:
    said = Utterance(PCM24)
    for _ in range(25):
        said.keep(chunk(20))
    replay = b"".join(said.as_format(PCM16))
    assert abs(len(replay) - len(chunk(500, 16000))) <= 2 * 16  # ± a millisecond of filter
    phone = b"".join(said.as_format(ULAW))
    assert abs(len(phone) - 8000 * 500 // 1000) <= 8


def test_reformat_converts_what_is_kept_and_the_limit() -> None:
    said = Utterance(ULAW)
    said.keep(b"\xff" * 160)
    said.reformat(PCM16)
    assert said.format == PCM16
    assert said.size == 2 * 320  # 20 ms at 16 kHz, PCM16
    said.clear()
    assert len(said) == 0
    assert said.size == 0


def test_silence_is_silent_in_each_encoding() -> None:
    assert silence(0.01, ULAW) == b"\xff" * 80
    assert silence(0.01, PCM16) == bytes(320)


def test_converting_nothing_gives_nothing() -> None:
    assert converted([], PCM24, PCM16) == []
