"""The registry of reproductions (issue 29): every reproduced headline metric
in one place, with its paper's value, the band we hold ours to, our last full
run, and the quick mode's own numbers that CI guards.

Three tables:

- ``REPRODUCTIONS`` (``reproductions.py``): one entry per ``fabriclab
  reproduce NAME`` (run by ``systems.reproduce.run``), with the wall time of
  its ``--quick`` mode as measured and whether CI runs that quick mode
  (``tests/test_registry.py``).
- ``ROWS`` (``rows.py``): the summary table at the top of
  docs/reproductions.md, one row per headline metric, in the order shown. Each cell is the text the page
  shows; ``band`` adds a machine-checkable range where the tolerance is
  numeric (``None``: direction or prose only, checked by reading).
  ``scripts/gen_repro_table.py`` writes the page's table from ``ROWS``;
  ``tests/test_registry.py`` fails when the two differ.
- ``QUICK`` (``quick.py``): headline numbers of the ``--quick`` runs, read
  from their ``summary.json`` by key path, with the value measured (date, commit) and a
  band around it. The bands come from the quick runs themselves, never from
  the full runs: a quick run is a smaller, different experiment.

**Adding a reproduction** (e.g. Clockwork's Packet Rocket or cluster
selection, issue 27):

1. add its dispatch to ``systems.reproduce.run`` and a :class:`Reproduction` to
   ``REPRODUCTIONS`` (name, module, full-run note, measured quick seconds,
   ``ci``: whether the quick mode fits CI's budget);
2. add or replace its :class:`Row` entries in ``ROWS`` (cells as the page should
   show them; ``full_date`` of the run quoted) and run
   ``python scripts/gen_repro_table.py`` to rewrite the page's table;
3. run ``fabriclab reproduce NAME --quick --out d``, and add a
   :class:`QuickCheck` per headline number of ``d/summary.json``, with the
   value, the date and commit measured, and a band around it;
4. ``python -m pytest tests/test_registry.py``.

A change that moves a reproduced number changes ``ROWS`` (and so the page)
or ``QUICK`` in the same commit, with its reason in docs/reproductions.md.
"""

from .bands import Band, FullCheck, QuickCheck, _q
from .quick import QUICK
from .reproductions import _RUNS_ON, QUICK_MEASURED, REPRODUCTIONS, Reproduction
from .rows import ROWS, Row

# _q (a quick check with its band) and _RUNS_ON (each reproduction's "runs on" note) for the tests and the cells.
__all__ = [
           "QUICK",
           "QUICK_MEASURED",
           "REPRODUCTIONS",
           "ROWS",
           "_RUNS_ON",
           "Band",
           "FullCheck",
           "QuickCheck",
           "Reproduction",
           "Row",
           "_q",
]
