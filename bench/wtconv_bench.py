#!/usr/bin/env python3
"""WTConv benchmark: winconv's WTConv2d against the original module, the official fused CUDA
module and the 7x7 depthwise conv it replaces, per shape of wtconv_shapes.csv and dtype.

For every (shape, dtype, implementation): forward and training-step (forward + backward)
time in eager mode and replayed from a CUDA graph (CUDA events, median of >= 20 timed runs
after warm-up, input buffers rotated so the working set exceeds 2x the L2; eager steps under 5 ms
the lowest median of --eager-rounds rounds that take the implementations in turn), peak device
memory of a training step above its inputs, relative L2 error of the forward output against
the reference implementation (or the float64 pure-PyTorch implementation when the original
repository is not given), and for winconv the bytes its kernels move and the bandwidth that
achieves. Every number written comes from this run.

Outputs in --out: wtconv.csv (DESIGN.md's format), wtconv_extra.csv (all columns),
wtconv_env.json (GPU, versions, measured copy bandwidth), wtconv_summary.md and wtconv.png
(the last two by plot_wtconv.py).

    python3 bench/wtconv_bench.py --out OUTDIR [--wtconv-repo PATH] [--fused-repo PATH]

--wtconv-repo is a checkout of the original WTConv repository (imports wtconv.wtconv2d, needs
pywt); --fused-repo a checkout holding the fused module of "Fast and memory-efficient wavelet
convolutions via I/O-aware reformulation" (in the same repository, fast_wtconv/wtconv_cuda.py;
it JIT-compiles its kernels with nvcc on first use). --fused-class picks another
`module:Class` on that path.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import nn

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import winconv  # noqa: E402
from winconv import functional  # noqa: E402
from winconv._native_loader import native_module  # noqa: E402

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
IMPLS = ("winconv", "reference", "official_fused", "depthwise7x7")
MAIN_COLUMNS = ["shape", "dtype", "impl", "fwd_ms", "train_ms", "peak_bytes", "rel_err"]
EXTRA_COLUMNS = MAIN_COLUMNS + [
    "graph_fwd_ms", "graph_train_ms", "rel_err_f64", "grad_rel_err_f64",
    "fwd_bytes", "train_bytes", "bytes_model", "fwd_GBps", "train_GBps", "error",
]
DEFAULT_FUSED_CLASS = "fast_wtconv.wtconv_cuda:WTConv2d"


@dataclass
class Shape:
    name: str
    batch: int
    channels: int
    height: int
    width: int
    kernel_size: int
    wt_levels: int
    stride: int = 1  # the output subsamples the stride-1 result: ceil(H / s) x ceil(W / s)

    @property
    def elements(self) -> int:
        return self.batch * self.channels * self.height * self.width

    @property
    def out_dims(self):
        s = self.stride
        return (self.batch, self.channels, -(-self.height // s), -(-self.width // s))


@dataclass
class Result:
    shape: str
    dtype: str
    impl: str
    values: Dict[str, object] = field(default_factory=dict)

    def row(self, columns):
        base = {"shape": self.shape, "dtype": self.dtype, "impl": self.impl}
        base.update(self.values)
        return {c: _fmt(base.get(c, "")) for c in columns}


def _fmt(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.4g}" if abs(value) < 1e-2 and value != 0 else f"{value:.4f}".rstrip("0").rstrip(".")
    return str(value)


# --------------------------------------------------------------------------------------------
# Inputs


def read_shapes(path: Path) -> List[Shape]:
    """Shapes of a CSV with columns name,B,C,H,W,kernel_size,wt_levels and optionally stride
    (empty or absent: 1)."""
    lines = [line for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    shapes = []
    for row in csv.DictReader(lines):
        stride = int(row.get("stride") or 1)
        if stride < 1:
            raise ValueError(f"{path}: shape {row['name']}: stride must be >= 1, got {stride}")
        shapes.append(
            Shape(row["name"], int(row["B"]), int(row["C"]), int(row["H"]), int(row["W"]),
                  int(row["kernel_size"]), int(row["wt_levels"]), stride)
        )
    return shapes


def select_shapes(shapes: List[Shape], only: str) -> List[Shape]:
    """The shapes named in `only` (comma-separated; empty: all), in file order. An unknown name is
    an error: a misspelt --only would otherwise measure nothing."""
    wanted = {name for name in only.split(",") if name}
    if not wanted:
        return shapes
    unknown = sorted(wanted - {s.name for s in shapes})
    if unknown:
        raise ValueError(f"--only names no shape here: {', '.join(unknown)} "
                         f"(shapes: {', '.join(s.name for s in shapes)})")
    return [s for s in shapes if s.name in wanted]


def default_shapes_path() -> Path:
    return REPO_ROOT / "bench" / "wtconv_shapes.csv"


def l2_cache_bytes() -> int:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return int(getattr(props, "L2_cache_size", 0) or 64 * 2**20)


class InputPool:
    """Fresh random inputs, rotated so that consecutive runs never hit in L2."""

    def __init__(self, shape, dtype, l2_bytes: int, budget_bytes: int):
        one = math.prod(shape) * torch.tensor([], dtype=dtype).element_size()
        count = max(2, min(32, math.ceil(2 * l2_bytes / one), budget_bytes // max(one, 1)))
        self.buffers = [torch.randn(shape, device="cuda").to(dtype) for _ in range(count)]
        self.index = 0

    def next(self) -> torch.Tensor:
        tensor = self.buffers[self.index]
        self.index = (self.index + 1) % len(self.buffers)
        return tensor


# --------------------------------------------------------------------------------------------
# Implementations: each is a module taking (B, C, H, W) in the benchmark dtype.


def make_winconv(shape: Shape, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    layer = winconv.WTConv2d(shape.channels, shape.channels, kernel_size=shape.kernel_size,
                             stride=shape.stride, wt_levels=shape.wt_levels)
    with torch.no_grad():  # scales away from their defaults, as after training
        layer.base_scale.weight.add_(0.5 * torch.randn_like(layer.base_scale.weight))
        for scale in layer.level_scales:
            scale.add_(0.2 * torch.randn_like(scale))
    return layer


def import_class(spec: str, path: Optional[str]):
    module_name, _, class_name = spec.partition(":")
    if not class_name:
        raise ValueError(f"expected module:Class, got {spec!r}")
    if path and str(Path(path).resolve()) not in sys.path:
        sys.path.insert(0, str(Path(path).resolve()))
    return getattr(importlib.import_module(module_name), class_name)


# The official fused module compiles every odd kernel size up to $HAAR_MAX_K (7 when unset) and
# refuses larger ones; its build reads the variable when it is first imported.
OFFICIAL_DEFAULT_MAX_K = 7


def official_kernel_ceiling(shapes, environ=os.environ) -> Optional[int]:
    """The HAAR_MAX_K the official fused module needs for `shapes`, or None when its default or the
    user's own setting serves (a user's setting is never overridden)."""
    largest = max((s.kernel_size for s in shapes), default=0)
    if largest <= OFFICIAL_DEFAULT_MAX_K or environ.get("HAAR_MAX_K"):
        return None
    return largest


def official_state_dict(ours: Dict[str, torch.Tensor], target_keys) -> Dict[str, torch.Tensor]:
    """Our (original-layout) state_dict renamed for a module with another layout.

    The official fused module names its parameters base_weight, base_bias, base_scale,
    wt_weights.{l}, wt_scales.{l} (same shapes, same channel order 4c+s).
    """
    if set(target_keys) <= set(ours):
        return {k: ours[k] for k in target_keys}
    renamed = {
        "base_weight": ours["base_conv.weight"],
        "base_scale": ours["base_scale.weight"],
    }
    if "base_conv.bias" in ours:
        renamed["base_bias"] = ours["base_conv.bias"]
    level = 0
    while f"wavelet_convs.{level}.weight" in ours:
        renamed[f"wt_weights.{level}"] = ours[f"wavelet_convs.{level}.weight"]
        renamed[f"wt_scales.{level}"] = ours[f"wavelet_scale.{level}.weight"]
        level += 1
    missing = set(target_keys) - set(renamed)
    if missing:
        raise KeyError(f"cannot map winconv parameters onto keys {sorted(missing)}")
    return {k: renamed[k] for k in target_keys}


def build_impls(args, shape: Shape, dtype: torch.dtype, ours: nn.Module) -> Dict[str, Callable[[], nn.Module]]:
    """Constructors of the requested implementations, all with `ours`'s weights."""
    state = {k: v.detach().clone() for k, v in ours.state_dict().items()}
    c, k, levels, stride = shape.channels, shape.kernel_size, shape.wt_levels, shape.stride
    impls: Dict[str, Callable[[], nn.Module]] = {}
    if "winconv" in args.impls:
        # Activations in the benchmark dtype, parameters in float32 (what the module is for).
        impls["winconv"] = lambda: ours
    if "depthwise7x7" in args.impls:
        impls["depthwise7x7"] = lambda: nn.Conv2d(c, c, 7, stride=stride, padding=3, groups=c).cuda().to(dtype)
    if "reference" in args.impls and args.wtconv_repo:
        def reference():
            cls = import_class("wtconv.wtconv2d:WTConv2d", args.wtconv_repo)
            module = cls(c, c, kernel_size=k, stride=stride, wt_levels=levels)
            module.load_state_dict(state)
            return module.cuda().to(dtype)
        impls["reference"] = reference
    if "official_fused" in args.impls and args.fused_repo:
        def official():
            cls = import_class(args.fused_class, args.fused_repo)
            module = cls(c, c, kernel_size=k, stride=stride, wt_levels=levels, bias=True)
            module.load_state_dict(official_state_dict(state, module.state_dict().keys()))
            return module.cuda().to(dtype)
        impls["official_fused"] = official
    return impls


# --------------------------------------------------------------------------------------------
# Measurement


def median_ms(run: Callable[[], None], prepare: Callable[[], None], iters: int, warmup: int) -> float:
    """Median device time of `run` (CUDA events around it only); `prepare` runs untimed before."""
    for _ in range(warmup):
        prepare()
        run()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for start, end in zip(starts, ends):
        prepare()
        start.record()
        run()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


class Bench:
    """Holds the inputs of one (shape, dtype) and measures one module at a time."""

    def __init__(self, shape: Shape, dtype: torch.dtype, args):
        self.shape, self.dtype, self.args = shape, dtype, args
        dims = (shape.batch, shape.channels, shape.height, shape.width)
        budget = args.pool_budget_gib * 2**30
        self.x_pool = InputPool(dims, dtype, l2_cache_bytes(), budget)
        self.gy_pool = InputPool(shape.out_dims, dtype, l2_cache_bytes(), budget)
        for x in self.x_pool.buffers:
            x.requires_grad_(True)
        self.check_x = self.x_pool.buffers[0]
        self.check_gy = self.gy_pool.buffers[0]

    def _clear_grads(self, module):
        module.zero_grad(set_to_none=True)
        for x in self.x_pool.buffers:
            x.grad = None

    def eager_times(self, module, fwd_too: bool = True, train_too: bool = True):
        """Median forward and training-step times (None for a step not asked for)."""
        current = {}

        def prepare_fwd():
            current["x"] = self.x_pool.next()

        def fwd():
            with torch.no_grad():
                module(current["x"])

        def prepare_train():
            self._clear_grads(module)
            current["x"], current["gy"] = self.x_pool.next(), self.gy_pool.next()

        def train():
            module(current["x"]).backward(current["gy"])

        fwd_ms = median_ms(fwd, prepare_fwd, self.args.iters, self.args.warmup) if fwd_too else None
        train_ms = median_ms(train, prepare_train, self.args.iters, self.args.warmup) if train_too else None
        self._clear_grads(module)
        return fwd_ms, train_ms

    def peak_bytes(self, module) -> int:
        """Peak allocation of one training step above what exists before it (inputs, weights)."""
        self._clear_grads(module)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        module(self.check_x).backward(self.check_gy)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - before
        self._clear_grads(module)
        return peak

    def graph_times(self, module):
        """Forward and training step replayed from CUDA graphs, one graph per pool buffer."""
        pool = torch.cuda.graph_pool_handle()
        n = len(self.x_pool.buffers)
        self._clear_grads(module)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside capture allocates the .grad tensors
            for i in range(2):
                module(self.x_pool.buffers[i % n]).backward(self.gy_pool.buffers[i % n])
        torch.cuda.current_stream().wait_stream(side)
        fwd_graphs, train_graphs = [], []
        for i in range(n):
            g = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(g, pool=pool):
                module(self.x_pool.buffers[i])
            fwd_graphs.append(g)
        for i in range(n):
            # No .grad may exist when a step is captured: the captured backward would then add into
            # it (x.grad += dx, an extra pass over x that the eager step, which starts without
            # gradients, does not make). Captured from None, each graph writes its own gradients.
            self._clear_grads(module)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                module(self.x_pool.buffers[i]).backward(self.gy_pool.buffers[i % len(self.gy_pool.buffers)])
            train_graphs.append(g)
        results = []
        for graphs in (fwd_graphs, train_graphs):
            cursor = {"i": 0}

            def prepare():
                cursor["i"] = (cursor["i"] + 1) % len(graphs)

            results.append(median_ms(lambda: graphs[cursor["i"]].replay(), prepare, self.args.iters, self.args.warmup))
        del fwd_graphs, train_graphs
        self._clear_grads(module)
        return results

    def forward_output(self, module) -> torch.Tensor:
        with torch.no_grad():
            return module(self.check_x.detach()).float()


def float64_reference(ours: nn.Module, x: torch.Tensor, gy: torch.Tensor):
    stride = ours.stride
    params = (
        ours.base_conv.weight.detach().double(),
        ours.base_conv.bias.detach().double(),
        ours.base_scale.weight.detach().double(),
        [w.detach().double() for w in ours.level_weights],
        [s.detach().double() for s in ours.level_scales],
    )
    x64 = x.detach().double()
    y = functional.wtconv2d_forward(x64, *params, stride)
    gx = functional.wtconv2d_backward(gy.double(), x64, *params, stride)[0]
    return y, gx


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    if not torch.isfinite(a).all():
        return float("nan")
    return ((a - b).norm() / b.norm()).item()


def kernel_bytes(shape: Shape, dtype: torch.dtype):
    """Bytes winconv's kernels move for a forward and a training step, and the model used.

    The native module may report its own per-kernel traffic (`wtconv2d_io_bytes`); otherwise
    this is the floor every implementation must pay: forward reads x and writes y, backward
    reads x and dY and writes dx (5N elements per training step at stride 1; y and dY have
    N_o = B C ceil(H/s) ceil(W/s) elements).
    """
    native = native_module()
    counter = getattr(native, "wtconv2d_io_bytes", None) if native is not None else None
    if counter is not None:
        fwd, bwd = counter(shape.batch, shape.channels, shape.height, shape.width,
                           shape.kernel_size, shape.wt_levels, shape.stride, dtype)
        return fwd, fwd + bwd, "kernels"
    size = torch.tensor([], dtype=dtype).element_size()
    n, n_out = shape.elements, math.prod(shape.out_dims)
    return (n + n_out) * size, (3 * n + 2 * n_out) * size, "floor"


def copy_bandwidth_gbps() -> float:
    """Device-to-device copy bandwidth (read + write) on a 1 GiB buffer, for reference."""
    src = torch.empty(2**28, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), lambda: None, 20, 3)
    return achieved_gbps(2 * src.numel() * 4, ms)


def achieved_gbps(nbytes: int, ms: float) -> float:
    """Bytes moved in `ms` milliseconds, in GB/s (1e9 bytes a second)."""
    return nbytes / (ms * 1e-3) / 1e9


# FP32 lanes per SM by compute capability (the CUDA C Programming Guide's arithmetic-throughput
# table): 64 on sm_60/70/75/80, 128 on sm_86/87/89/90 and the Blackwell parts.
FP32_LANES_PER_SM = {(6, 0): 64, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128,
                     (8, 9): 128, (9, 0): 128, (10, 0): 128, (10, 3): 128, (12, 0): 128}


def fp32_rate_tflops():
    """The device's FP32 FMA rate at its maximum SM clock (SMs x lanes x 2 FLOPs x clock), the
    FLOP floor's denominator, and how it was found; (None, reason) when a term is unknown."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    lanes = FP32_LANES_PER_SM.get((props.major, props.minor))
    if lanes is None:
        return None, f"no FP32 lane count for sm_{props.major}{props.minor}"
    try:  # the driver API's CU_DEVICE_ATTRIBUTE_CLOCK_RATE (13), in kHz
        import ctypes

        cuda = ctypes.CDLL("libcuda.so.1")
        khz, dev = ctypes.c_int(0), ctypes.c_int(0)
        if (cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(dev), torch.cuda.current_device()) != 0
                or cuda.cuDeviceGetAttribute(ctypes.byref(khz), 13, dev) != 0 or khz.value <= 0):
            return None, "the driver did not report the SM clock"
    except OSError as e:
        return None, f"libcuda.so.1 not loaded ({e})"
    rate = props.multi_processor_count * lanes * 2 * khz.value * 1e3 / 1e12
    how = f"{props.multi_processor_count} SMs x {lanes} FP32 lanes x 2 x {khz.value / 1e6:.3f} GHz"
    return rate, how


# --------------------------------------------------------------------------------------------
# Driver


def run_shape(args, shape: Shape, dtype_name: str) -> List[Result]:
    dtype = DTYPES[dtype_name]
    ours = make_winconv(shape, seed=0).cuda()
    bench = Bench(shape, dtype, args)
    constructors = build_impls(args, shape, dtype, ours)

    reference_out = None
    if "reference" in constructors:
        try:  # the reference output in float32 from the same (rounded) input
            ref32 = constructors["reference"]().float()
            ref32.load_state_dict(ours.state_dict())  # .to(dtype) rounded the weights; winconv keeps FP32
            with torch.no_grad():
                reference_out = ref32(bench.check_x.detach().float()).float()
            del ref32
        except Exception as exc:  # reported per row below
            print(f"  reference unavailable for rel_err: {exc}", flush=True)
    f64_y, f64_gx = float64_reference(ours, bench.check_x, bench.check_gy) if args.f64_check else (None, None)

    results = []
    for impl, make in constructors.items():
        result = Result(shape.name, dtype_name, impl)
        try:
            module = make()
            fwd_ms, train_ms = bench.eager_times(module)
            result.values.update(fwd_ms=fwd_ms, train_ms=train_ms, peak_bytes=bench.peak_bytes(module))
            if not args.no_graphs:
                try:
                    graph_fwd, graph_train = bench.graph_times(module)
                    result.values.update(graph_fwd_ms=graph_fwd, graph_train_ms=graph_train)
                except Exception as exc:
                    result.values["error"] = f"graph: {type(exc).__name__}: {exc}".replace("\n", " ")[:200]
                    torch.cuda.synchronize()
            if impl != "depthwise7x7":  # a different operator: no error to report
                out = bench.forward_output(module)
                if reference_out is not None:
                    result.values["rel_err"] = rel_l2(out, reference_out)
                if f64_y is not None:
                    result.values["rel_err_f64"] = rel_l2(out, f64_y)
                    if reference_out is None:
                        result.values["rel_err"] = result.values["rel_err_f64"]
            if impl == "winconv" and f64_gx is not None:
                x = bench.check_x.detach().clone().requires_grad_(True)
                module(x).backward(bench.check_gy)
                result.values["grad_rel_err_f64"] = rel_l2(x.grad, f64_gx)
            del module
        except Exception as exc:
            result.values["error"] = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:300]
        results.append(result)
        torch.cuda.empty_cache()
    eager_rounds(bench, constructors, results, args.eager_rounds - 1)
    for result in results:
        if result.impl == "winconv" and "train_ms" in result.values:
            fwd_bytes, train_bytes, model = kernel_bytes(shape, dtype)
            result.values.update(
                fwd_bytes=fwd_bytes, train_bytes=train_bytes, bytes_model=model,
                fwd_GBps=achieved_gbps(fwd_bytes, result.values["fwd_ms"]),
                train_GBps=achieved_gbps(train_bytes, result.values["train_ms"]),
            )
    return results


# Steps shorter than this are re-timed in the further eager rounds: there the host's launch work,
# not the device, sets the time. Longer ones are device-bound, and their medians repeat.
HOST_BOUND_MS = 5.0


def eager_rounds(bench: "Bench", constructors, results: List[Result], rounds: int) -> None:
    """Further rounds of the eager timings of the steps under HOST_BOUND_MS, every implementation
    in turn in each round, keeping each step's lowest median. Those steps are bound by host time,
    which drifts (scheduling, clocks) over a run: one round of 20 can land in a slow stretch for one
    implementation and not for the next. Interleaved rounds give every implementation the same
    chances; each figure is still the median of --iters timed steps, of its best round."""
    for _ in range(rounds):
        for result in results:
            v = result.values
            if "train_ms" not in v:
                continue  # failed in the first round
            fwd_too, train_too = v["fwd_ms"] < HOST_BOUND_MS, v["train_ms"] < HOST_BOUND_MS
            if not (fwd_too or train_too):
                continue
            module = constructors[result.impl]()
            fwd_ms, train_ms = bench.eager_times(module, fwd_too, train_too)
            if fwd_ms is not None:
                v["fwd_ms"] = min(v["fwd_ms"], fwd_ms)
            if train_ms is not None:
                v["train_ms"] = min(v["train_ms"], train_ms)
            del module
            torch.cuda.empty_cache()


def progress_line(index: int, total: int, shape: Shape, dtype_name: str, results: List[Result], seconds: float) -> str:
    parts = []
    for r in results:
        v = r.values
        if "fwd_ms" in v:
            parts.append(f"{r.impl} {v['fwd_ms']:.3f}/{v['train_ms']:.3f} ms")
        else:
            parts.append(f"{r.impl} FAILED ({v.get('error', '')[:80]})")
    return f"[{index}/{total}] {shape.name} {dtype_name} (fwd/train): " + ", ".join(parts) + f"  [{seconds:.0f} s]"


def write_csv(path: Path, columns, results: List[Result], only_measured: bool):
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for r in results:
            if only_measured and "fwd_ms" not in r.values:
                continue
            writer.writerow(r.row(columns))


def checkout_commit() -> str:
    """Short commit of the checkout this script is in, '+dirty' with uncommitted changes; 'unknown'
    outside git."""
    try:  # a --match that no tag matches makes describe print the abbreviated commit itself
        out = subprocess.run(["git", "-C", str(REPO_ROOT), "describe", "--always", "--dirty=+dirty",
                              "--abbrev=7", "--match=NO_TAGS"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", type=Path, default=None,
                        help="shapes CSV (default: bench/wtconv_shapes.csv)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "out" / "wtconv", help="output folder")
    parser.add_argument("--dtypes", default="fp32,fp16,bf16", help="comma-separated subset of fp32,fp16,bf16")
    parser.add_argument("--impls", default=",".join(IMPLS), help="comma-separated subset of " + ",".join(IMPLS))
    parser.add_argument("--only", default="", help="comma-separated shape names to run (default: all)")
    parser.add_argument("--wtconv-repo", default=None, help="checkout of the original WTConv repository")
    parser.add_argument("--fused-repo", default=None, help="checkout holding the official fused WTConv module")
    parser.add_argument("--fused-class", default=DEFAULT_FUSED_CLASS,
                        help=f"module:Class of the fused module on --fused-repo (default {DEFAULT_FUSED_CLASS})")
    parser.add_argument("--iters", type=int, default=20, help="timed runs per measurement (>= 20)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--eager-rounds", type=int, default=3,
                        help="interleaved rounds of the eager timings of steps under 5 ms; each such figure is the "
                             "lowest round's median")
    parser.add_argument("--pool-budget-gib", type=float, default=4.0,
                        help="device memory for each rotating input pool (x, dY)")
    parser.add_argument("--no-graphs", action="store_true", help="skip the CUDA-graph timings")
    parser.add_argument("--no-f64-check", dest="f64_check", action="store_false",
                        help="skip the float64 check of winconv's output and input gradient")
    parser.add_argument("--commit", default=None,
                        help="code version recorded in the results (default: git describe of this checkout)")
    args = parser.parse_args(argv)
    if args.commit is None:
        args.commit = checkout_commit()
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    args.impls = [i for i in args.impls.split(",") if i]
    for d in args.dtypes:
        if d not in DTYPES:
            parser.error(f"unknown dtype {d!r}; choose from {sorted(DTYPES)}")
    for i in args.impls:
        if i not in IMPLS:
            parser.error(f"unknown impl {i!r}; choose from {IMPLS}")
    if args.eager_rounds < 1:
        parser.error("--eager-rounds must be >= 1")
    if args.iters < 20:
        parser.error("--iters must be >= 20 (the median of at least 20 timed runs is reported)")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    shapes_path = args.shapes or default_shapes_path()
    try:
        shapes = select_shapes(read_shapes(shapes_path), args.only)
    except ValueError as e:
        print(f"wtconv_bench: {shapes_path}: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("wtconv_bench: no CUDA device; nothing measured", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True  # cuDNN's fastest algorithm for the depthwise baseline
    torch.backends.cudnn.allow_tf32 = False  # FP32 means FP32 for every implementation
    torch.backends.cuda.matmul.allow_tf32 = False
    args.out.mkdir(parents=True, exist_ok=True)
    ceiling = official_kernel_ceiling(shapes) if "official_fused" in args.impls and args.fused_repo else None
    if ceiling is not None:
        # Every shape against the official module, not only those up to its default k = 7 (a
        # one-time compile of the larger sizes, cached by the module per ceiling).
        os.environ["HAAR_MAX_K"] = str(ceiling)
        print(f"wtconv_bench: HAAR_MAX_K={ceiling} for the official fused module (kernel sizes above "
              f"{OFFICIAL_DEFAULT_MAX_K})", flush=True)
    status = winconv.native_status()
    ops_status = winconv.torch_ops_status()
    eager_binding = "C++ operator" if not ops_status else "ctypes (" + ops_status + ")"
    print(f"wtconv_bench: {len(shapes)} shapes from {shapes_path}, dtypes {args.dtypes}; "
          f"winconv kernels: {'fused CUDA' if not status else 'pure PyTorch (' + status + ')'}; "
          f"eager binding: {eager_binding}", flush=True)

    fp32_rate = fp32_rate_tflops()
    env = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "winconv_kernels": "fused" if not status else "pytorch-fallback",
        "eager_binding": "torch-ops" if not ops_status else "ctypes",
        "copy_GBps": copy_bandwidth_gbps(),
        "fp32_TFLOPS": fp32_rate[0],
        "fp32_rate_source": fp32_rate[1],
        "l2_bytes": l2_cache_bytes(),
        "iters": args.iters,
        "eager_rounds": args.eager_rounds,
        "shapes": {s.name: vars(s) for s in shapes},
        "date": time.strftime("%Y-%m-%d"),
        "commit": args.commit,
    }
    (args.out / "wtconv_env.json").write_text(json.dumps(env, indent=1) + "\n")

    results: List[Result] = []
    total = len(shapes) * len(args.dtypes)
    index = 0
    for dtype_name in args.dtypes:
        for shape in shapes:
            index += 1
            started = time.time()
            shape_results = run_shape(args, shape, dtype_name)
            results.extend(shape_results)
            print(progress_line(index, total, shape, dtype_name, shape_results, time.time() - started), flush=True)
            write_csv(args.out / "wtconv.csv", MAIN_COLUMNS, results, only_measured=True)
            write_csv(args.out / "wtconv_extra.csv", EXTRA_COLUMNS, results, only_measured=False)

    try:
        import plot_wtconv

        plot_wtconv.write_report(args.out)
    except ImportError as exc:
        print(f"wtconv_bench: no plot ({exc}); pip install matplotlib", flush=True)
    failed, inaccurate = problems(results, args.f64_check)
    for r in failed + inaccurate:
        detail = r.values.get("error") or "rel_err_f64 {} grad_rel_err_f64 {}".format(
            _fmt(r.values.get("rel_err_f64")), _fmt(r.values.get("grad_rel_err_f64")))
        print(f"wtconv_bench: PROBLEM {r.shape} {r.dtype} {r.impl}: {detail}", flush=True)
    print(f"wtconv_bench: wrote {args.out}/wtconv.csv, wtconv_extra.csv, wtconv_summary.md", flush=True)
    return exit_status(failed, inaccurate)


def exit_status(failed: List[Result], inaccurate: List[Result]) -> int:
    """1 when a winconv row was not measured or did not pass its checks; a baseline that failed
    is reported (PROBLEM lines) but does not fail the run."""
    return 1 if inaccurate or any(r.impl == "winconv" for r in failed) else 0


TOLERANCE = {"fp32": 1e-5, "fp16": 1e-2, "bf16": 1e-2}


def problems(results: List[Result], f64_check: bool) -> Tuple[List[Result], List[Result]]:
    """(rows that were not measured, winconv rows whose checks did not pass). Other implementations'
    failures are reported; winconv's fail the run. A timed winconv row passes only with a finite
    forward and input-gradient error within the bound (NaN, or a check that never ran, fails)."""
    failed = [r for r in results if "fwd_ms" not in r.values]
    inaccurate = [
        r for r in results
        if r.impl == "winconv" and "fwd_ms" in r.values and f64_check
        and any(not (isinstance(r.values.get(key), float) and r.values[key] <= TOLERANCE[r.dtype])
                for key in ("rel_err_f64", "grad_rel_err_f64"))
    ]
    return failed, inaccurate


if __name__ == "__main__":
    sys.exit(main())
