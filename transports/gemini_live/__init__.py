"""Gemini Live upstream: wire models, a pure codec, the SDK transport.

Its faithful fake server lives in ``fakes`` (tests, benchmarks, demos), apart from the product.
"""

from transports.gemini_live.codec import GeminiCodec
from transports.gemini_live.transport import GeminiLiveTransport, GeminiOptions

__all__ = ["GeminiCodec", "GeminiLiveTransport", "GeminiOptions"]
