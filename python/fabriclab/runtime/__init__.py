"""fabriclab.runtime: run collective plans for real, over TCP between
processes (the Rust crate fabriclab-runtime through the binding). See
docs/runtime.md. Names load lazily, so the CLI starts without numpy."""

from importlib import import_module

_WHERE = {
    "Communicator": ".comm",
    "RuntimeFailure": ".errors", "PeerFailure": ".errors", "CorruptMessage": ".errors",
    "JoinRefused": ".errors", "BootstrapError": ".errors", "RuntimeInputError": ".errors",
    "plan_json": ".plans", "shard_bounds": ".plans", "OPS": ".plans", "ALGOS": ".plans",
}
__all__ = list(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        return getattr(import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
