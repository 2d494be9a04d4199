"""``python -m pass_core.bench``: the benchmark's command line (``pass_core.bench.run``)."""

import sys

from pass_core.bench.run import main
from pass_core.runtime.outputs import stdout_failed

try:
    sys.exit(main())
except OSError as err:  # > /dev/full: one line (the JSON report, if asked for, is written first)
    sys.exit(stdout_failed(err))
except KeyboardInterrupt:  # no half report: the runs made so far would compare the methods on different prompts
    print("\ninterrupted (Ctrl-C): no report was written; for a shorter run use --limit N (prompts) or fewer "
          "--methods.", file=sys.stderr)
    sys.exit(130)
