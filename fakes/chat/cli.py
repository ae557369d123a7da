"""The fake chat-completions server's command line: ``python -m fakes.chat --help``."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from fakes.chat.server import FakeChatOptions, FakeChatServer
from fakes.faults import UpstreamFaults, add_fault_arguments, faults_from_args
from fakes.lifecycle import run_until_signalled

__all__ = ["main"]


def _parse_args(argv: Sequence[str] | None) -> tuple[FakeChatOptions, str, int, UpstreamFaults]:
    parser = argparse.ArgumentParser(
        prog="python -m fakes.chat",
        description="A fake chat-completions server on http://HOST:PORT/v1.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--api-key", default=None, help="only this Bearer key is accepted")
    parser.add_argument("--fragment-size", type=int, default=3)
    parser.add_argument("--no-interleave", action="store_true")
    parser.add_argument("--split-names", action="store_true")
    parser.add_argument("--omit-ids", action="store_true")
    parser.add_argument("--no-empty-deltas", action="store_true")
    parser.add_argument("--word-delay-ms", type=float, default=0.0)
    parser.add_argument("--retry-after-ms", type=int, default=1)
    parser.add_argument("--text-chunk-chars", type=int, default=None)
    add_fault_arguments(parser)
    args = parser.parse_args(argv)
    options = FakeChatOptions(
        api_key=args.api_key,
        fragment_size=args.fragment_size,
        interleave=not args.no_interleave,
        split_names=args.split_names,
        omit_ids=args.omit_ids,
        empty_deltas=not args.no_empty_deltas,
        word_delay_s=args.word_delay_ms / 1000,
        retry_after_ms=args.retry_after_ms,
        text_chunk_chars=args.text_chunk_chars,
    )
    return options, args.host, args.port, faults_from_args(parser, args)


def main(argv: Sequence[str] | None = None) -> int:
    options, host, port, faults = _parse_args(argv)
    server = FakeChatServer(options, host=host, port=port, faults=faults)
    asyncio.run(run_until_signalled(server, lambda: server.base_url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
