"""OpenAI Realtime (GA) upstream: wire models, a pure codec, the transport.

Its faithful fake server lives in ``fakes`` (tests, benchmarks, demos), apart from the product.
"""

from transports.openai_realtime.codec import RealtimeCodec
from transports.openai_realtime.transport import (
    OpenAIRealtimeTransport,
    RealtimeOptions,
    backoff_delay,
    warm_up,
)
from transports.openai_realtime.wire import session_config

__all__ = [
    "OpenAIRealtimeTransport",
    "RealtimeCodec",
    "RealtimeOptions",
    "backoff_delay",
    "session_config",
    "warm_up",
]
