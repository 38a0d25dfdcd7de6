"""`python -m moldau` (and the `moldau` script) runs the `moldau` command line.

kio registers Hypothesis strategies for its types whenever Hypothesis is importable, and importing
Hypothesis creates `.hypothesis/` in the working directory. A command (above all `moldau server`)
must leave nothing there but its data, so Hypothesis is marked absent before kio is imported; test
processes that import Moldau as a library keep it.
"""

import sys

sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]

from moldau.cli.main import main  # noqa: E402

if __name__ == "__main__":
    main()
