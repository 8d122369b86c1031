"""A plain numpy implementation of dp_avgmix's mixing, for comparison.

Same shape and steps as release/avgmix with Poisson sampling: n rows of d
features in [0, 1] and K classes (one-hot labels), rows clipped to L2 norm
Cx = Cy = 1, T outputs, each the sum of a Poisson subset of the rows (rate
q = m/n, drawn by geometric gaps between included rows) plus Gaussian
noise, divided by the fixed m. Sums in float64, as release/avgmix forms them.
It is not private (numpy's generator is not a secure sampler, and the noise
is not on a grid); it is the speed of the arithmetic alone, in memory, with
no database and no accounting.

Run with Debian's numpy (apt-get install python3-numpy):

    /usr/bin/python3 release/avgmix/testdata/numpy_avgmix.py [n d K m]

It prints the seconds the mixing and noise took (data generation excluded).
"""
import sys
import time

import numpy as np


def poisson_subsets(n, q, b, rng):
    """b independent Poisson subsets of range(n) at rate q, by geometric gaps:
    the concatenated row indices and each subset's size."""
    cap = int(n * q + 8 * (n * q) ** 0.5 + 32)
    while True:
        pos = np.cumsum(rng.geometric(q, size=(b, cap)), axis=1) - 1
        if (pos[:, -1] >= n).all():  # every subset ended within cap gaps
            break
        cap *= 2
    mask = pos < n
    return pos[mask], mask.sum(axis=1)


def mix(x, y, t, m, sigma_x, sigma_y, rng, batch=256):
    n, d = x.shape
    k = y.shape[1]
    q = m / n
    out_x = np.empty((t, d), dtype=np.float32)
    out_y = np.empty((t, k), dtype=np.float32)
    buf = np.empty((0, d), dtype=np.float32)  # gathered rows, reused across batches
    for start in range(0, t, batch):
        b = min(batch, t - start)
        idx, sizes = poisson_subsets(n, q, b, rng)
        offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        nz = sizes > 0
        sx = np.zeros((b, d))
        sy = np.zeros((b, k))
        if len(idx) > len(buf):
            buf = np.empty((2 * len(idx), d), dtype=np.float32)
        g = np.take(x, idx, axis=0, out=buf[:len(idx)])
        sx[nz] = np.add.reduceat(g, offsets[nz], axis=0, dtype=np.float64)
        sy[nz] = np.add.reduceat(y[idx], offsets[nz], axis=0, dtype=np.float64)
        sx += rng.standard_normal((b, d)) * sigma_x
        sy += rng.standard_normal((b, k)) * sigma_y
        out_x[start:start + b] = sx / m
        out_y[start:start + b] = sy / m
    return out_x, out_y


def main():
    n, d, k, m = (int(a) for a in sys.argv[1:5]) if len(sys.argv) >= 5 else (60000, 784, 10, 64)
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, size=(n, d), dtype=np.uint8).astype(np.float32) / 255
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x /= np.maximum(norms, 1.0)  # clip to norm 1
    y = np.eye(k, dtype=np.float32)[np.arange(n) % k]
    start = time.perf_counter()
    rx, ry = mix(x, y, n, m, sigma_x=0.9, sigma_y=0.9, rng=rng)
    secs = time.perf_counter() - start
    print(f"numpy mixing: n = T = {n}, d = {d}, K = {k}, m = {m}: {secs:.2f} s ({rx.shape[0]} rows)")


if __name__ == "__main__":
    main()
