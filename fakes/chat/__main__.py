"""``python -m fakes.chat --help``: the fake chat-completions server on its own."""

import sys

from fakes.chat.cli import main

if __name__ == "__main__":
    sys.exit(main())
