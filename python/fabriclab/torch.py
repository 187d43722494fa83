"""fabriclab.torch: PyTorch DDP's gradient allreduce through fabriclab's runtime.

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    import fabriclab.torch as fl

    dist.init_process_group("gloo")          # DDP still needs a process group
    model = DDP(net)
    hook = fl.register(model, algo="ring")   # gradients now go through fabriclab
    ...
    hook.close()

DDP hands each gradient bucket (one flat tensor) to the hook as soon as it is
ready; the hook queues it on one worker thread, which runs the allreduce plan
for that bucket's size in place on the bucket's memory (no copy for CPU
tensors; GPU buckets are staged through host memory) and divides by the
world size, as DDP's own allreduce does. Backward goes on meanwhile: the
runtime releases the GIL. DDP launches buckets in index order on every
rank, and one worker keeps that order, so every rank runs the same
collectives in the same order, as the runtime requires.

The plan is chosen by ``algo``: a name of :data:`fabriclab.runtime.ALGOS`,
``"trees"`` (Blink's TreeGen on the communicator's :meth:`probe`), or
any callable ``(count, itemsize, world_size) -> plan JSON`` (a plan-format-v1
text over ``count * itemsize`` bytes whose ranges are whole elements), e.g.
Blink trees planned from a probe (docs/runtime.md). Plans are cached per
bucket size. ``compress="bfloat16"`` or ``"float16"`` casts float32 buckets
down for the wire, divided by the world size first, and back (like torch's
``bf16_compress_hook``). CUDA buckets are staged through host memory after
an event recorded on the autograd thread's stream; this path is not tested
here (no GPU in the lab).

The communicator joins with torchrun's variables like any other
(:meth:`Communicator.from_env`), on ``FABRICLAB_PORT`` if set, otherwise
``MASTER_PORT + 1``: torch.distributed's own store listens on MASTER_PORT.
Needs the ``torch`` extra: ``pip install 'fabriclab[torch]'``.
"""

import os
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

try:
    import torch
    import torch.distributed as dist
except ModuleNotFoundError as e:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError("fabriclab.torch needs PyTorch: pip install 'fabriclab[torch]'", name=e.name) from None

from .runtime.comm import Communicator
from .runtime.errors import RuntimeInputError
from .runtime.plans import ALGOS, DEFAULT_CHUNK_BYTES

__all__ = ["FabriclabHook", "register", "communicator_from_env"]

_DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
           torch.bfloat16: "bfloat16", torch.int32: "int32", torch.int64: "int64"}
_COMPRESS = {"float16": torch.float16, "bfloat16": torch.bfloat16}
_PLAN_CACHE = 64

Planner = Callable[[int, int, int], str]


def communicator_from_env(**kwargs) -> Communicator:
    """A communicator for a job that also runs torch.distributed: torchrun's variables,
    FABRICLAB_TOKEN, and FABRICLAB_PORT or else MASTER_PORT + 1."""
    env = dict(os.environ)
    if not env.get("FABRICLAB_PORT") and env.get("MASTER_PORT", "").isdigit():
        port = int(env["MASTER_PORT"]) + 1
        if port > 65535:
            raise RuntimeInputError("FABRICLAB_PORT: MASTER_PORT is 65535, so MASTER_PORT + 1 is no port; set FABRICLAB_PORT")
        env["FABRICLAB_PORT"] = str(port)
    return Communicator.from_env(env, **kwargs)


class FabriclabHook:
    """The state of the communication hook: the communicator, the plan choice and
    the worker thread. Callable as DDP's hook (``register_comm_hook(state, hook)``
    is done by :func:`register`)."""

    def __init__(self, comm: Communicator, algo: str | Planner = "ring", *, average: bool = True,
                 compress: str | None = None, chunk_bytes: int | None = DEFAULT_CHUNK_BYTES):
        if not isinstance(comm, Communicator):
            raise RuntimeInputError(f"comm: must be a fabriclab.runtime.Communicator, got {type(comm).__name__}")
        if not callable(algo) and algo not in (*ALGOS, "trees"):
            raise RuntimeInputError(f"algo: must be one of {', '.join(ALGOS)}, trees (after comm.probe()) or a "
                                    f"callable (count, itemsize, world_size) -> plan JSON; got {algo!r}")
        if compress is not None and compress not in _COMPRESS:
            raise RuntimeInputError(f"compress: must be one of {', '.join(_COMPRESS)} or None, got {compress!r}")
        self.comm, self.algo, self.average, self.compress = comm, algo, bool(average), compress
        self.chunk_bytes = chunk_bytes
        self.buckets = 0        # allreduces run
        self.bytes = 0          # bytes reduced (on the wire's element type)
        self._plans: "OrderedDict[tuple[int, int], str]" = OrderedDict()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fabriclab-ddp")
        self._lock = threading.Lock()

    # ------------------------------------------------------------ plans
    def plan_for(self, count: int, itemsize: int) -> str:
        key = (count, itemsize)
        text = self._plans.get(key)
        if text is None:
            n = self.comm.world_size
            if callable(self.algo):
                text = self.algo(count, itemsize, n)
                if not isinstance(text, str):
                    raise RuntimeInputError(f"algo: the planner must return plan JSON text, got {type(text).__name__}")
            else:
                text = self.comm.plan("allreduce", self.algo, count, itemsize, 0, self.chunk_bytes)
            self._plans[key] = text
            if len(self._plans) > _PLAN_CACHE:
                self._plans.popitem(last=False)
        return text

    # ------------------------------------------------------------ reducing
    def allreduce_(self, tensor: torch.Tensor, ready=None) -> torch.Tensor:
        """Sums ``tensor`` over ranks in place (averages when ``average``) and returns it.
        Runs on the calling thread; every rank must call it in the same order. ``ready``:
        a CUDA event recorded where the tensor was produced, waited for before staging."""
        if tensor.dtype not in _DTYPES:
            raise RuntimeInputError(f"tensor: dtype {tensor.dtype} is not supported "
                                    f"(supported: {', '.join(str(d) for d in _DTYPES)})")
        if self.average and not tensor.is_floating_point():
            raise RuntimeInputError(f"tensor: average=True needs a floating-point tensor, got {tensor.dtype}")
        if ready is not None:
            ready.synchronize()
        n = self.comm.world_size
        wire, divided = tensor, False
        if self.compress is not None and tensor.dtype == torch.float32:
            # Divide before summing, as torch's compression hooks do: a sum of
            # n large gradients could overflow float16 where their mean does not.
            wire = tensor.to(_COMPRESS[self.compress])
            if self.average:
                wire.div_(n)
                divided = True
        host = wire if wire.device.type == "cpu" else wire.cpu()
        host = host.contiguous()
        if host.numel() > 0:
            with self._lock:
                text = self.plan_for(host.numel(), host.element_size())
                self.comm.run_plan_buffer(text, host.data_ptr(), host.numel() * host.element_size(),
                                          _DTYPES[host.dtype])
                self.buckets += 1
                self.bytes += host.numel() * host.element_size()
        if host.data_ptr() != tensor.data_ptr():
            tensor.copy_(host)
        if self.average and not divided:
            tensor.div_(n)
        if tensor.is_cuda:  # the device copy is done before DDP reads the bucket, whatever its stream
            torch.cuda.current_stream(tensor.device).synchronize()
        return tensor

    def __call__(self, state, bucket) -> torch.futures.Future:
        """DDP's hook signature: (state, GradBucket) -> Future[Tensor]."""
        fut: torch.futures.Future = torch.futures.Future()
        tensor = bucket.buffer()
        ready = None
        if tensor.is_cuda:  # the gradients are ready on the autograd thread's stream, not yet on the worker's
            ready = torch.cuda.Event()
            ready.record()

        def work():
            try:
                fut.set_result(self.allreduce_(tensor, ready))
            except BaseException as e:  # handed to DDP, which raises it in backward
                fut.set_exception(e)

        self._worker.submit(work)
        return fut

    def close(self, close_comm: bool = True) -> None:
        """Waits for queued allreduces, stops the worker and (by default) closes the communicator."""
        self._worker.shutdown(wait=True)
        if close_comm:
            self.comm.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _hook(state: FabriclabHook, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    return state(state, bucket)


def register(model, comm: Communicator | None = None, algo: str | Planner = "ring", **kwargs) -> FabriclabHook:
    """Routes ``model``'s (a DistributedDataParallel) gradient allreduce through fabriclab.
    ``comm`` defaults to :func:`communicator_from_env`; the other keywords go to
    :class:`FabriclabHook`. Returns the hook's state (close it when done)."""
    if not isinstance(model, torch.nn.parallel.DistributedDataParallel):
        raise RuntimeInputError(f"model: must be a torch.nn.parallel.DistributedDataParallel, got {type(model).__name__}")
    if not dist.is_initialized():
        raise RuntimeInputError("torch.distributed: init_process_group must run first (DDP needs it to build the model)")
    made = comm is None
    comm = communicator_from_env() if made else comm
    try:
        state = FabriclabHook(comm, algo, **kwargs)
        if comm.world_size != dist.get_world_size():
            raise RuntimeInputError(f"comm: has {comm.world_size} ranks but torch.distributed has {dist.get_world_size()}")
        if comm.rank != dist.get_rank():
            raise RuntimeInputError(f"comm: is rank {comm.rank} but torch.distributed's rank is {dist.get_rank()}")
        model.register_comm_hook(state, _hook)
    except BaseException:
        if made:
            comm.close()
        raise
    return state
