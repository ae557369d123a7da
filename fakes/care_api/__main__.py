"""``python -m fakes.care_api --help``: the example care API on its own."""

import sys

from fakes.care_api.server import main

if __name__ == "__main__":
    sys.exit(main())
