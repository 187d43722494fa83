"""fabriclab.runtime: run collective plans for real, over TCP between
processes (the Rust crate fabriclab-runtime through the binding). See
docs/runtime.md."""

from .comm import Communicator
from .errors import (BootstrapError, CorruptMessage, JoinRefused, PeerFailure, RuntimeFailure,
                     RuntimeInputError)
from .plans import ALGOS, OPS, plan_json, shard_bounds

__all__ = ["Communicator", "RuntimeFailure", "PeerFailure", "CorruptMessage", "JoinRefused", "BootstrapError",
           "RuntimeInputError", "plan_json", "shard_bounds", "OPS", "ALGOS"]
