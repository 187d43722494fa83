"""Reading the files a user names: one place that turns every way a read
can fail (missing, a folder, unreadable, not UTF-8) into an
:class:`~fabriclab.errors.InputError` naming the field."""

from __future__ import annotations

from pathlib import Path

from .errors import InputError


def read_text(path: Path, field: str, what: str = "file") -> str:
    """The UTF-8 text of ``path``; errors start with ``field`` (e.g.
    ``topology.path``), or with nothing when ``field`` is empty (the file
    itself is what the user gave)."""
    at = f"{field}: " if field else ""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"{at}no such {what}: {path}") from None
    except IsADirectoryError:
        raise InputError(f"{at}{path} is a folder, not a {what}") from None
    except OSError as e:
        raise InputError(f"{at}cannot read {path}: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{at}{path} is not UTF-8 text (invalid byte at offset {e.start})") from None
