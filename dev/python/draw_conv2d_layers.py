"""Draws a random set of conv2d layers (the rule of bench/layers_unseen.csv, written down as code).

C in {3, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512}; K in the same set without 3; R = S in
{1, 3, 5, 7} with 3 twice as likely; stride 2 one time in three; padding 0 or R / 2; H and W in
7..160; a draw is kept when its output is at least 1 x 1 and a batch of 32 costs 2e9 to 2e11
FLOPs, so that no layer is launch-bound by construction nor takes seconds at batch 128.

Usage: python3 dev/python/draw_conv2d_layers.py SEED [COUNT] [PREFIX] > bench/layers_X.csv
(prints the header and the rows; write the file's comment by hand).
"""
import random
import sys

CHANNELS = [3, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512]


def out_size(n, r, stride, pad):
    return (n + 2 * pad - r) // stride + 1


def draw(seed, count, prefix):
    rng = random.Random(seed)
    rows = []
    while len(rows) < count:
        c = rng.choice(CHANNELS)
        k = rng.choice(CHANNELS[1:])
        r = rng.choice([1, 3, 3, 5, 7])
        stride = 2 if rng.random() < 1 / 3 else 1
        pad = r // 2 if rng.random() < 0.5 else 0
        h, w = rng.randint(7, 160), rng.randint(7, 160)
        p, q = out_size(h, r, stride, pad), out_size(w, r, stride, pad)
        if p < 1 or q < 1:
            continue
        if not 2e9 <= 2 * 32 * k * p * q * c * r * r <= 2e11:
            continue
        rows.append(f"{prefix}{len(rows)},{c},{h},{w},{k},{r},{r},{stride},{pad}")
    return rows


if __name__ == "__main__":
    seed = int(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    prefix = sys.argv[3] if len(sys.argv) > 3 else "y"
    print("name,C,H,W,K,R,S,stride,pad")
    print("\n".join(draw(seed, count, prefix)))
