"""The pydantic schema walked into plain specs for the fuzzer: per model, its
fields (TOML key, type tree, bounds, whether ``"off"`` means ``None``), and the
lookups the strategies and mutations need (:func:`root_spec`, :func:`spec_at`,
:func:`resolve_model`). See :mod:`strategies` for how they are used."""

from __future__ import annotations

import functools
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from pydantic import BaseModel

from fabriclab import scenario as S
from fabriclab.scenario import units as U



@dataclass
class Bounds:
    ge: float | None = None  # inclusive lower bound (gt folded in for ints)
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    min_len: int | None = None
    max_len: int | None = None

    def merge(self, meta) -> None:
        for attr, dst in (("ge", "ge"), ("gt", "gt"), ("le", "le"), ("lt", "lt"),
                          ("min_length", "min_len"), ("max_length", "max_len")):
            v = getattr(meta, attr, None)
            if v is not None:
                setattr(self, dst, v)

    def int_range(self) -> tuple[int | None, int | None]:
        lo = self.ge if self.ge is not None else (self.gt + 1 if self.gt is not None else None)
        hi = self.le if self.le is not None else (self.lt - 1 if self.lt is not None else None)
        return (None if lo is None else math.ceil(lo)), (None if hi is None else math.floor(hi))


@dataclass
class T:
    """A type in the schema. kind: int, float, bool, str, literal, quantity,
    list, dict, union, model, any."""

    kind: str
    bounds: Bounds = field(default_factory=Bounds)
    choices: tuple = ()  # literal
    unit: str | None = None  # quantity: time | rate | size
    item: "T | None" = None  # list item, dict value
    options: list["T"] = field(default_factory=list)  # union members
    model: "ModelSpec | None" = None
    discriminator: str | None = None


@dataclass
class FieldSpec:
    name: str  # python name
    key: str  # the key in TOML (alias if any)
    type: T
    required: bool
    optional: bool  # None allowed (then it is simply omitted)
    off: bool  # accepts the string "off" (-> None)
    default: Any
    owner: str  # model class name


@dataclass
class ModelSpec:
    cls: type
    fields: dict[str, FieldSpec]  # by TOML key

    @property
    def name(self) -> str:
        return self.cls.__name__


def _unit_kinds() -> dict[int, str]:
    kinds = {}
    for kind, ann in (("time", U.TimePs), ("rate", U.RateBps), ("size", U.SizeBytes)):
        for m in getattr(ann, "__metadata__", ()):
            f = getattr(m, "func", None)
            if f is not None:
                kinds[id(f)] = kind
    return kinds


_UNIT_OF_FUNC = _unit_kinds()
_NONE = type(None)


def _type_of(ann, metadata=(), discriminator=None) -> tuple[T, bool]:
    """(type, optional) of an annotation plus pydantic metadata."""
    bounds = Bounds()
    unit = None
    optional = False
    while True:
        origin = typing.get_origin(ann)
        if origin is typing.Annotated:
            args = typing.get_args(ann)
            ann, extra = args[0], args[1:]
            metadata = list(metadata) + list(extra)
            continue
        break
    for m in metadata:
        f = getattr(m, "func", None)
        if f is not None and id(f) in _UNIT_OF_FUNC:
            unit = _UNIT_OF_FUNC[id(f)]
        inner = getattr(m, "metadata", None)  # a FieldInfo inside Annotated
        if isinstance(inner, list):
            for x in inner:
                bounds.merge(x)
            discriminator = discriminator or getattr(m, "discriminator", None)
        bounds.merge(m)
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin in (Union, getattr(types, "UnionType", Union)):
        members = [a for a in args if a is not _NONE]
        optional = len(members) < len(args)
        if len(members) == 1:
            t, _ = _type_of(members[0], metadata, discriminator)
            return t, optional
        opts = [_type_of(a)[0] for a in members]
        return T("union", bounds=bounds, options=opts, discriminator=discriminator), optional
    if origin is Literal:
        return T("literal", choices=args), optional
    if origin in (list, typing.List):
        item, _ = _type_of(args[0]) if args else (T("any"), False)
        return T("list", bounds=bounds, item=item), optional
    if origin in (dict, typing.Dict):
        val, _ = _type_of(args[1]) if len(args) == 2 else (T("any"), False)
        return T("dict", bounds=bounds, item=val), optional
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return T("model", model=model_spec(ann)), optional
    if unit is not None:
        return T("quantity", bounds=bounds, unit=unit), optional
    if ann is bool:
        return T("bool"), optional
    if ann is int:
        return T("int", bounds=bounds), optional
    if ann is float:
        return T("float", bounds=bounds), optional
    if ann is str:
        return T("str", bounds=bounds), optional
    return T("any"), optional


def _off_fields(cls) -> set[str]:
    """Fields whose before-validator maps the string "off" to None."""
    out = set()
    decs = getattr(cls, "__pydantic_decorators__", None)
    if decs is None:
        return out
    for d in decs.field_validators.values():
        if getattr(d.info, "mode", None) != "before":
            continue
        fn = d.func
        fn = getattr(fn, "__func__", fn)
        try:
            res = fn("off") if fn.__code__.co_argcount == 1 else fn(cls, "off")
        except Exception:
            continue
        if res is None:
            out.update(d.info.fields)
    return out


@functools.lru_cache(maxsize=None)
def model_spec(cls) -> ModelSpec:
    fields = {}
    offs = _off_fields(cls)
    for name, fi in cls.model_fields.items():
        t, optional = _type_of(fi.annotation, fi.metadata, fi.discriminator)
        if fi.discriminator and t.kind == "union":
            t.discriminator = fi.discriminator
        default = None if fi.is_required() else (fi.default_factory() if fi.default_factory else fi.default)
        key = fi.alias or name
        fields[key] = FieldSpec(name=name, key=key, type=t, required=fi.is_required(), optional=optional,
                                off=name in offs, default=default, owner=cls.__name__)
    return ModelSpec(cls, fields)


def root_spec() -> ModelSpec:
    return model_spec(S.Scenario)


def _disc_value(ms: ModelSpec, disc: str):
    f = ms.fields.get(disc)
    if f is not None and f.type.kind == "literal":
        return f.type.choices[0]
    return None


def resolve_model(t: T, value) -> ModelSpec | None:
    """The model a table value belongs to (discriminated unions by tag)."""
    if t.kind == "model":
        return t.model
    if t.kind == "union":
        models = [o.model for o in t.options if o.kind == "model"]
        if t.discriminator and isinstance(value, dict):
            for m in models:
                if _disc_value(m, t.discriminator) == value.get(t.discriminator):
                    return m
        return models[0] if models else None
    return None


def spec_at(d: dict, path: tuple) -> tuple[FieldSpec | None, T | None]:
    """The field spec and type at a path of keys/indices into a scenario dict
    (None where the path leaves the schema)."""
    ms = root_spec()
    fs: FieldSpec | None = None
    t: T | None = None
    cur: Any = d
    for part in path:
        if isinstance(part, int):
            if t is None or t.kind not in ("list", "union"):
                return None, None
            if t.kind == "union":
                lists = [o for o in t.options if o.kind == "list"]
                if not lists:
                    return None, None
                t = lists[0]
            t = t.item
            cur = cur[part] if isinstance(cur, list) and part < len(cur) else None
            continue
        if t is not None:
            ms = resolve_model(t, cur) if t.kind in ("model", "union") else None
            if ms is None and t.kind == "dict":
                t = t.item
                cur = cur.get(part) if isinstance(cur, dict) else None
                continue
        if ms is None:
            return None, None
        fs = ms.fields.get(part)
        if fs is None:
            return None, None
        t = fs.type
        cur = cur.get(part) if isinstance(cur, dict) else None
    return fs, t
