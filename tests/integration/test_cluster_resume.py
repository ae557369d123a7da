"""Sessions resumed on another node: real gateway processes on one real Redis, the OpenAI fake
(in this process) or the local model upstream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cluster_kit import Cluster, cluster, connect, drop, resume, resumed_on
from harness import speak
from redis_kit import RedisServer

from fakes.openai_realtime.server import FakeRealtimeServer


def items_sent(fake: FakeRealtimeServer, connection: int) -> list[dict[str, Any]]:
    conn = fake.connections[connection]
    return [e["item"] for e in conn.received("conversation.item.create")]


async def test_a_text_session_resumes_on_another_node_with_its_history(
    on_openai: Cluster, fake: FakeRealtimeServer
) -> None:
    a, b = await on_openai.node("a"), await on_openai.node("b")
    client = await connect(on_openai, a)
    started = await client.start("text")
    assert (await client.say("remember the blue door"))[-1][
        "text"
    ] == "You said: remember the blue door"
    await drop(client)

    again, answer = await resumed_on(on_openai, b, started)
    assert answer["resumed"] is True
    assert answer["session_id"] == started["session_id"]
    assert "recovery" not in answer  # node a is alive: nothing was lost
    reply = await again.say("and now?")
    assert reply[-1]["text"] == "You said: and now?"
    # Node b's upstream got the conversation so far, then the new message.
    replayed = items_sent(fake, len(fake.connections) - 1)
    texts = [item["content"][0]["text"] for item in replayed]
    assert texts[:2] == ["remember the blue door", "You said: remember the blue door"]
    assert texts[-1] == "and now?"
    await again.ws.close()


async def test_a_voice_session_resumes_on_another_node(
    on_openai: Cluster, fake: FakeRealtimeServer
) -> None:
    a, b = await on_openai.node("a"), await on_openai.node("b")
    audio = {"input_rate": 24000, "output_rate": 24000}
    client = await connect(on_openai, a)
    started = await client.start("voice", audio=audio)
    await speak(client, 400, 24000)
    heard = await client.last("transcript.done", role="user")
    await client.until("response.done")
    await drop(client)

    again, _ = await resumed_on(on_openai, b, started, mode="voice")
    await speak(again, 300, 24000)
    second = await again.last("transcript.done", role="user")
    done = await again.last("response.done")
    assert done["status"] == "completed"
    assert again.audio  # b speaks too
    replayed = items_sent(fake, len(fake.connections) - 1)
    texts = [part.get("text", part.get("transcript")) for i in replayed for part in i["content"]]
    assert texts[0] == heard["text"]  # what node a heard is node b's history
    assert second["text"] != heard["text"]
    await again.ws.close()


async def test_a_session_on_the_local_model_resumes_on_another_node(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with cluster(redis_server, tmp_path, provider="local") as group:
        a, b = await group.node("a"), await group.node("b")
        client = await connect(group, a)
        started = await client.start("text")
        await client.say("first words")
        await drop(client)
        again = await connect(group, b)
        assert (await resume(again, started))["resumed"] is True
        assert (await again.say("second words"))[-1]["text"] == "You said: second words"
        await again.ws.close()


async def test_a_call_made_after_a_move_runs_though_the_local_model_numbers_calls_again(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """Found by the soak (a turn that never ended): on node b the local model is a new one
    that numbers its calls from call_1 again; the session's ledger knew call_1 (node a's call)
    and b adopted its result for the new call, which never ran."""
    async with cluster(redis_server, tmp_path, provider="local") as group:
        a, b = await group.node("a"), await group.node("b")
        client = await connect(group, a)
        started = await client.start("text")
        before = await client.say('/tool journal {"label": "on a"}')
        await drop(client)
        again, _ = await resumed_on(group, b, started)
        after = await again.say('/tool journal {"label": "on b"}')
        await again.ws.close()
    first_call = next(e for e in before if e["type"] == "tool.finished")
    second_call = next(e for e in after if e["type"] == "tool.finished")
    assert second_call["call_id"] != first_call["call_id"]
    assert second_call["data"]["label"] == "on b"
    assert [line["label"] for line in group.journal_lines()] == ["on a", "on b"]


async def test_a_confirmation_asked_on_one_node_runs_once_when_approved_on_another(
    on_openai: Cluster, fake: FakeRealtimeServer
) -> None:
    a, b = await on_openai.node("a"), await on_openai.node("b")
    client = await connect(on_openai, a)
    started = await client.start("text")
    await client.send("text.send", text='/tool journal_confirm {"label":"booking"}')
    requested = await client.last("confirmation.requested")
    await client.until_reply()
    await drop(client)

    again = await connect(on_openai, b)
    assert (await resume(again, started))["resumed"] is True
    await again.send(
        "confirmation.respond", confirmation_id=requested["confirmation_id"], decision="approve"
    )
    resolved = await again.last("confirmation.resolved")
    assert resolved["decision"] == "approved"
    assert resolved["result"]["ok"] is True
    reply = await again.until_reply()
    assert "journal_confirm" in reply[-1]["text"]
    # Approving again, on either node, runs nothing more.
    await again.send(
        "confirmation.respond", confirmation_id=requested["confirmation_id"], decision="approve"
    )
    assert (await again.last("error"))["code"] == "confirmation_not_found"
    lines = on_openai.journal_lines()
    assert [line["label"] for line in lines] == ["booking"]
    assert lines[0]["pid"] == b.pid
    await again.ws.close()


async def test_usage_goes_on_across_nodes_and_is_the_whole_sessions(
    on_openai: Cluster, fake: FakeRealtimeServer
) -> None:
    """The usage sums are in the snapshot: node b's session.ended reports what node a's
    upstream reported too, once (and node a wrote no usage record of its own)."""
    a, b = await on_openai.node("a"), await on_openai.node("b")
    client = await connect(on_openai, a)
    started = await client.start("text")
    await client.say("first, on node a")
    await drop(client)

    again, _ = await resumed_on(on_openai, b, started)
    await again.say("then, on node b")
    await again.send("session.end")
    ended = await again.last("session.ended")
    await again.ws.close()
    reported = {"input_text": 0, "output_text": 0, "output_audio": 0}
    responses = 0
    for conn in fake.connections:
        for done in conn.sent("response.done"):
            usage = done["response"]["usage"]
            responses += 1
            reported["input_text"] += usage["input_token_details"]["text_tokens"]
            reported["output_text"] += usage["output_token_details"]["text_tokens"]
            reported["output_audio"] += usage["output_token_details"]["audio_tokens"]
    usage = ended["usage"]
    assert usage["responses"] == responses == 2
    assert {kind: usage["tokens"][kind] for kind in reported} == reported
    assert reported["output_text"] > 0


async def test_the_clients_own_tools_follow_a_resume_to_another_node(
    on_openai: Cluster, fake: FakeRealtimeServer
) -> None:
    """The declarations are in the snapshot: node b's upstream is offered the client's tool,
    and a call of it there is asked of the client, answered, and replied from."""
    lookup = {
        "name": "lookup_order",
        "description": "Look an order up by its number.",
        "parameters": {"type": "object", "properties": {"order": {"type": "string"}}},
    }
    a, b = await on_openai.node("a"), await on_openai.node("b")
    client = await connect(on_openai, a)
    started = await client.start("text", client_tools=[lookup])
    await client.say("hello from node a")
    await drop(client)

    again, _ = await resumed_on(on_openai, b, started)
    on_b = fake.connections[-1]
    declared = [tool["name"] for tool in on_b.received("session.update")[0]["session"]["tools"]]
    assert "lookup_order" in declared
    await again.send("text.send", text='/tool lookup_order {"order": "A1"}')
    request = await again.last("client_tool.requested")
    assert request["name"] == "lookup_order"
    await again.send("client_tool.output", call_id=request["call_id"], output="shipped")
    done = await again.last("response.done")
    while not done["text"]:  # the response that made the call ends first, empty
        done = await again.last("response.done")
    assert "shipped" in done["text"]
    await again.ws.close()
