"""``python -m pass_core.train``: train look-ahead embeddings or adapters (the trainer is
``pass_core.training.lookahead``; see docs/training.md)."""

import sys

from pass_core.runtime.outputs import stdout_failed
from pass_core.training.checkpoint import AFTER_CTRL_C
from pass_core.training.lookahead import main

if __name__ == "__main__":
    try:
        sys.exit(main())
    except OSError as err:  # > /dev/full: one line, not a traceback (the files are written before the report)
        sys.exit(stdout_failed(err))
    except KeyboardInterrupt:  # the checkpoints written so far are kept
        print(AFTER_CTRL_C, file=sys.stderr)
        sys.exit(130)
