"""``python -m fakes.chat --help``: the fake chat-completions server on its own."""

import sys

from fakes.chat.server import main

if __name__ == "__main__":
    sys.exit(main())
