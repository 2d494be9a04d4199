"""``python -m pass_core.bench``: the benchmark's command line (``pass_core.bench.run``)."""

import sys

from pass_core.bench.run import main

sys.exit(main())
