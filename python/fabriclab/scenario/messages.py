"""A scenario's validation errors as people read them: the field's dotted path,
what is wrong, and for an unknown field the fields allowed there."""

import re

from pydantic import BaseModel, ValidationError


def _allowed_fields(model: type[BaseModel], loc: tuple) -> list[str]:
    """Names a model at `loc` accepts, for 'unknown field' messages."""
    cur: type[BaseModel] | None = model
    for part in loc[:-1]:
        if cur is None or isinstance(part, int):
            continue
        f = cur.model_fields.get(part)
        if f is None:
            f = next((x for x in cur.model_fields.values() if x.alias == part), None)
        if f is None:
            return []
        ann = f.annotation
        cur = None
        for cand in _model_candidates(ann):
            cur = cand
            break
    if cur is None:
        return []
    return [f.alias or n for n, f in cur.model_fields.items()]


def _model_candidates(ann):
    import typing

    if isinstance(ann, type) and issubclass(ann, BaseModel):
        yield ann
        return
    for a in typing.get_args(ann):
        yield from _model_candidates(a)


# What a strict field takes, by pydantic's error type (quantities with units are not among them: see units.py).
_TOML_TYPES = {"bool_type": "a boolean (true or false, unquoted)", "int_type": "an integer (e.g. 8, unquoted)",
               "float_type": "a number (e.g. 0.5 or 1, unquoted)"}


def _toml_type_of(v) -> str:
    """A value as TOML calls its type, for 'must be ..., got ...'."""
    if isinstance(v, bool):
        return f"the boolean {str(v).lower()}"
    if isinstance(v, str):
        return f"the string {v!r}"
    if isinstance(v, float):
        return f"the float {v!r}"
    if isinstance(v, int):
        return f"the integer {v}"
    if isinstance(v, (list, tuple)):
        return "an array"
    if isinstance(v, dict):
        return "a table"
    return f"a {type(v).__name__}"


def format_validation_error(e: ValidationError, source: str, root: type[BaseModel]) -> str:
    """``e``'s errors, one line each, after ``source``; ``root`` is the model validated at the
    errors' paths' start (the one whose fields an unknown field's message lists)."""
    lines = []
    for err in e.errors():
        loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x in ("star", "leaf_spine", "fat_tree", "file")))
        where = ".".join(f"[{x}]" if isinstance(x, int) else str(x) for x in loc).replace(".[", "[")
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            allowed = _allowed_fields(root, err["loc"])
            msg = "unknown field" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
        elif err["type"] == "missing":
            msg = "required field is missing"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
            # A model's rule about one of its fields ("min_rto_ps (...) must ...") joins the field to the path.
            m = re.match(r"([a-z_][a-z_0-9.]*): (.*)", msg, re.S)
            if m:
                where = f"{where}.{m.group(1)}" if where else m.group(1)
                msg = m.group(2)
        elif err["type"] in _TOML_TYPES:
            # Strict types: a value of another TOML type is refused, never read as this one ("yes" as true).
            msg = f"must be {_TOML_TYPES[err['type']]}, got {_toml_type_of(err.get('input'))}"
        if err["type"] == "finite_number":
            msg = "must be a finite number (inf and nan are not allowed)"
        lines.append(f"{where or '(top level)'}: {msg}")
    return f"{source}: " + ("; ".join(lines) if len(lines) == 1 else "\n  " + "\n  ".join(lines))
