"""OpenAI Realtime (GA) upstream: wire models, a pure codec, the SDK transport, a faithful fake.

The fake server (``fake_server``) is for tests and benchmarks; it is not imported here.
"""

from transports.openai_realtime.codec import RealtimeCodec, session_config
from transports.openai_realtime.transport import (
    OpenAIRealtimeTransport,
    RealtimeOptions,
    backoff_delay,
)

__all__ = [
    "OpenAIRealtimeTransport",
    "RealtimeCodec",
    "RealtimeOptions",
    "backoff_delay",
    "session_config",
]
