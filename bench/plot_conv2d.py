#!/usr/bin/env python3
"""Plots conv2d.csv (written by winconv-bench): TFLOPS and extra memory per layer, one bar per
implementation, one row of panels per (precision, layout). Usage: plot_conv2d.py OUTDIR"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(outdir):
    with open(f"{outdir}/conv2d.csv") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        print("plot_conv2d: conv2d.csv has no rows")
        return
    groups = defaultdict(list)
    for r in rows:
        groups[(r["precision"], r["layout"])].append(r)
    fig, axes = plt.subplots(len(groups), 2, figsize=(18, 4.5 * len(groups)), squeeze=False)
    for row_axes, ((prec, layout), rs) in zip(axes, sorted(groups.items())):
        layers = list(dict.fromkeys(r["layer"] for r in rs))
        impls = list(dict.fromkeys(r["impl"] for r in rs))
        width = 0.8 / len(impls)
        for metric, ax, label in (("tflops", row_axes[0], "TFLOPS"), ("extra_bytes", row_axes[1], "extra MiB")):
            for i, impl in enumerate(impls):
                vals = {r["layer"]: float(r[metric]) for r in rs if r["impl"] == impl}
                ys = [vals.get(l, 0.0) / (2**20 if metric == "extra_bytes" else 1) for l in layers]
                ax.bar([j + i * width for j in range(len(layers))], ys, width, label=impl)
            ax.set_xticks([j + 0.4 - width / 2 for j in range(len(layers))], layers, rotation=30)
            ax.set_ylabel(label)
            ax.set_title(f"{prec} {layout}: {label}")
            if metric == "extra_bytes":
                ax.set_yscale("symlog", linthresh=1.0)
        row_axes[0].legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(f"{outdir}/conv2d.png", dpi=90)
    print(f"wrote {outdir}/conv2d.png")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
