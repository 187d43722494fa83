"""Rewrites the summary table at the top of docs/reproductions.md from the
registry (python/fabriclab/systems/registry/rows.py, ``ROWS``); nothing else on
the page changes. ``--check`` only reports whether the page is current
(exit 1 when not). tests/test_registry.py makes the same comparison.

    PYTHONPATH=python python scripts/gen_repro_table.py [--check]
"""

import sys
from pathlib import Path

from fabriclab.systems.reproduce import replace_table

PAGE = Path(__file__).resolve().parent.parent / "docs" / "reproductions.md"


def main(argv: list[str]) -> int:
    old = PAGE.read_text()
    new = replace_table(old)
    if "--check" in argv:
        print("docs/reproductions.md: summary table " + ("current" if new == old else "differs from the registry"))
        return 0 if new == old else 1
    if new != old:
        PAGE.write_text(new)
    print(f"wrote {PAGE}" if new != old else "docs/reproductions.md already current")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
