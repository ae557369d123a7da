"""Gemini Live upstream: wire models, a pure codec, the SDK transport, a faithful fake.

The fake server (``fake_server``) is for tests and benchmarks; it is not imported here.
"""

from transports.gemini_live.codec import GeminiCodec
from transports.gemini_live.transport import GeminiLiveTransport, GeminiOptions

__all__ = ["GeminiCodec", "GeminiLiveTransport", "GeminiOptions"]
