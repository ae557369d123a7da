"""``python -m fakes.openai_realtime --help``: the fake OpenAI Realtime (GA) server on its own."""

import sys

from fakes.openai_realtime.server import main

if __name__ == "__main__":
    sys.exit(main())
