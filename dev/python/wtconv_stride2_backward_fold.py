#!/usr/bin/env python3
"""Checks, in float64 on the CPU, the algebra of the stride-2 backward's fold (docs/wtconv.md, note 124,
last item, and note 125): identities 2 and 3 below are what the backward base kernel runs at
stride 2 (wtconv_fold.h: folded_dx_tap, folded_corr_tap), on the spread dy for now; a compact-grid
kernel would run all three without the spread.

At stride 2 the backward spreads dy onto the full grid (D, zeros between its samples) and runs the
stride-1 backward on D: unfolded, 4 k^2 multiply-adds per pixel for dx and the correlations. But every
2 x 2 block of D holds one sample, at its first pixel, so:

  1. G_1 = Haar(D) is dy / 2 in every subband.
  2. dx = synthesis of dX'_t, t = 0..3, where dX'_t = conv_T(dy / 2, s_1t W_1t) + B_t (+ the deeper
     levels' dX_1 at LL), and B_t = Haar(dx_base)_t is itself a k x k conv of dy, with filter U_t
     folded from s_0 W_0 (its taps gathered by pixel parity, as the forward's V_t are). So dx is a
     level-1 backward over the compact grid: four k x k filters on one input per coefficient, k^2
     multiply-adds per pixel where the full grid takes 2 k^2.
  3. dW_0 is a linear combination of the level-1 correlations C_t = corr(Y_1t, dy), which dW_1
     needs anyway: dW_0[a][b] = 1/2 sum_t sgn(t, p, q) C_t[u][v] with a - r = 2 (u - r) + p.
     So the correlations take 4 k^2 per coefficient (k^2 per pixel) where the full grid takes 2 k^2.

The reference is autograd through the literal module (base conv + one Haar level, L = 1, stride 2
as the subsample of the stride-1 output); the check prints the largest relative difference of dx,
dW_0 and dW_1 per case and exits 1 if any exceeds 1e-12.

  python3 dev/python/wtconv_stride2_backward_fold.py
"""
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from winconv.haar import haar_analysis, haar_synthesis  # noqa: E402  (the module's own Haar pair)

torch.set_default_dtype(torch.float64)


def sgn(t, p, q):
    """synth_child's sign of subband t at pixel parity (p, q): S1 by row, S2 by column."""
    return (-1.0 if (t & 1) and p else 1.0) * (-1.0 if (t & 2) and q else 1.0)


def dwconv(x, w):
    """Depthwise 'same' correlation, x (B, C, h, w), w (C, k, k)."""
    k = w.shape[-1]
    return F.conv2d(x, w.unsqueeze(1), padding=k // 2, groups=x.shape[1])


def forward(x, w0, b0, s0, w1, s1):
    """L = 1 WTConv2d at stride 2: the stride-1 output subsampled (odd sizes zero-padded, cropped)."""
    B, C, H, W = x.shape
    y1 = haar_analysis(x)  # (B, C, 4, h1, w1), x zero-padded to even sizes
    z1 = torch.stack([dwconv(y1[:, :, t], w1[:, t]) * s1[:, t].view(1, C, 1, 1) for t in range(4)], 2)
    wave = haar_synthesis(z1, H, W)
    base = (dwconv(x, w0) + b0.view(1, C, 1, 1)) * s0.view(1, C, 1, 1)
    return (base + wave)[..., ::2, ::2]


def folded_dx_filters(w0, s0, k):
    """U_t (C, 4, k, k): B_t(m, n) = sum_{i, j} U_t[i][j] dy(m + i - r, n + j - r), B = Haar(dx_base).

    dx_base(2m + p, 2n + q) = s0 sum_{a, b} W0[a][b] D(2m + p - a + r, 2n + q - b + r), nonzero only
    where p - a + r is even: dy(m + i - r, ...) with i - r = (p - a + r) / 2."""
    C, r = w0.shape[0], k // 2
    U = torch.zeros(C, 4, k, k)
    for t in range(4):
        for p in range(2):
            for q in range(2):
                for a in range(k):
                    if (p - a + r) % 2:
                        continue
                    for b in range(k):
                        if (q - b + r) % 2:
                            continue
                        i, j = (p - a + r) // 2 + r, (q - b + r) // 2 + r
                        U[:, t, i, j] += 0.5 * sgn(t, p, q) * s0 * w0[:, a, b]
    return U


def compact_backward(x, dy, w0, s0, w1, s1):
    """dx, dW_0 and dW_1 from the compact dy (no spread), by identities 1-3 above."""
    B, C, H, W = x.shape
    k, r = w0.shape[-1], w0.shape[-1] // 2
    y1 = haar_analysis(x)
    h1, w1g = y1.shape[-2:]
    assert dy.shape[-2:] == (h1, w1g), "at stride 2 dy's grid is the level-1 grid"
    U = folded_dx_filters(w0, s0, k)
    # conv_T with a 'same' correlation's filter is the correlation with the flipped filter.
    dXp = torch.stack([dwconv(dy / 2, torch.flip(w1[:, t], (-2, -1))) * s1[:, t].view(1, C, 1, 1)
                       + dwconv(dy, U[:, t]) for t in range(4)], 2)
    dx = haar_synthesis(dXp, H, W)
    # C_t[u][v] = sum_{m, n} Y_1t(m + u - r, n + v - r) dy(m, n), per channel.
    ypad = F.pad(y1, (r, r, r, r))
    Ct = torch.zeros(C, 4, k, k)
    for u in range(k):
        for v in range(k):
            Ct[:, :, u, v] = (ypad[..., u:u + h1, v:v + w1g] * dy.unsqueeze(2)).sum((0, 3, 4))
    gw1 = Ct / 2 * s1.view(C, 4, 1, 1)  # G_1t = dy / 2
    gw0 = torch.zeros(C, k, k)
    for a in range(k):
        for b in range(k):
            pa, pb = (a - r) % 2, (b - r) % 2
            u, v = (a - r - pa) // 2 + r, (b - r - pb) // 2 + r
            gw0[:, a, b] = s0 * sum(0.5 * sgn(t, pa, pb) * Ct[:, t, u, v] for t in range(4))
    return dx, gw0, gw1


def check(B, C, H, W, k, seed):
    g = torch.Generator().manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=g)
    x = rnd(B, C, H, W).requires_grad_()
    w0, b0, s0 = rnd(C, k, k).requires_grad_(), rnd(C), rnd(C)
    w1, s1 = rnd(C, 4, k, k).requires_grad_(), rnd(C, 4)
    y = forward(x, w0, b0, s0, w1, s1)
    dy = rnd(*y.shape)
    y.backward(dy)
    dx, gw0, gw1 = compact_backward(x.detach(), dy, w0.detach(), s0, w1.detach(), s1)
    rel = lambda a, b: ((a - b).abs().max() / b.abs().max().clamp_min(1e-300)).item()
    return rel(dx, x.grad), rel(gw0, w0.grad), rel(gw1, w1.grad)


def main():
    worst = 0.0
    for i, (B, C, H, W, k) in enumerate([(2, 3, 9, 7, 3), (1, 2, 6, 11, 5), (2, 2, 13, 10, 7), (1, 1, 1, 1, 3),
                                          (2, 1, 2, 3, 1), (1, 2, 37, 14, 7), (1, 2, 18, 61, 9), (1, 1, 5, 5, 15)]):
        e = check(B, C, H, W, k, 124 + i)
        worst = max(worst, *e)
        print(f"{B}x{C}x{H}x{W} k{k}: dx {e[0]:.1e}  dW0 {e[1]:.1e}  dW1 {e[2]:.1e}")
    print(f"worst {worst:.1e}")
    return 0 if worst <= 1e-12 else 1


if __name__ == "__main__":
    sys.exit(main())
