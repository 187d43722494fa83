"""The communicator: one rank of a job, collectives in place on numpy arrays."""

from __future__ import annotations

import os

import numpy as np

from .autochunk import AutoChunk, ChunkTuner
from .errors import RuntimeInputError, translate
from .plans import DEFAULT_CHUNK_BYTES, plan_json
from .telemetry import Telemetry

# numpy dtype name -> the runtime's element type
DTYPES = {"float32": "float32", "float64": "float64", "int32": "int32", "int64": "int64", "float16": "float16"}
# Element types of raw buffers (numpy has no bfloat16; torch has)
BUFFER_DTYPES = (*DTYPES.values(), "bfloat16")


def _env_int(name: str, env, lo: int, hi: int) -> int:
    v = env.get(name)
    if v is None or v == "":
        raise RuntimeInputError(f"{name}: not set (set it, or use `fabriclab launch`, or pass it explicitly)")
    try:
        x = int(v)
    except ValueError:
        raise RuntimeInputError(f"{name}: must be an integer, got {v!r}") from None
    if not lo <= x <= hi:
        raise RuntimeInputError(f"{name}: must be within {lo}..{hi}, got {x}")
    return x


def _env_chunk(v: str):
    from ..collectives.algos import PlanningError
    from ..collectives.metrics import parse_size

    word = v.strip().lower()
    if word in ("auto", "none"):
        return "auto" if word == "auto" else None
    try:
        x = parse_size(v, "FABRICLAB_CHUNK_BYTES")
    except PlanningError:
        x = 0
    if x < 1:
        raise RuntimeInputError(f"FABRICLAB_CHUNK_BYTES: must be a size in bytes (e.g. 262144, 256K, 1M), \"none\" or \"auto\", got {v!r}")
    return x


class Communicator:
    """One rank's connections to every other rank of a job.

    ``Communicator(rank, world_size, master_addr, master_port, token)`` joins
    explicitly; :meth:`from_env` reads torchrun's variables (RANK,
    WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and FABRICLAB_TOKEN. Every rank must
    call the same collectives in the same order (as with NCCL or MPI).

    ``chunk_bytes`` is the pipelining chunk: bytes, None (no chunking), or
    ``"auto"`` (or an :class:`~fabriclab.runtime.autochunk.AutoChunk`): tuned
    by MIAD per collective, algorithm and size bucket during repeated calls,
    every rank using the same chunk; ``comm.tuning`` shows the state.

    ``packet_rocket_threshold_us`` turns Packet Rocket on (On-Ramp's edge
    pause, per connection and per chunk): a connection's next message is held
    while the echoed one-way delay exceeds the path's base by more than this
    many microseconds; None (the default) is off. :meth:`rocket_stats` gives
    its counters. docs/clockwork-control.md, "Packet Rocket in the runtime".
    ``packet_rocket_clock`` is the clock its stamps and echoes read, as the
    simulator's: ``"ideal"`` (CLOCK_REALTIME as it is), ``"host"`` (with this
    rank's emulated error: ``clock_offset_ns``, ``clock_drift_ppm`` from
    ``clock_epoch_ns``, default the table's ``clock_epoch_ns``, else now; as the clock agent's ``--offset-ns``,
    ``--drift-ppm``, ``--epoch-ns``) or ``"estimated"`` (the host's reading
    less the correction table in the JSON file ``packet_rocket_correction``);
    None: ``"estimated"`` with a table, else ``"host"``. With
    ``packet_rocket_correction_reload_ms`` the table's file is re-read when it
    changes (a live refit replacing it), checked at most that often.

    ``group`` names the communicator group this communicator is (e.g. "tp0",
    "dp3", "ep1"): its telemetry rows carry it (ccl.parquet's ``group``
    column); None: no group (the job's world)."""

    def __init__(self, rank: int, world_size: int, master_addr: str, master_port: int, token: str, *,
                 bind_addr: str | None = None, streams: int = 1, timeout_s: float = 5.0,
                 connect_timeout_s: float = 60.0, checksum: bool = False, telemetry: bool = False,
                 chunk_bytes: int | str | AutoChunk | None = DEFAULT_CHUNK_BYTES, late_timeout_s: float = 600.0,
                 packet_rocket_threshold_us: float | None = None, packet_rocket_clock: str | None = None,
                 clock_offset_ns: int = 0, clock_drift_ppm: float = 0.0, clock_epoch_ns: int | None = None,
                 packet_rocket_correction: str | os.PathLike | None = None,
                 packet_rocket_correction_reload_ms: float | None = None, group: str | None = None, _fault=None):
        from .._core import RtCommunicator, RtError

        for name, v, lo, hi in (("rank", rank, 0, world_size - 1), ("world_size", world_size, 1, 1 << 20),
                                ("master_port", master_port, 1, 65535), ("streams", streams, 1, 64)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
                raise RuntimeInputError(f"{name}: must be an integer within {lo}..{hi}, got {v!r}")
        if not token:
            raise RuntimeInputError("token: the join token must be a non-empty string")
        t = packet_rocket_threshold_us
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating))
                              or not 0 <= t < 1e9):
            raise RuntimeInputError(f"packet_rocket_threshold_us: must be a number of microseconds >= 0 "
                                    f"(or None: off), got {t!r}")
        for name, v in (("clock_offset_ns", clock_offset_ns), ("clock_epoch_ns", clock_epoch_ns)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not -2**62 <= v <= 2**62):
                raise RuntimeInputError(f"{name}: must be an integer number of ns within ±2^62, got {v!r}")
        if isinstance(clock_drift_ppm, bool) or not isinstance(clock_drift_ppm, (int, float, np.integer, np.floating)):
            raise RuntimeInputError(f"clock_drift_ppm: must be a number of ppm, got {clock_drift_ppm!r}")
        r = packet_rocket_correction_reload_ms
        if r is not None and (isinstance(r, bool) or not isinstance(r, (int, float, np.integer, np.floating))):
            raise RuntimeInputError(f"packet_rocket_correction_reload_ms: must be a number of milliseconds, got {r!r}")
        if packet_rocket_clock is not None and not isinstance(packet_rocket_clock, str):
            raise RuntimeInputError(f"packet_rocket_clock: must be ideal, host or estimated, got {packet_rocket_clock!r}")
        if group is not None and (not isinstance(group, str) or not 1 <= len(group) <= 64):
            raise RuntimeInputError(f"group: must be a name of 1 to 64 characters (e.g. \"tp0\") or None, got {group!r}")
        self.group = group
        self.rank, self.world_size, self.chunk_bytes = int(rank), int(world_size), chunk_bytes
        self._tuner = None
        if isinstance(chunk_bytes, AutoChunk) or (isinstance(chunk_bytes, str) and chunk_bytes == "auto"):
            settings = chunk_bytes if isinstance(chunk_bytes, AutoChunk) else AutoChunk()
            self._tuner = ChunkTuner(settings, self.rank, self.world_size)
        elif chunk_bytes is not None and (isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, (int, np.integer))):
            raise RuntimeInputError(f"chunk_bytes: must be a number of bytes, None (no chunking) or \"auto\", got {chunk_bytes!r}")
        self.telemetry = Telemetry() if telemetry else None
        self.measurements, self._probe_model = None, "nic"  # set by probe(); algo="trees" plans on it
        self._probe_plans: dict = {}
        try:
            self._c = RtCommunicator(int(rank), int(world_size), str(master_addr), int(master_port), str(token),
                                     bind_addr, int(streams), float(timeout_s), float(connect_timeout_s),
                                     bool(checksum), bool(telemetry), _fault, float(late_timeout_s),
                                     None if t is None else float(t), packet_rocket_clock, int(clock_offset_ns),
                                     float(clock_drift_ppm), None if clock_epoch_ns is None else int(clock_epoch_ns),
                                     None if packet_rocket_correction is None else os.fspath(packet_rocket_correction),
                                     None if r is None else float(r))
        except RtError as e:
            raise translate(e) from None

    @classmethod
    def from_env(cls, env=None, **kwargs) -> "Communicator":
        """Joins with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (or FABRICLAB_PORT) and
        FABRICLAB_TOKEN; FABRICLAB_TIMEOUT_S, FABRICLAB_LATE_TIMEOUT_S, FABRICLAB_STREAMS, FABRICLAB_CHECKSUM=1,
        FABRICLAB_BIND_ADDR, FABRICLAB_CHUNK_BYTES (a size such as 256K, "none" or "auto") and
        FABRICLAB_PACKET_ROCKET_US (Packet Rocket's threshold in microseconds), and its clock's
        FABRICLAB_PACKET_ROCKET_CLOCK, FABRICLAB_CLOCK_OFFSET_NS, FABRICLAB_CLOCK_DRIFT_PPM,
        FABRICLAB_CLOCK_EPOCH_NS, FABRICLAB_PACKET_ROCKET_CORRECTION (a table file) and
        FABRICLAB_PACKET_ROCKET_CORRECTION_RELOAD_MS are optional. Keyword arguments override the optional ones."""
        env = os.environ if env is None else env
        n = _env_int("WORLD_SIZE", env, 1, 1 << 20)
        rank = _env_int("RANK", env, 0, n - 1)
        # FABRICLAB_PORT, when set, replaces MASTER_PORT: torch.distributed's own
        # store listens on MASTER_PORT when both run in one job (fabriclab.torch).
        port = _env_int("FABRICLAB_PORT" if env.get("FABRICLAB_PORT") else "MASTER_PORT", env, 1, 65535)
        addr = env.get("MASTER_ADDR") or None
        if addr is None:
            raise RuntimeInputError("MASTER_ADDR: not set (the address rank 0 listens at)")
        token = env.get("FABRICLAB_TOKEN") or None
        if token is None:
            raise RuntimeInputError("FABRICLAB_TOKEN: not set (the job's join token; `fabriclab launch` sets one)")
        opts = {}
        if env.get("FABRICLAB_TIMEOUT_S"):
            try:
                opts["timeout_s"] = float(env["FABRICLAB_TIMEOUT_S"])
            except ValueError:
                raise RuntimeInputError(f"FABRICLAB_TIMEOUT_S: must be a number of seconds, got {env['FABRICLAB_TIMEOUT_S']!r}") from None
        if env.get("FABRICLAB_LATE_TIMEOUT_S"):
            try:
                opts["late_timeout_s"] = float(env["FABRICLAB_LATE_TIMEOUT_S"])
            except ValueError:
                raise RuntimeInputError(f"FABRICLAB_LATE_TIMEOUT_S: must be a number of seconds, got {env['FABRICLAB_LATE_TIMEOUT_S']!r}") from None
        if env.get("FABRICLAB_STREAMS"):
            opts["streams"] = _env_int("FABRICLAB_STREAMS", env, 1, 64)
        if env.get("FABRICLAB_CHECKSUM"):
            opts["checksum"] = env["FABRICLAB_CHECKSUM"] not in ("0", "false", "no")
        if env.get("FABRICLAB_BIND_ADDR"):
            opts["bind_addr"] = env["FABRICLAB_BIND_ADDR"]
        if env.get("FABRICLAB_CHUNK_BYTES"):
            opts["chunk_bytes"] = _env_chunk(env["FABRICLAB_CHUNK_BYTES"])
        if env.get("FABRICLAB_PACKET_ROCKET_US"):
            try:
                opts["packet_rocket_threshold_us"] = float(env["FABRICLAB_PACKET_ROCKET_US"])
            except ValueError:
                raise RuntimeInputError("FABRICLAB_PACKET_ROCKET_US: must be a number of microseconds, "
                                        f"got {env['FABRICLAB_PACKET_ROCKET_US']!r}") from None
        # Packet Rocket's clock (the constructor's docstring)
        if env.get("FABRICLAB_PACKET_ROCKET_CLOCK"):
            opts["packet_rocket_clock"] = env["FABRICLAB_PACKET_ROCKET_CLOCK"]
        if env.get("FABRICLAB_PACKET_ROCKET_CORRECTION"):
            opts["packet_rocket_correction"] = env["FABRICLAB_PACKET_ROCKET_CORRECTION"]
        for var, key, kind, what in (("FABRICLAB_CLOCK_OFFSET_NS", "clock_offset_ns", int, "an integer number of ns"),
                                     ("FABRICLAB_CLOCK_DRIFT_PPM", "clock_drift_ppm", float, "a number of ppm"),
                                     ("FABRICLAB_CLOCK_EPOCH_NS", "clock_epoch_ns", int, "an integer number of ns"),
                                     ("FABRICLAB_PACKET_ROCKET_CORRECTION_RELOAD_MS",
                                      "packet_rocket_correction_reload_ms", float, "a number of milliseconds")):
            if env.get(var):
                try:
                    opts[key] = kind(env[var])
                except ValueError:
                    raise RuntimeInputError(f"{var}: must be {what}, got {env[var]!r}") from None
        opts.update(kwargs)
        return cls(rank, n, addr, port, token, **opts)

    # ------------------------------------------------------------ running
    def _check_array(self, array) -> str:
        if not isinstance(array, np.ndarray):
            raise RuntimeInputError(f"array: must be a numpy array, got {type(array).__name__}")
        if array.dtype.name not in DTYPES:
            raise RuntimeInputError(f"array: dtype {array.dtype.name} is not supported (supported: {', '.join(DTYPES)})")
        if not array.flags.c_contiguous or not array.flags.writeable:
            raise RuntimeInputError("array: must be C-contiguous and writable (the collective runs in place)")
        if array.size < 1:
            raise RuntimeInputError("array: must hold at least one element")
        return DTYPES[array.dtype.name]

    def run_plan(self, plan_text: str, array: np.ndarray) -> int:
        """Runs this rank's part of a plan-format-v1 document in place on ``array``
        (whose byte size must be the plan's size_bytes). Returns the op id."""
        return self.run_plan_buffer(plan_text, array.ctypes.data, array.nbytes, self._check_array(array))

    def run_plan_buffer(self, plan_text: str, address: int, nbytes: int, dtype: str) -> int:
        """Like :meth:`run_plan` on raw memory: ``nbytes`` writable, contiguous bytes at
        ``address`` holding elements of ``dtype`` (float32, float64, int32, int64,
        float16 or bfloat16). The caller keeps the memory alive during the call;
        this is how tensors of other libraries (``fabriclab.torch``) are reduced
        without a copy."""
        from .._core import RtError

        if dtype not in BUFFER_DTYPES:
            raise RuntimeInputError(f"dtype: {dtype} is not supported (supported: {', '.join(BUFFER_DTYPES)})")
        try:
            op_id = self._c.run(plan_text, int(address), int(nbytes), dtype)
        except RtError as e:
            raise translate(e) from None
        if self.telemetry is not None:
            self.telemetry.add(self._c.take_telemetry(), plan_text, dtype, self.group)
        return op_id

    def collective(self, op: str, array: np.ndarray, algo: str = "ring", root: int = 0,
                   out: np.ndarray | None = None) -> np.ndarray:
        """Runs ``op`` with ``algo`` on ``array`` in place, or with ``out`` out of place:
        ``array`` is copied into ``out`` (same dtype and size) and the collective runs
        there, leaving ``array`` as it was (Open MPI does the same for a separate
        receive buffer). Returns the array holding the result. ``algo="trees"``
        plans with TreeGen on this communicator's :meth:`probe` measurements."""
        self._check_array(array)
        if out is not None and out is not array:
            self._check_array(out)
            if out.dtype != array.dtype or out.size != array.size:
                raise RuntimeInputError(f"out: must have the input's dtype and size ({array.dtype}, {array.size} "
                                        f"elements), got {out.dtype}, {out.size}")
            if np.shares_memory(out, array):
                raise RuntimeInputError("out: overlaps the input array (pass out=None to run in place)")
            np.copyto(out, array)
            array = out
        key, chunk = (None, self.chunk_bytes) if self._tuner is None else self._tuner.chunk_for(op, algo, array.nbytes)
        text = self.plan(op, algo, array.size, array.itemsize, root, chunk)
        if key is None:
            self.run_plan(text, array)
        else:
            self._tuner.timed(key, array.nbytes, lambda: self.run_plan(text, array), self._sum_small)
        return array

    def plan(self, op: str, algo: str, count: int, itemsize: int, root: int = 0, chunk=DEFAULT_CHUNK_BYTES) -> str:
        """The plan-format-v1 JSON this communicator runs for ``op`` with ``algo`` over
        ``count`` elements of ``itemsize`` bytes (``trees``: on the probe's measurements)."""
        if algo != "trees":
            return plan_json(op, algo, self.world_size, count, itemsize, root, chunk)
        if self.measurements is None:
            raise RuntimeInputError("algo: trees plans on measured links: call probe() first (on every rank)")
        key = (op, count, itemsize, root, chunk)
        text = self._probe_plans.get(key)
        if text is None:
            from .probe import plan_from_probe

            text = plan_from_probe(self.measurements, op, count, itemsize, root, chunk, self._probe_model)[0]
            self._probe_plans[key] = text
            if len(self._probe_plans) > 64:
                self._probe_plans.pop(next(iter(self._probe_plans)))
        return text

    def probe(self, nbytes: int = 4 << 20, pings: int = 10, model: str = "nic", repeats: int = 3):
        """Blink's start-up probe (a collective: every rank calls it): measures every
        ordered pair's bandwidth (the fastest of ``repeats`` transfers) and latency over
        this communicator's connections;
        afterwards ``algo="trees"`` plans broadcast, reduce and allreduce with TreeGen
        on the measured graph (``model`` "nic" or "pairs", docs/runtime.md). Returns the
        :class:`~fabriclab.runtime.probe.Measurements`."""
        from .probe import MODELS, measure

        if model not in MODELS:
            raise RuntimeInputError(f"model: must be one of {', '.join(MODELS)}, got {model!r}")
        self.measurements, self._probe_model = measure(self, nbytes, pings, repeats), model
        self._probe_plans.clear()
        return self.measurements

    def _sum_small(self, vec: np.ndarray) -> None:
        """A sum-allreduce with the fixed default chunk: the tuner's sync, never tuned itself."""
        self.run_plan(plan_json("allreduce", "ring", self.world_size, vec.size, vec.itemsize), vec)

    def reset_tuning(self) -> None:
        """Forgets every tuned chunk (``chunk_bytes="auto"``): the next calls search again from
        the initial chunk. Every rank must call it at the same point of its sequence of collectives."""
        if self._tuner is None:
            raise RuntimeInputError("chunk_bytes: reset_tuning needs chunk_bytes=\"auto\" (this communicator's chunk is fixed)")
        self._tuner = ChunkTuner(self._tuner.settings, self.rank, self.world_size)

    @property
    def tuning(self) -> dict | None:
        """``chunk_bytes="auto"``: per tuned key, the chunk, converged or not, the decisions
        and the chunk changes (``ChunkTuner.state``); None with a fixed chunk."""
        return None if self._tuner is None else self._tuner.state()

    def allreduce(self, array, algo: str = "ring", out=None):
        """Every rank's ``array`` (or ``out``) becomes the elementwise sum over ranks."""
        return self.collective("allreduce", array, algo, out=out)

    def broadcast(self, array, root: int = 0, algo: str = "ring", out=None):
        """Every rank's ``array`` (or ``out``) becomes the root's."""
        return self.collective("broadcast", array, algo, root, out)

    def reduce(self, array, root: int = 0, algo: str = "ring", out=None):
        """The root's ``array`` (or ``out``) becomes the sum; other ranks' hold partial sums afterwards."""
        return self.collective("reduce", array, algo, root, out)

    def allgather(self, array, algo: str = "ring", out=None):
        """Rank i contributes shard i of ``array`` (see ``plans.shard_bounds``); every rank gets all shards."""
        return self.collective("allgather", array, algo, out=out)

    def reduce_scatter(self, array, algo: str = "ring", out=None):
        """Rank i's shard i of ``array`` (or ``out``) becomes the sum of every rank's shard i."""
        return self.collective("reduce_scatter", array, algo, out=out)

    def alltoall(self, array, algo: str = "direct", out=None):
        """Every rank's ``array`` (or ``out``) is ``world_size`` equal blocks; block j of
        rank i becomes block i of rank j (the blocks' transpose, as numpy's
        ``x.reshape(n, n, -1).transpose(1, 0, 2)`` over the ranks' stacked arrays).
        ``array.size`` must be a multiple of ``world_size``."""
        return self.collective("alltoall", array, algo, out=out)

    def barrier(self) -> None:
        """Every rank has reached this point (a one-element allreduce)."""
        self.allreduce(np.zeros(1, np.int32))

    def write_telemetry(self, path) -> None:
        """Writes the telemetry gathered so far as Parquet (docs/telemetry.md) and clears it."""
        if self.telemetry is None:
            raise RuntimeInputError("telemetry: the communicator was created with telemetry=False")
        self.telemetry.write(path)

    def rocket_stats(self) -> dict | None:
        """Packet Rocket's counters over this rank's connections since it joined
        (echoes, pauses, paused_ns: the pauses' total, held_ns: the time messages
        waited for one), or None when it is off (docs/clockwork-control.md)."""
        return self._c.rocket_stats()

    def close(self) -> None:
        self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
