"""``python -m pass_core.train_drafter``: train a ParallelSpec drafter (the trainer is
``pass_core.training.parallelspec``; see docs/training.md). Bad input (a damaged checkpoint, training that
diverged) ends with ``error: ...`` and exit code 2, not a traceback."""

import sys

from pass_core.runtime.outputs import stdout_failed
from pass_core.training.checkpoint import AFTER_CTRL_C
from pass_core.training.parallelspec import main

if __name__ == "__main__":
    try:
        main()
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except OSError as err:  # > /dev/full: one line, not a traceback (the files are written before the report)
        sys.exit(stdout_failed(err))
    except KeyboardInterrupt:  # the checkpoints written so far are kept
        print(AFTER_CTRL_C, file=sys.stderr)
        sys.exit(130)
