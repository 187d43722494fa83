"""``python -m fabriclab.cli``: the same as the ``fabriclab`` console script."""

from .quick import main

main()
