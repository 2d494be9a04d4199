"""``python -m pass_core.train``: train look-ahead embeddings or adapters (the trainer is
``pass_core.training.lookahead``; see docs/training.md)."""

import sys

from pass_core.training.lookahead import main

if __name__ == "__main__":
    sys.exit(main())
