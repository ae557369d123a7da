"""``python -m fakes.gemini_live --help``: the fake Gemini Live (over TLS) server on its own."""

import sys

from fakes.gemini_live.server import main

if __name__ == "__main__":
    sys.exit(main())
