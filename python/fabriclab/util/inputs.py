"""Reading the files a user names: one place that turns every way a read
can fail (missing, a folder, unreadable, not UTF-8) into an
:class:`~fabriclab.errors.InputError` naming the field; and the folders a
command will write into, refused before any work."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError


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


def check_out_dir(path: Path, option: str) -> None:
    """A folder the command will write into: refused before any work if it
    is a file, sits under one, or could not be made in its nearest existing
    folder."""
    if path.exists() and not path.is_dir():
        raise InputError(f"{option}: {path} exists and is not a folder")
    blocker = next((a for a in path.absolute().parents if a.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise InputError(f"{option}: cannot create {path}: {blocker} is a file, not a folder")
    if not path.exists() and blocker is not None and not os.access(blocker, os.W_OK | os.X_OK):
        raise InputError(f"{option}: cannot create {path}: {blocker} is not writable")
