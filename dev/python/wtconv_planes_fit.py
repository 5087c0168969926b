#!/usr/bin/env python3
"""Fits the planner's planes-per-item rule to a planes-per-item sweep (docs/wtconv.md, note 119).

Input: the output of dev/cuda/wtconv_tile_sweep.cu with WTCONV_SWEEP_NP=1, one line per
(shape, dtype, pass, planes per item) at the planner's tile:
  NAME DTYPE fwd|bwd THxTW np NP MS VS_FIRST KEPT MAX_DIFF items I splits S blocks/SM R model M [rule]

For each rule of a grid, the choice balance_planes (plan.h) would make from the same rows:
from the rule's planes per item (1024 outputs or 256 coefficients a tile, at most the batch) up
to twice that, no fewer resident blocks, the least modelled busiest block
ceil(items / splits) x (np x tile area + O), taken only when it is at least MARGIN cheaper than
the rule's. O is given at k = 5 and scaled as 25 / k^2 above (item_overhead_cells), so the
sweep's k must be known: it is read from the shapes CSV the sweep ran on.

Reports per rule the geometric mean and the worst of time(choice) / time(best measured), over
every (shape, dtype, pass), and for the current rule (O = 512, MARGIN = 5%) the cases it misses
by more than 3%. Nothing is timed here: a rule that fits gets its A/B in the dev harness.

Usage: python3 dev/python/wtconv_planes_fit.py SWEEP_LOG SHAPES_CSV
"""
import argparse
import collections
import csv
import math
import re

LINE = re.compile(
    r"^(?P<name>\S+)\s+(?P<dtype>fp32|fp16)\s+(?P<pass>fwd|bwd)\s+(?P<th>\d+)x(?P<tw>\d+)\s+np\s+(?P<np>\d+)\s+"
    r"(?P<ms>[\d.]+)\s+\S+\s+\S+\s+\S+\s+items\s+(?P<items>\d+)\s+splits\s+(?P<splits>\d+)\s+"
    r"blocks/SM\s+(?P<blocks>\d+)\s+model\s+\d+")

CURRENT = (512, 0.05)
ITEM_TARGET = {"fwd": 1024, "bwd": 256}


def read_sweep(path):
    """{(name, dtype, pass): [row, ...]} with rows sorted by planes per item."""
    cases = collections.defaultdict(list)
    for line in open(path):
        m = LINE.match(line.strip())
        if not m:
            continue
        row = {k: (m.group(k) if k in ("name", "dtype", "pass") else int(m.group(k))) for k in
               ("name", "dtype", "pass", "th", "tw", "np", "items", "splits", "blocks")}
        row["ms"] = float(m.group("ms"))
        cases[(row["name"], row["dtype"], row["pass"])].append(row)
    for rows in cases.values():
        rows.sort(key=lambda r: r["np"])
    return cases


def read_shapes(path):
    """{name: (batch, kernel size)} from a shapes CSV (comment lines start with '#')."""
    lines = [l for l in open(path) if l.strip() and not l.startswith("#")]
    return {r["name"]: (int(r["B"]), int(r["kernel_size"])) for r in csv.DictReader(lines)}


def overhead_cells(k, at_k5, backward):
    o = at_k5 // 4 if backward else at_k5
    return o if k <= 5 else o * 25 // (k * k)


def choose(rows, batch, k, backward, at_k5, margin):
    """The planes per item balance_planes would take from these rows (None: rule's row missing)."""
    area = rows[0]["th"] * rows[0]["tw"]
    target = ITEM_TARGET["bwd" if backward else "fwd"]
    rule_np = max(1, min(batch, target // area))
    by_np = {r["np"]: r for r in rows}
    if rule_np not in by_np:
        return None
    o = overhead_cells(k, at_k5, backward)

    def cost(r):
        return math.ceil(r["items"] / r["splits"]) * (r["np"] * area + o)

    rule = by_np[rule_np]
    best, best_cost = rule, cost(rule)
    for np_ in range(rule_np + 1, min(2 * target // area, batch) + 1):
        r = by_np.get(np_)
        if r is None or r["blocks"] < rule["blocks"]:
            break
        if cost(r) < best_cost:
            best, best_cost = r, cost(r)
    return best if best_cost <= (1 - margin) * cost(rule) else rule


def evaluate(cases, shapes, at_k5, margin):
    """[(case, chosen row, best row)] for every case whose rule row the sweep holds."""
    out = []
    for key, rows in sorted(cases.items()):
        batch, k = shapes[key[0]]
        chosen = choose(rows, batch, k, key[2] == "bwd", at_k5, margin)
        if chosen is not None:
            out.append((key, chosen, min(rows, key=lambda r: r["ms"])))
    return out


def summary(results):
    ratios = [c["ms"] / b["ms"] for _, c, b in results]
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios)), max(ratios)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep_log")
    ap.add_argument("shapes_csv")
    args = ap.parse_args()
    cases, shapes = read_sweep(args.sweep_log), read_shapes(args.shapes_csv)
    if not cases:
        raise SystemExit(f"no WTCONV_SWEEP_NP lines in {args.sweep_log}")
    print(f"{len(cases)} cases; time(rule's choice) / time(best measured planes per item):")
    print(f"{'O at k=5':>9} {'margin':>7} {'geomean':>8} {'worst':>7}")
    for at_k5 in (0, 128, 256, 512, 1024, 2048, 4096):
        for margin in (0.0, 0.05, 0.10):
            g, w = summary(evaluate(cases, shapes, at_k5, margin))
            mark = "  (current)" if (at_k5, margin) == CURRENT else ""
            print(f"{at_k5:9d} {margin:7.2f} {g:8.4f} {w:7.3f}{mark}")
    print("\ncurrent rule, cases more than 3% off the best measured:")
    for key, c, b in evaluate(cases, shapes, *CURRENT):
        if c["ms"] > 1.03 * b["ms"]:
            print(f"  {' '.join(key):40s} np {c['np']:2d} {c['ms']:.4f} ms, best np {b['np']:2d} {b['ms']:.4f} ms "
                  f"({c['ms'] / b['ms']:.3f}; splits {c['splits']} / {b['splits']})")


if __name__ == "__main__":
    main()
