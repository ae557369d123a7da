"""A text turn (``output_modalities: ["text"]``): the client's message is echoed, and the reply
streams in a ``text`` part (``response.output_text.delta`` / ``.done``)."""

from __future__ import annotations

from compat_kit import done, frame, sdk_parse_all, started, text_delta, translator, types

from gateway.edges.realtime.client_wire import ItemCreate, ResponseCreate, decode_client_event

TEXT_TURN = [
    "conversation.item.added",  # the client's message, echoed
    "conversation.item.done",
    "response.created",
    "response.output_item.added",
    "conversation.item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "conversation.item.done",
    "response.done",
]


def test_a_text_turn_is_the_ga_sequence_in_order() -> None:
    compat = translator(modality="text")
    create = decode_client_event(
        frame(
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "What is 2+2?"}],
                },
            }
        )
    )
    assert isinstance(create, ItemCreate)
    events = compat.create_item(create)
    request = decode_client_event(
        frame({"type": "response.create", "response": {"metadata": {"turn": "1"}}})
    )
    assert isinstance(request, ResponseCreate)
    compat.request_response(request)
    events += compat.on_event(started())
    events += compat.on_event(text_delta("It is "))
    events += compat.on_event(text_delta("4."))
    events += compat.on_event(done("completed", "It is 4."))
    assert types(events) == TEXT_TURN
    sdk_parse_all(events)

    user_added, user_done = events[0], events[1]
    assert user_added["previous_item_id"] is None
    assert user_added["item"] == user_done["item"]
    assert user_added["item"]["role"] == "user"
    assert user_added["item"]["content"] == [{"type": "input_text", "text": "What is 2+2?"}]
    created = events[2]["response"]
    assert created["output_modalities"] == ["text"]
    assert created["metadata"] == {"turn": "1"}
    assert events[4]["previous_item_id"] == user_added["item"]["id"]
    assert events[5]["part"] == {"type": "text", "text": ""}
    assert [e["delta"] for e in events[6:8]] == ["It is ", "4."]
    assert events[8]["text"] == "It is 4."
    assert events[9]["part"] == {"type": "text", "text": "It is 4."}
    final = events[10]["item"]
    assert final["content"] == [{"type": "output_text", "text": "It is 4."}]
    assert final["status"] == "completed"
    response = events[12]["response"]
    assert response["output"] == [final]
    assert response["metadata"] == {"turn": "1"}


def test_a_system_message_is_echoed_too() -> None:
    compat = translator(modality="text")
    create = decode_client_event(
        frame(
            {
                "type": "conversation.item.create",
                "item": {
                    "id": "item_rules",
                    "type": "message",
                    "role": "system",
                    "content": [{"type": "input_text", "text": "Answer in French."}],
                },
            }
        )
    )
    assert isinstance(create, ItemCreate)
    events = compat.create_item(create)
    assert types(events) == ["conversation.item.added", "conversation.item.done"]
    assert events[0]["item"]["id"] == "item_rules"  # the client's own id is kept
    sdk_parse_all(events)


def test_a_text_reply_in_a_voice_session_uses_a_text_part() -> None:
    compat = translator()  # audio modality: the provider still answered in text
    events = compat.on_event(started()) + compat.on_event(text_delta("Hi"))
    events += compat.on_event(done("completed", "Hi"))
    assert "response.output_text.done" in types(events)
    assert "response.output_audio.done" not in types(events)
    sdk_parse_all(events)
