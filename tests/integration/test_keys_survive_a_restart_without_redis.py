"""Without Redis, keys live in SQLite under the gateway's data folder: a key made with
``python -m gateway keys create`` works on a gateway process, still works after the process
restarts, and once revoked from the shell it is refused, and its live session ends within a
second (the gateway reads revocations from the same file)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
from harness import Client
from process_kit import REPO, build_registry_file, gateway_process


def cli(data: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    env["GATEWAY_DATA_DIR"] = str(data)
    done = subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def one_turn(http: aiohttp.ClientSession, url: str, secret: str) -> Client:
    ws = await http.ws_connect(url, headers={"Authorization": f"Bearer {secret}"})
    client = Client(ws)
    await client.start("text")
    assert (await client.say("hello"))[-1]["type"] == "response.done"
    return client


async def test_a_key_made_from_the_shell_survives_a_restart_and_its_revocation_reaches_the_node(
    tmp_path: Path,
) -> None:
    registry = await asyncio.to_thread(build_registry_file, tmp_path / "registry.json")
    data = tmp_path / "gateway-data"  # gateway_process's data folder for name="gateway"
    made = cli(data, "keys", "create", "--owner", "alice", "--budget", "tokens_per_day=100000")
    secret, key_json = made.split("\n", 1)
    assert secret.startswith("gk_")
    assert secret not in key_json
    key_id = json.loads(key_json)["id"]
    secret_for_jwts = "x" * 40
    async with aiohttp.ClientSession() as http:
        async with gateway_process(
            tmp_path, registry, provider="local", auth="jwt", auth_secret=secret_for_jwts
        ) as node:
            client = await one_turn(http, node.ws_url, secret)
            await client.ws.close()
        async with gateway_process(
            tmp_path, registry, provider="local", auth="jwt", auth_secret=secret_for_jwts
        ) as node:  # a new process
            client = await one_turn(http, node.ws_url, secret)
            cli(data, "keys", "revoke", key_id)
            revoked_at = time.monotonic()  # the shell has written it
            ended = await client.last("session.ended", within=5.0)
            assert ended["reason"] == "key_revoked"
            assert time.monotonic() - revoked_at < 1.0
            async with http.get(
                node.url + "/v1/session", headers={"Authorization": f"Bearer {secret}"}
            ) as refused:
                assert refused.status == 401
    usage = json.loads(cli(data, "usage", "--group-by", "key"))
    assert [row["id"] for row in usage] == [key_id]
