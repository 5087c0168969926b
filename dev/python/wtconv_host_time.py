#!/usr/bin/env python3
"""Host time of winconv's eager WTConv2d calls against a 7x7 depthwise conv (docs/wtconv.md, note 49).

At small shapes the eager training step is bound by the host: the time to issue the calls, not
the GPU's work. This measures that time directly: the GPU is kept busy with a sleep kernel, so no
call waits for it, and each call is timed on the host. It reports per shape, in microseconds:
  step        forward + backward of the module (parameter gradients cleared first)
  fwd_nograd  forward under torch.no_grad()
  bwd         the backward call alone (forward outside the timed region)
The figure is the lowest of --reps medians of --calls calls. Machines drift: run builds in
alternating processes and compare the lowest figures. Two builds of the operator library are
compared by running this script with WINCONV_TORCH_OPS pointing at each one.

With --plain the steps run back to back instead, as the benchmark's eager timings run them (the
GPU idles whenever the host falls behind), and each step's phases are timed on the host:
  fwd         the forward with autograd recording
  bwd         the backward call
  step_wall   wall time per step over the loop (synchronised once at its end)
  step_events the median of CUDA events around single steps, as the benchmark times them
A shape whose step_wall sits above its CUDA-graph step time is bound by this host time
(docs/wtconv.md, note 127).

Usage: PYTHONPATH=python WINCONV_LIBRARY=build/libwinconv.so \\
       python3 dev/python/wtconv_host_time.py [--tag NAME] [--plain] [--shapes B,C,H,W,k,L[,s] ...]
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn

import winconv
from winconv.nn import WTConv2d

DEFAULT_SHAPES = ["2,64,14,14,5,2", "8,384,14,14,5,3", "64,768,7,7,5,2"]


def lowest_median_us(call, calls: int, reps: int, before=None) -> float:
    """Lowest over reps of the median host time of one call, with the GPU busy throughout."""
    medians = []
    for _ in range(reps):
        torch.cuda.synchronize()
        torch.cuda._sleep(int(3e8))  # about 0.2 s of GPU work: no call below waits for the device
        times = []
        for _ in range(calls):
            if before is not None:
                before()
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
        medians.append(statistics.median(times))
    return min(medians) * 1e6


def measure(module: nn.Module, x: torch.Tensor, grad_y: torch.Tensor, calls: int, reps: int) -> dict:
    params = list(module.parameters())

    def clear():
        for p in params:
            p.grad = None

    def step():
        clear()
        module(x).backward(grad_y)

    def fwd_nograd():
        with torch.no_grad():
            module(x)

    held = {}

    def forward_outside():
        clear()
        held["y"] = module(x)

    step()  # warm-up: allocations, library loads
    return {
        "step": lowest_median_us(step, calls, reps),
        "fwd_nograd": lowest_median_us(fwd_nograd, calls, reps),
        "bwd": lowest_median_us(lambda: held["y"].backward(grad_y), calls, reps, before=forward_outside),
    }


def measure_plain(module: nn.Module, x: torch.Tensor, grad_y: torch.Tensor, calls: int, reps: int) -> dict:
    """Host time of each phase of back-to-back training steps (lowest of reps medians, us)."""
    params = list(module.parameters())
    xs = [x.detach().clone().requires_grad_(True) for _ in range(4)]  # fresh leaves, as the benchmark's pool

    def clear():
        for p in params + xs:
            p.grad = None

    for i in range(5):
        clear()
        module(xs[i % 4]).backward(grad_y)
    torch.cuda.synchronize()
    fwd, bwd, wall, events = [], [], [], []
    for _ in range(reps):
        tf, tb = [], []
        t_start = time.perf_counter()
        for i in range(calls):
            clear()
            t0 = time.perf_counter()
            y = module(xs[i % 4])
            t1 = time.perf_counter()
            y.backward(grad_y)
            tb.append(time.perf_counter() - t1)
            tf.append(t1 - t0)
        torch.cuda.synchronize()
        wall.append((time.perf_counter() - t_start) / calls)
        fwd.append(statistics.median(tf))
        bwd.append(statistics.median(tb))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        for i, (start, end) in enumerate(zip(starts, ends)):
            clear()
            start.record()
            module(xs[i % 4]).backward(grad_y)
            end.record()
        torch.cuda.synchronize()
        events.append(statistics.median(a.elapsed_time(b) for a, b in zip(starts, ends)) * 1e-3)
    return {name: min(v) * 1e6 for name, v in
            (("fwd", fwd), ("bwd", bwd), ("step_wall", wall), ("step_events", events))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", nargs="+", default=DEFAULT_SHAPES,
                    help="B,C,H,W,kernel_size,wt_levels[,stride] (stride 1 when left out)")
    ap.add_argument("--tag", default="", help="label printed first on every line (e.g. the build)")
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--plain", action="store_true",
                    help="time the phases of back-to-back steps instead of calls with the GPU kept busy")
    args = ap.parse_args()
    run = measure_plain if args.plain else measure
    if not torch.cuda.is_available():
        print("wtconv_host_time: needs a CUDA device")
        return 1
    print(f"# eager binding: {winconv.torch_ops_status() or 'C++ operator'}")
    for spec in args.shapes:
        b, c, h, w, k, levels, *rest = (int(v) for v in spec.split(","))
        s = rest[0] if rest else 1
        torch.manual_seed(0)
        x = torch.randn(b, c, h, w, device="cuda")
        grad_y = torch.randn(b, c, (h - 1) // s + 1, (w - 1) // s + 1, device="cuda")  # both modules' output size
        ours = run(WTConv2d(c, c, k, stride=s, wt_levels=levels).cuda(), x, grad_y, args.calls, args.reps)
        dw = run(nn.Conv2d(c, c, 7, stride=s, padding=3, groups=c).cuda(), x, grad_y, args.calls, args.reps)
        cells = " ".join(f"{name}={ours[name]:6.1f}/{dw[name]:6.1f}" for name in ours)
        print(f"{args.tag} {spec} winconv/depthwise7x7 us: {cells}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
