"""The errors fabriclab reports to its users.

:class:`InputError` is bad input: its message names the field (or the
command-line option), says what is wrong and what is allowed. The CLI prints
it on one line and exits with code 2. Every module's own input error
(``ScenarioError``, ``PlanError``, ...) derives from it. Anything else that
escapes is a bug: the CLI writes its traceback to a file and exits with 3.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input; the message names the field and the rule."""
