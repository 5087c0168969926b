#!/usr/bin/env python3
"""Summary (wtconv_summary.md) and plot (wtconv.png) of a WTConv benchmark run.

Reads wtconv_extra.csv and wtconv_env.json written by wtconv_bench.py in OUTDIR; every figure
comes from those files. Usage: plot_wtconv.py OUTDIR
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

IMPL_ORDER = ["winconv", "official_fused", "reference", "depthwise7x7"]
DTYPE_ORDER = ["fp32", "fp16", "bf16"]
ELEMENT_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
FLOOR_SHAPE = "big_L2"


def _num(value):
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def _geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _cell(x, digits=3):
    return "" if x is None else f"{x:.{digits}f}"


def load(outdir: Path):
    with (outdir / "wtconv_extra.csv").open() as f:
        rows = list(csv.DictReader(f))
    env = json.loads((outdir / "wtconv_env.json").read_text())
    table = defaultdict(dict)  # (dtype, shape) -> impl -> row
    for r in rows:
        table[(r["dtype"], r["shape"])][r["impl"]] = r
    return rows, env, table


def _ratio(table_row, other, metric):
    mine = _num(table_row.get("winconv", {}).get(metric))
    theirs = _num(table_row.get(other, {}).get(metric))
    return theirs / mine if mine and theirs else None


def flop_count(shape: dict) -> int:
    """Forward FLOPs (2 per multiply-add) of the depthwise convs: base + every level."""
    b, c, h, w, k = shape["batch"], shape["channels"], shape["height"], shape["width"], shape["kernel_size"]
    total = b * c * h * w
    for _ in range(shape["wt_levels"]):
        h, w = (h + 1) // 2, (w + 1) // 2
        total += 4 * b * c * h * w
    return 2 * k * k * total


def _rounds_note(env) -> str:
    rounds = env.get("eager_rounds", 1)
    if rounds <= 1:
        return ""
    return (f" (eager steps under 5 ms: the lowest of {rounds} such medians, from rounds that take the"
            " implementations in turn)")


def _fwd_floor_bytes(n: int, dtype: str) -> int:
    """A forward's compulsory bytes: x and y, 2N elements."""
    return 2 * n * ELEMENT_BYTES[dtype]


def _train_floor_bytes(n: int, dtype: str) -> int:
    """A training step's compulsory bytes: x and y (forward), x, dY and dx (backward): 5N elements."""
    return 5 * n * ELEMENT_BYTES[dtype]


def _floor_lines(env, table, n: int, fwd_flops: int) -> list:
    """The training step against its floor: the larger of bytes over the measured copy bandwidth
    and FLOPs over the FP32 rate (the kernels accumulate in FP32 on CUDA cores in every dtype).
    Also against the sum of its two phases' floors: the backward needs dY, so it cannot start
    before the forward ends, and each phase is bound by the larger of its own two terms."""
    rate = env.get("fp32_TFLOPS")
    if not rate:
        return ["", f"No FP32 rate recorded ({env.get('fp32_rate_source', 'older results')}): no FLOP floor."]
    train_flops = 3 * fwd_flops
    lines = [
        "",
        f"FP32 rate {rate:.1f} TFLOPS ({env.get('fp32_rate_source', '')}). Training step floor = max(bytes / "
        f"{env['copy_GBps']:.0f} GB/s, {train_flops:.3e} FLOPs / FP32 rate). Phase floors = max(2N elements, "
        f"{fwd_flops:.3e} FLOPs) for the forward + max(3N elements, {2 * fwd_flops:.3e} FLOPs) for the "
        "backward, each term in time as above:",
        "",
        "| dtype | byte floor ms | FLOP floor ms | floor ms | winconv train ms | winconv / floor | "
        "phase floors ms | winconv / phase floors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    bandwidth = env["copy_GBps"] * 1e9
    flop_ms = train_flops / (rate * 1e12) * 1e3
    fwd_flop_ms = fwd_flops / (rate * 1e12) * 1e3
    bwd_flop_ms = flop_ms - fwd_flop_ms
    for dtype in DTYPE_ORDER:
        ours = table.get((dtype, FLOOR_SHAPE), {}).get("winconv")
        if not ours:
            continue
        byte_ms = _train_floor_bytes(n, dtype) / bandwidth * 1e3
        floor = max(byte_ms, flop_ms)
        fwd_byte_ms = _fwd_floor_bytes(n, dtype) / bandwidth * 1e3
        bwd_byte_ms = byte_ms - fwd_byte_ms
        phases = max(fwd_byte_ms, fwd_flop_ms) + max(bwd_byte_ms, bwd_flop_ms)
        train_ms = _num(ours.get("train_ms"))
        lines.append(f"| {dtype} | {_cell(byte_ms)} | {_cell(flop_ms)} | {_cell(floor)} | {_cell(train_ms)} | "
                     f"{_cell(train_ms / floor if train_ms else None, 2)} | {_cell(phases)} | "
                     f"{_cell(train_ms / phases if train_ms else None, 2)} |")
    return lines


def summary_markdown(rows, env, table) -> str:
    shapes = list(env["shapes"])
    lines = [
        "# WTConv benchmark",
        "",
        f"GPU {env['gpu']}, PyTorch {env['torch']} (CUDA {env['cuda']}, cuDNN {env['cudnn']}), {env['date']}, "
        f"commit {env.get('commit', 'unknown')}; "
        f"winconv kernels: {env['winconv_kernels']} (eager binding: {env.get('eager_binding', 'ctypes')}). Median of {env['iters']} CUDA-event timings after warm-up"
        f"{_rounds_note(env)}, inputs rotated over > 2x the {env['l2_bytes'] / 2**20:.0f} MiB L2. "
        f"Measured device copy bandwidth (read + write): {env['copy_GBps']:.0f} GB/s.",
        "",
        "Ratios are the other implementation's time divided by winconv's (above 1: winconv is faster). "
        "`train` is forward + backward in eager mode, `graph` the same step replayed from a CUDA graph. "
        "Peak is the training step's device memory above its inputs. `rel_err` is winconv's forward against "
        "the original module in float32 with the same float32 weights, on the same dtype-rounded input "
        "(against the float64 oracle when the original is not given; float64 errors of the forward and the "
        "input gradient are in wtconv_extra.csv).",
    ]
    for dtype in DTYPE_ORDER:
        present = [s for s in shapes if (dtype, s) in table]
        if not present:
            continue
        lines += [
            "",
            f"## {dtype}",
            "",
            "| shape | winconv fwd ms | winconv train ms | graph train ms | peak MiB | rel_err | "
            "vs official_fused fwd | train | vs depthwise7x7 fwd | train | vs reference train |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        ratios = defaultdict(list)
        for s in present:
            t = table[(dtype, s)]
            ours = t.get("winconv", {})
            peak = _num(ours.get("peak_bytes"))
            cells = {}
            for other, metric in (("official_fused", "fwd_ms"), ("official_fused", "train_ms"),
                                  ("depthwise7x7", "fwd_ms"), ("depthwise7x7", "train_ms"), ("reference", "train_ms")):
                r = _ratio(t, other, metric)
                cells[(other, metric)] = r
                ratios[(other, metric)].append(r)
            lines.append(
                f"| {s} | {_cell(_num(ours.get('fwd_ms')))} | {_cell(_num(ours.get('train_ms')))} | "
                f"{_cell(_num(ours.get('graph_train_ms')))} | {_cell(peak / 2**20 if peak is not None else None, 1)} | "
                f"{ours.get('rel_err', '')} | "
                + " | ".join(_cell(cells[key], 2) for key in (
                    ("official_fused", "fwd_ms"), ("official_fused", "train_ms"),
                    ("depthwise7x7", "fwd_ms"), ("depthwise7x7", "train_ms"), ("reference", "train_ms")))
                + " |"
            )
        geo = {key: _geomean(v) for key, v in ratios.items()}
        lines.append(
            "| **geomean** | | | | | | "
            + " | ".join(_cell(geo.get(key), 2) for key in (
                ("official_fused", "fwd_ms"), ("official_fused", "train_ms"),
                ("depthwise7x7", "fwd_ms"), ("depthwise7x7", "train_ms"), ("reference", "train_ms")))
            + " |"
        )

    if FLOOR_SHAPE in env["shapes"]:
        shape = env["shapes"][FLOOR_SHAPE]
        n = shape["batch"] * shape["channels"] * shape["height"] * shape["width"]
        fwd_flops = flop_count(shape)
        lines += [
            "",
            f"## {FLOOR_SHAPE}: against the I/O floor",
            "",
            f"N = B*C*H*W = {n:,} elements. The floor of a training step reads x and dY and writes y and dx; "
            "run as a separate forward and backward that is 2N elements (forward) + 3N (backward) = 5N. "
            f"Depthwise-conv FLOPs (2 per multiply-add, base + all levels): forward {fwd_flops:.3e}, "
            f"training step about 3x = {3 * fwd_flops:.3e}. Floor times use the measured copy bandwidth.",
            "",
            "| dtype | fwd floor bytes | fwd floor ms | winconv fwd ms | fwd GB/s | train floor bytes | "
            "train floor ms | winconv train ms | train GB/s | bytes counted | train TFLOPS |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        bandwidth = env["copy_GBps"] * 1e9
        for dtype in DTYPE_ORDER:
            ours = table.get((dtype, FLOOR_SHAPE), {}).get("winconv")
            if not ours:
                continue
            fwd_floor, train_floor = _fwd_floor_bytes(n, dtype), _train_floor_bytes(n, dtype)
            fwd_ms, train_ms = _num(ours.get("fwd_ms")), _num(ours.get("train_ms"))
            lines.append(
                f"| {dtype} | {fwd_floor:,} | {_cell(fwd_floor / bandwidth * 1e3)} | {_cell(fwd_ms)} | "
                f"{_cell(_num(ours.get('fwd_GBps')), 0)} | {train_floor:,} | {_cell(train_floor / bandwidth * 1e3)} | "
                f"{_cell(train_ms)} | {_cell(_num(ours.get('train_GBps')), 0)} | {ours.get('bytes_model', '')} | "
                f"{_cell(3 * fwd_flops / (train_ms * 1e-3) / 1e12 if train_ms else None, 2)} |"
            )
        lines += _floor_lines(env, table, n, fwd_flops)

    errors = [r for r in rows if r.get("error")]
    if errors:
        lines += ["", "## Problems", ""]
        lines += [f"- {r['shape']} {r['dtype']} {r['impl']}: {r['error']}" for r in errors]
    return "\n".join(lines) + "\n"


def plot(rows, env, table, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dtypes = [d for d in DTYPE_ORDER if any(key[0] == d for key in table)]
    shapes = list(env["shapes"])
    impls = [i for i in IMPL_ORDER if any(r["impl"] == i for r in rows)]
    fig, axes = plt.subplots(2, len(dtypes), figsize=(7 * len(dtypes), 8), squeeze=False)
    width = 0.8 / max(len(impls), 1)
    for col, dtype in enumerate(dtypes):
        for row, (metric, label) in enumerate((("fwd_ms", "forward ms"), ("train_ms", "training step ms"))):
            ax = axes[row][col]
            for i, impl in enumerate(impls):
                ys = [_num(table.get((dtype, s), {}).get(impl, {}).get(metric)) or 0.0 for s in shapes]
                ax.bar([j + i * width for j in range(len(shapes))], ys, width, label=impl)
            ax.set_xticks([j + 0.4 - width / 2 for j in range(len(shapes))], shapes, rotation=30, fontsize=8)
            ax.set_yscale("log")
            ax.set_ylabel(label)
            ax.set_title(f"{dtype}: {label} (lower is better)")
            ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"WTConv on {env['gpu']}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_report(outdir) -> None:
    outdir = Path(outdir)
    rows, env, table = load(outdir)
    (outdir / "wtconv_summary.md").write_text(summary_markdown(rows, env, table))
    plot(rows, env, table, outdir / "wtconv.png")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    write_report(sys.argv[1])
