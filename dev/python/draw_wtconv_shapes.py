"""Draws a random set of WTConv benchmark shapes (the rule of bench/wtconv_shapes_unseen7.csv).

B in {8, 16, 32, 64, 128}; C in {64, 96, ..., 1024}; H = W in {7, 14, 28, 56, 112} one time in
two, else H and W in 7..128; kernel size in {3, 5, 7} (the sizes the official fused module runs);
levels 1-5; stride 2 one time in five; B halved while B*C*H*W > 6e7 and doubled while below 2e6,
so that no shape is host-bound by construction nor takes seconds.

Usage: python3 dev/python/draw_wtconv_shapes.py SEED [COUNT] [PREFIX] > bench/wtconv_shapes_X.csv
(prints the header and the rows; write the file's comment by hand).
"""
import random
import sys


def draw(seed, count, prefix):
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        b = rng.choice([8, 16, 32, 64, 128])
        c = rng.choice([64, 96, 128, 192, 256, 384, 512, 768, 1024])
        if rng.random() < 0.5:
            h = w = rng.choice([7, 14, 28, 56, 112])
        else:
            h, w = rng.randint(7, 128), rng.randint(7, 128)
        k = rng.choice([3, 5, 7])
        levels = rng.randint(1, 5)
        stride = 2 if rng.random() < 0.2 else 1
        while b * c * h * w > 6e7 and b > 1:
            b //= 2
        while b * c * h * w < 2e6:
            b *= 2
        rows.append(f"{prefix}{i}_b{b}c{c}_{h}x{w}_k{k}L{levels}s{stride},{b},{c},{h},{w},{k},{levels},{stride}")
    return rows


if __name__ == "__main__":
    seed = int(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    prefix = sys.argv[3] if len(sys.argv) > 3 else "r"
    print("name,B,C,H,W,kernel_size,wt_levels,stride")
    print("\n".join(draw(seed, count, prefix)))
