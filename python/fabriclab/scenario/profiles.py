"""Model profiles for training jobs: per layer, parameter bytes and forward
and backward compute times.

- ``resnet50``: the real per-layer parameter counts of ResNet-50 (He et al.,
  CVPR 2016; torchvision's layout), derived from the architecture: every
  convolution (weights, no bias) followed by batch norm (2 per channel), the
  final fully connected layer with bias. Total 25,557,032 parameters, the
  published count.
- ``thesis-resnet50``: the ETH thesis's simulator profile (ch. 4, Table 4.1;
  ch. 5, Table 5.1): ``layers`` layers whose sizes follow ResNet-50's
  distribution (heavy tail in the last layers), scaled to ``model_bytes``;
  compute times in arithmetic progression, forward decreasing and backward
  increasing with the layer index, forward : backward = 1 : 2, summing to
  ``compute_ps``. The thesis gives no slope; the first forward layer is taken
  to cost three times the last (``slope_ratio``).
- ``alexnet``, ``vgg16``, ``resnet152``, ``inception_v3``, ``googlenet``:
  the parameter counts the PANAMA evaluation uses (seed README), spread over
  ``layers`` equal layers. PANAMA measured their compute times on P100 GPUs
  but its text gives no numbers; without ``compute_ps`` these five and
  ``resnet50`` take a published single-P100 training iteration time
  (``P100_ITERATION``: batch size / images per second, sources below).
- A CSV file with columns ``param_bytes, fwd_ps, bwd_ps`` (one row per layer).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from ..errors import InputError

FLOAT_BYTES = 4

PARAM_COUNTS = {
    "alexnet": 61_100_840,
    "vgg16": 138_357_544,
    "resnet50": 25_557_032,
    "resnet152": 60_192_808,
    "inception_v3": 23_834_568,
    "googlenet": 6_624_904,
}
BUILTIN = ("thesis-resnet50",) + tuple(PARAM_COUNTS)

_TF_P100 = ("TensorFlow benchmarks (tensorflow.org/performance/benchmarks, May 2017): NVIDIA DGX-1, "
            "1 Tesla P100, synthetic ImageNet, TensorFlow, SGD")
_DELL_P100 = ("Dell EMC HPC Innovation Lab, 'Deep Learning Performance with P100 GPUs' (R. Xu, "
              "N. Dandapanthu, Oct 2016): NV-Caffe, 1 Tesla P100 (PCIe), ILSVRC12")
# Published single-GPU training throughput on a Tesla P100 (PANAMA's GPU):
# (batch size per GPU, images per second, source). One iteration's forward
# and backward compute = batch / throughput.
P100_THROUGHPUT = {
    "alexnet": (512, 2987.0, _TF_P100),
    "vgg16": (64, 154.0, _TF_P100),
    "resnet50": (64, 219.0, _TF_P100),
    "resnet152": (64, 91.8, _TF_P100),
    "inception_v3": (64, 142.0, _TF_P100),
    "googlenet": (128, 468.0, _DELL_P100),
}


def p100_iteration_ps(name: str) -> int | None:
    """Forward + backward compute of one iteration on one P100 (published
    throughput, ``P100_THROUGHPUT``), or None for models without one."""
    if name not in P100_THROUGHPUT:
        return None
    batch, images_per_s, _ = P100_THROUGHPUT[name]
    return round(batch / images_per_s * 1e12)


class ProfileError(InputError):
    pass


def resnet50_layer_params() -> list[int]:
    """Parameters of each ResNet-50 layer in forward order: conv1, then the
    16 bottleneck blocks' three convolutions (plus each stage's projection
    shortcut after its first block's convolutions), then fc."""
    def conv(cin, cout, k):
        return cin * cout * k * k + 2 * cout  # weights + batch norm (gamma, beta)

    layers = [conv(3, 64, 7)]
    cin = 64
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        for b in range(blocks):
            out = width * 4
            layers += [conv(cin, width, 1), conv(width, width, 3), conv(width, out, 1)]
            if b == 0:
                layers.append(conv(cin, out, 1))  # projection shortcut
            cin = out
    layers.append(2048 * 1000 + 1000)  # fc weights + bias
    return layers


def _arith(total: int, n: int, ratio: float, increasing: bool) -> list[int]:
    """n positive terms in arithmetic progression summing to ``total``, the
    largest ``ratio`` times the smallest."""
    if n == 1:
        return [total]
    lo = 2 * total / (n * (1 + ratio))
    hi = lo * ratio
    step = (hi - lo) / (n - 1)
    vals = [lo + step * i for i in range(n)]
    if not increasing:
        vals.reverse()
    out = [round(v) for v in vals]
    out[-1 if increasing else 0] += total - sum(out)
    return out


def _resample(weights: list[int], n: int) -> list[float]:
    """Splits the cumulative distribution of ``weights`` into n equal-width
    index buckets (n layers following the same size distribution)."""
    m = len(weights)
    out = []
    for i in range(n):
        a, b = i * m / n, (i + 1) * m / n
        s = 0.0
        # Only the weights whose unit interval [j, j + 1) overlaps [a, b): O(n + m), not O(n m).
        for j in range(max(int(a), 0), min(math.ceil(b), m)):
            lo, hi = max(a, j), min(b, j + 1)
            if hi > lo:
                s += weights[j] * (hi - lo)
        out.append(s)
    return out


def _scale(weights, total_bytes: int) -> list[int]:
    t = sum(weights)
    out = [max(1, round(w * total_bytes / t)) for w in weights]
    out[-1] += total_bytes - sum(out)
    return out


def builtin_size(name: str, layers: int | None = None, model_bytes: int | None = None) -> tuple[int, int]:
    """A built-in profile's layer count and gradient bytes, without building it:
    resnet50's real 54 layers, 100 for the thesis profile, 50 for the others
    unless ``layers`` is given; 4 bytes per parameter unless ``model_bytes`` is."""
    model = "resnet50" if name == "thesis-resnet50" else name
    n = layers or (len(resnet50_layer_params()) if name == "resnet50" else 100 if name == "thesis-resnet50" else 50)
    return n, model_bytes or PARAM_COUNTS[model] * FLOAT_BYTES


def build_profile(name: str, compute_ps: int | None = None, model_bytes: int | None = None, layers: int | None = None,
                  slope_ratio: float = 3.0, base_dir: Path | None = None) -> list[dict]:
    """Layers as dicts ``{param_bytes, fwd_ps, bwd_ps}``."""
    if name not in BUILTIN:
        p = Path(name)
        if not p.is_absolute() and base_dir is not None:
            p = base_dir / p
        if not p.exists():
            raise ProfileError(f"profile: {name!r} is neither a built-in ({', '.join(BUILTIN)}) nor a CSV file")
        from ..util.inputs import read_text

        try:
            text = read_text(p, "profile", "profile CSV file")
        except InputError as e:
            raise ProfileError(str(e)) from None
        rows = []
        lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
        for i, r in enumerate(csv.DictReader(lines)):
            if None in r:
                raise ProfileError(f"profile {name}: row {i + 1}: more values than the header has columns")
            try:
                rows.append({k: int(r[k]) for k in ("param_bytes", "fwd_ps", "bwd_ps")})
            except (KeyError, ValueError, TypeError):
                raise ProfileError(f"profile {name}: row {i + 1}: needs integer param_bytes, fwd_ps, bwd_ps") from None
            if rows[-1]["param_bytes"] <= 0 or rows[-1]["fwd_ps"] < 0 or rows[-1]["bwd_ps"] < 0:
                raise ProfileError(f"profile {name}: row {i + 1}: param_bytes must be positive, times not negative")
            if max(rows[-1].values()) >= 2**64:
                raise ProfileError(f"profile {name}: row {i + 1}: values must be below 2**64")
        if not rows:
            raise ProfileError(f"profile {name}: no layers")
        return rows
    if compute_ps is None:
        compute_ps = p100_iteration_ps(name)
    if compute_ps is None or compute_ps <= 0:
        raise ProfileError(f"profile {name}: compute_ps (forward + backward time per iteration) is required")
    n, total = builtin_size(name, layers, model_bytes)
    if name == "resnet50" and layers is None:
        weights = [float(x) for x in resnet50_layer_params()]
    elif name in ("thesis-resnet50", "resnet50"):
        weights = _resample(resnet50_layer_params(), n)
    else:
        weights = [1.0] * n
    if n < 1:
        raise ProfileError("profile: layers must be at least 1")
    sizes = _scale(weights, total)
    fwd_total = round(compute_ps / 3)
    fwd = _arith(fwd_total, n, slope_ratio, increasing=False)
    bwd = _arith(compute_ps - fwd_total, n, slope_ratio, increasing=True)
    if min(fwd) < 0 or min(bwd) < 0:  # rounding n terms of a few picoseconds each
        raise ProfileError(f"layers: {n:,} layers leave {compute_ps / n:.1f} ps of compute each (compute_ps "
                           f"{compute_ps}); give fewer layers or more compute_ps")
    if min(sizes) < 0:  # rounding n sizes of a few bytes each
        raise ProfileError(f"layers: {n:,} layers leave {total / n:.1f} bytes of gradient each (model_bytes "
                           f"{total}); give fewer layers or more model_bytes")
    return [{"param_bytes": s, "fwd_ps": f, "bwd_ps": b} for s, f, b in zip(sizes, fwd, bwd)]
