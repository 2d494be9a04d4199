"""``python -m pass_core.bench``: the benchmark's command line (``pass_core.bench.run``)."""

import sys

from pass_core.bench.run import main

try:
    sys.exit(main())
except KeyboardInterrupt:  # no half report: the runs made so far would compare the methods on different prompts
    print("\ninterrupted (Ctrl-C): no report was written; for a shorter run use --limit N (prompts) or fewer "
          "--methods.", file=sys.stderr)
    sys.exit(130)
