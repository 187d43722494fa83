"""The command line (``fabriclab``): ``quick.py`` runs a plain ``run`` or
``validate`` line without typer; ``main.py`` is the typer application with
every command; ``commands.py`` holds the bodies of ``run`` and ``validate``
that both call. ``python -m fabriclab.cli`` is the console script."""
