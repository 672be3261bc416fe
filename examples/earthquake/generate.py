#!/usr/bin/env python3
"""Writes a synthetic 4-D earthquake ground-motion field to an HDF5 file.

The dataset imitates the one of the MultiMap paper's §5.4: the ground motion of
a 38 km x 38 km x 14 km slice of earth, sampled on a 64x64x64 grid for 2000
time steps, stored as a 4-D array (T, X, Y, Z) — time first, then the two
horizontal axes, then depth (z = 0 is the surface). Only the physics is made
up: a point source at 8 km depth radiates a P and an S wave (Ricker wavelets)
through a layered velocity model (soft sediments over stiffer rock); the
wavefronts spread spherically (amplitude ~ 1/r), are attenuated by the
layers' quality factor Q (exp(-pi f t*)), and their travel times follow
straight rays through the layers (t = integral of slowness along the ray),
so the fronts are faster at depth and slow down in the sediments near the
surface. The S wave carries a four-lobed strike-slip radiation pattern, and
the 1 km of sediments under the surface traps it: echoes between the free
surface and the sediments' floor make the surface ring for seconds after the
direct waves have passed (as in the Los Angeles basin).

    /velocity   float32 (T, N, N, N), m/s, the vertical ground velocity

with attributes: units, dt, t0, grid_spacing_m, origin_m, source_location_m,
source_index, the layer model, and `dims` ("t,x,y,z").

Size: --scale F multiplies the number of time steps (T = round(2000 F), at
least 8); the 64^3 spatial grid stays the paper's (--grid N changes it). The
default, --scale 1, is the paper's 2000x64x64x64 float32 = 2 GiB;
--scale 0.1 is 200x64x64x64 (200 MiB); --scale 0.01 is 20x64x64x64 (20 MiB).
The simulated duration is always 20 s, so smaller scales sample it coarser.

The file is written slab by slab along time (chunked, shuffle+gzip), so memory
stays at a few tens of MiB whatever the scale.
"""
import argparse
import math
import sys
import time

import h5py
import numpy as np

PAPER_SHAPE = (2000, 64, 64, 64)
EXTENT_M = (38_000.0, 38_000.0, 14_000.0)  # x, y, depth (MultiMap §5.4)
DURATION_S = 20.0
F0_HZ = 0.7           # dominant frequency of the source wavelet
T_ONSET_S = 1.5 / F0_HZ

# Layered model, top of each layer (m) and its P/S velocities (m/s) and Q.
LAYER_TOP_M = np.array([0.0, 1_000.0, 4_000.0, 9_000.0])
LAYER_VP = np.array([2_200.0, 4_200.0, 5_800.0, 6_600.0])
LAYER_VS = np.array([900.0, 2_300.0, 3_350.0, 3_800.0])
LAYER_QS = np.array([40.0, 150.0, 400.0, 600.0])  # Q_P taken as 2 Q_S
# The sediment layer traps S waves: echoes between the free surface and the
# layer's floor every 2 H / Vs, each weaker by REVERB_R (basin "ringing").
REVERB_ECHOES = 4
REVERB_R = 0.55


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="See the module docstring (or examples/README.md) for the physics.")
    p.add_argument("output", help="HDF5 file to write (replaced if it exists)")
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiplies the paper's 2000 time steps (default 1: 2000x64x64x64, 2 GiB)")
    p.add_argument("--grid", type=int, default=64, help="points along each spatial axis (default 64)")
    p.add_argument("--dataset", default="/velocity", help="dataset path (default /velocity)")
    p.add_argument("--gzip", type=int, default=4, choices=range(0, 10), metavar="0..9",
                   help="deflate level, 0 = uncompressed chunks (default 4)")
    p.add_argument("-q", "--quiet", action="store_true")
    args = p.parse_args(argv)
    if not args.scale > 0:
        p.error("--scale must be positive")
    if not 4 <= args.grid <= 1024:
        p.error("--grid must be in 4..1024")
    return args


def shape_for(scale, grid):
    return (max(8, int(round(PAPER_SHAPE[0] * scale))), grid, grid, grid)


def layer_of(z):
    return np.clip(np.searchsorted(LAYER_TOP_M, z, side="right") - 1, 0, len(LAYER_TOP_M) - 1)


def depth_integral(values_per_layer, z_max, n=20_000):
    """Tabulates I(z) = integral_0^z values(z') dz' on a fine depth grid."""
    z = np.linspace(0.0, z_max, n)
    f = values_per_layer[layer_of(z)]
    integral = np.concatenate([[0.0], np.cumsum(0.5 * (f[1:] + f[:-1]) * np.diff(z))])
    return z, integral


def straight_ray(z_table, integral, f_source, zs, z, dist):
    """Integral of f along the straight ray from depth zs to depth z of length dist.

    Along a straight ray ds = dist/|dz| dz, so the integral is
    dist * (I(z) - I(zs)) / (z - zs); for a horizontal ray it is dist * f(zs)."""
    dz = z - zs
    di = np.interp(z, z_table, integral) - np.interp(zs, z_table, integral)
    flat = np.abs(dz) < 1e-3
    return np.where(flat, dist * f_source, dist * di / np.where(flat, 1.0, dz))


def precompute(shape):
    """Per grid point: P and S travel times (s) and amplitudes (m/s), float32 (N,N,N)."""
    _, nx, ny, nz = shape
    dx, dy, dz = (EXTENT_M[0] / nx, EXTENT_M[1] / ny, EXTENT_M[2] / nz)
    x = (np.arange(nx) + 0.5) * dx
    y = (np.arange(ny) + 0.5) * dy
    z = (np.arange(nz) + 0.5) * dz
    # The source: 8 km deep, a little off the centre of the area.
    src = np.array([0.43 * EXTENT_M[0], 0.56 * EXTENT_M[1], 8_000.0])
    X, Y, Z = np.meshgrid(x, y, z, indexing="ij")
    hx, hy, vz = X - src[0], Y - src[1], Z - src[2]
    h = np.hypot(hx, hy)
    r = np.maximum(np.sqrt(h * h + vz * vz), 0.5 * min(dx, dy, dz))
    src_layer = layer_of(np.array([src[2]]))[0]
    out = {}
    for wave, v, q in (("P", LAYER_VP, 2 * LAYER_QS), ("S", LAYER_VS, LAYER_QS)):
        zt, slowness = depth_integral(1.0 / v, EXTENT_M[2])
        _, tstar_i = depth_integral(1.0 / (v * q), EXTENT_M[2])
        t = straight_ray(zt, slowness, 1.0 / v[src_layer], src[2], Z, r)
        tstar = straight_ray(zt, tstar_i, 1.0 / (v[src_layer] * q[src_layer]), src[2], Z, r)
        # geometric spreading (1/r, normalised at 1 km) and anelastic attenuation
        amp = (1_000.0 / r) * np.exp(-math.pi * F0_HZ * tstar)
        if wave == "P":   # vertical component of a radial motion: cos of the incidence angle
            amp *= -vz / r * 0.05
        else:             # SV: sin of the incidence angle, strike-slip lobes in azimuth
            amp *= h / r * np.cos(2 * np.arctan2(hy, hx)) * 0.15
        # the sediments amplify the shaking (impedance contrast, ~ sqrt(rho v) ratio)
        amp *= np.sqrt(v[-1] / v[layer_of(Z)])
        out[wave] = (t.astype(np.float32), amp.astype(np.float32))
    spacing = (dx, dy, dz)
    src_index = tuple(int(min(n - 1, s // d)) for s, d, n in zip(src, spacing, (nx, ny, nz)))
    return out, spacing, src, src_index


def ricker(tau):
    a = np.float32(math.pi * F0_HZ) ** 2 * tau * tau
    return (np.float32(1) - np.float32(2) * a) * np.exp(-a)


def main(argv=None):
    args = parse_args(argv)
    shape = shape_for(args.scale, args.grid)
    nt = shape[0]
    dt = DURATION_S / nt
    waves, spacing, src, src_index = precompute(shape)
    chunks = (min(nt, 8), min(shape[1], 32), min(shape[2], 32), min(shape[3], 32))
    started = time.monotonic()
    itemsize = 4
    total = math.prod(shape) * itemsize
    if not args.quiet:
        print(f"generate: {args.output}:{args.dataset} {'x'.join(map(str, shape))} float32 "
              f"({total / 2**20:.0f} MiB), dt {dt:.4g} s, chunks {'x'.join(map(str, chunks))}", flush=True)
    with h5py.File(args.output, "w") as f:
        f.attrs["title"] = "synthetic earthquake ground motion (MultiMap paper, section 5.4)"
        f.attrs["generator"] = "mmfs examples/earthquake/generate.py"
        filters = dict(compression="gzip", compression_opts=args.gzip, shuffle=True) if args.gzip else {}
        ds = f.create_dataset(args.dataset, shape=shape, dtype="<f4", chunks=chunks, **filters)
        ds.attrs["units"] = "m/s"
        ds.attrs["quantity"] = "vertical ground velocity"
        ds.attrs["dims"] = "t,x,y,z"
        ds.attrs["dt"] = dt
        ds.attrs["t0"] = 0.0
        ds.attrs["grid_spacing_m"] = np.array(spacing)
        ds.attrs["origin_m"] = np.zeros(3)
        ds.attrs["source_location_m"] = src
        ds.attrs["source_index"] = np.array(src_index, dtype=np.int64)
        ds.attrs["source_f0_hz"] = F0_HZ
        ds.attrs["layer_top_m"] = LAYER_TOP_M
        ds.attrs["layer_vp_m_s"] = LAYER_VP
        ds.attrs["layer_vs_m_s"] = LAYER_VS
        # Slab by slab along time: one slab is `chunks[0]` time steps (8 x 1 MiB at 64^3).
        tp, ap = waves["P"]
        ts, as_ = waves["S"]
        # Reverberations exist only inside the sediments (the top layer).
        nsed = int(np.count_nonzero((np.arange(shape[3]) + 0.5) * spacing[2] < LAYER_TOP_M[1]))
        delay = np.float32(2 * LAYER_TOP_M[1] / LAYER_VS[0])
        ts_sed, as_sed = ts[..., :nsed], as_[..., :nsed]
        slab = np.empty((chunks[0],) + shape[1:], dtype=np.float32)
        peak = 0.0
        for t0 in range(0, nt, chunks[0]):
            n = min(chunks[0], nt - t0)
            for i in range(n):
                t = np.float32((t0 + i) * dt - T_ONSET_S)
                np.multiply(ap, ricker(t - tp), out=slab[i])
                slab[i] += as_ * ricker(t - ts)
                for k in range(1, REVERB_ECHOES + 1):
                    slab[i, ..., :nsed] += np.float32(REVERB_R ** k) * as_sed * ricker(t - ts_sed - k * delay)
            ds[t0:t0 + n] = slab[:n]
            peak = max(peak, float(np.abs(slab[:n]).max()))
            if not args.quiet and sys.stderr.isatty():
                print(f"\r  {t0 + n}/{nt} time steps", end="", file=sys.stderr, flush=True)
        ds.attrs["peak_abs_m_s"] = peak
    if not args.quiet:
        if sys.stderr.isatty():
            print(file=sys.stderr)
        print(f"generate: wrote {total / 2**20:.0f} MiB in {time.monotonic() - started:.1f} s; "
              f"source at grid index {src_index}, peak |v| {peak:.3g} m/s", flush=True)


if __name__ == "__main__":
    main()
