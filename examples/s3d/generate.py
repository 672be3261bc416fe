#!/usr/bin/env python3
"""Writes a synthetic S3D-like 3-D turbulent combustion field to an HDF5 file.

S3D (the combustion code of the MLOC paper's experiments) writes, per time
step, double-precision 3-D fields: temperature, velocities, species. This
script makes one time step of a premixed flame in a turbulent box:

* turbulence: a sum of M random Fourier modes on the periodic box (integer
  wave vectors, random directions and phases) whose amplitudes follow the
  Kolmogorov spectrum E(k) ~ k^(-5/3) from the box scale down to a quarter of
  the grid's Nyquist wavenumber; its two quadrature parts give two fields with
  the same spectrum, one wrinkling the flame, one the velocity fluctuation;
* the flame: a front normal to axis 0 (x), displaced by the first field; the
  progress variable c = (1 + tanh(2 d / delta)) / 2 of the signed distance d
  goes from 0 (fresh gas) to 1 (burnt gas) over the flame thickness delta;
* temperature T = Tu + (Tb - Tu) c + small turbulent fluctuations (K);
* velocity u = U + (Tb/Tu - 1) S_L c + u': the inflow, the acceleration of
  the gas by thermal expansion across the flame, and the turbulence (m/s).

    /temperature   float64 (N, N, N), K
    /u             float64 (N, N, N), m/s, the x component of the velocity

Size: --scale F gives N = round(512 F) (at least 16): the default, --scale 1,
is 512^3 float64 = 1 GiB per variable; --scale 0.25 is 128^3 (16 MiB each),
--scale 0.125 is 64^3 (2 MiB each). The mode sum is evaluated slab by slab
(one complex matrix product per slab) and written chunked (shuffle+gzip), so
memory stays at a few hundred MiB at the default size.
"""
import argparse
import math
import sys
import time

import h5py
import numpy as np

PAPER_N = 512
BOX_M = 0.012           # a 12 mm periodic box, the size of an S3D DNS domain
T_UNBURNT = 800.0       # K, preheated lean premixed mixture (S3D's Bunsen flames)
T_BURNT = 2200.0        # K
S_L = 1.8               # m/s, laminar flame speed
U_INFLOW = 10.0         # m/s
U_RMS = 2.5             # m/s, turbulence intensity
WRINKLE = 0.12          # flame displacement amplitude, in box lengths


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("output", help="HDF5 file to write (replaced if it exists)")
    p.add_argument("--scale", type=float, default=1.0,
                   help="N = round(512 * scale) points per axis (default 1: 512^3, 1 GiB per variable)")
    p.add_argument("--modes", type=int, default=128, help="random Fourier modes (default 128)")
    p.add_argument("--seed", type=int, default=2012, help="random seed (default 2012)")
    p.add_argument("--gzip", type=int, default=4, choices=range(0, 10), metavar="0..9",
                   help="deflate level, 0 = uncompressed chunks (default 4)")
    p.add_argument("-q", "--quiet", action="store_true")
    args = p.parse_args(argv)
    if not args.scale > 0:
        p.error("--scale must be positive")
    if not 1 <= args.modes <= 4096:
        p.error("--modes must be in 1..4096")
    return args


def grid_size(scale):
    return max(16, int(round(PAPER_N * scale)))


def random_modes(n, m, rng):
    """M integer wave vectors (cycles per box) with |k| log-uniform in [1, n/8],
    random directions; complex amplitudes with a -5/3 energy spectrum."""
    kmax = max(2.0, n / 8)  # a quarter of Nyquist (n/2 cycles per box)
    kmag = np.exp(rng.uniform(0.0, math.log(kmax), m))
    direction = rng.normal(size=(m, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    k = np.rint(direction * kmag[:, None])
    k[np.all(k == 0, axis=1)] = (1, 0, 0)
    kn = np.linalg.norm(k, axis=1)
    # energy E(k) dk with dk ~ k (log-uniform sampling): amplitude^2 ~ k^(-5/3) * k
    amp = np.sqrt(kn ** (-5.0 / 3.0) * kn)
    amp /= math.sqrt(0.5 * np.sum(amp ** 2))  # unit rms for each quadrature part
    phase = np.exp(1j * rng.uniform(0, 2 * math.pi, m))
    return k, amp * phase


def main(argv=None):
    args = parse_args(argv)
    n = grid_size(args.scale)
    rng = np.random.default_rng(args.seed)
    k, a = random_modes(n, args.modes, rng)
    dx = BOX_M / n
    x = np.arange(n) * dx
    # exp(i k.x) factorises: field[i,j,l] = sum_m a_m ex[i,m] ey[j,m] ez[l,m]
    ex, ey, ez = (np.exp(2j * math.pi * np.outer(np.arange(n) / n, k[:, d])) for d in range(3))
    delta = max(0.4e-3, 3 * dx)  # flame thickness: 0.4 mm, at least 3 grid points
    slab = min(n, 32)
    chunks = (slab, min(n, 64), min(n, 64))
    shape = (n, n, n)
    total = 2 * n ** 3 * 8
    started = time.monotonic()
    if not args.quiet:
        print(f"generate: {args.output} /temperature and /u, {n}x{n}x{n} float64 "
              f"({total / 2**20:.0f} MiB in all), {args.modes} Fourier modes, chunks "
              f"{'x'.join(map(str, chunks))}", flush=True)
    with h5py.File(args.output, "w") as f:
        f.attrs["title"] = "synthetic S3D-like turbulent premixed flame (MLOC paper's S3D data)"
        f.attrs["generator"] = "mmfs examples/s3d/generate.py"
        f.attrs["grid_spacing_m"] = dx
        f.attrs["dims"] = "x,y,z"
        filters = dict(compression="gzip", compression_opts=args.gzip, shuffle=True) if args.gzip else {}
        temp = f.create_dataset("temperature", shape=shape, dtype="<f8", chunks=chunks, **filters)
        temp.attrs.update(units="K", long_name="temperature", dims="x,y,z",
                          T_unburnt=T_UNBURNT, T_burnt=T_BURNT, flame_thickness_m=delta)
        u = f.create_dataset("u", shape=shape, dtype="<f8", chunks=chunks, **filters)
        u.attrs.update(units="m/s", long_name="x velocity", dims="x,y,z",
                       u_inflow=U_INFLOW, u_rms=U_RMS, laminar_flame_speed=S_L)
        lo, hi = math.inf, -math.inf
        for i0 in range(0, n, slab):
            i1 = min(n, i0 + slab)
            # (slab*n, M) @ (M, n): one BLAS product gives the whole slab
            left = (ex[i0:i1, None, :] * ey[None, :, :] * a).reshape(-1, args.modes)
            field = (left @ ez.T).reshape(i1 - i0, n, n)
            wrinkle, turb = field.real, field.imag
            # signed distance to the wrinkled front (positive on the burnt side, x > front)
            d = x[i0:i1, None, None] - (0.5 * BOX_M + WRINKLE * BOX_M * wrinkle)
            c = 0.5 * (1.0 + np.tanh(2.0 * d / delta))
            t_field = T_UNBURNT + (T_BURNT - T_UNBURNT) * c + 12.0 * turb * (1.0 - c) + 25.0 * turb * c
            u_field = U_INFLOW + (T_BURNT / T_UNBURNT - 1.0) * S_L * c + U_RMS * turb
            temp[i0:i1] = t_field
            u[i0:i1] = u_field
            lo, hi = min(lo, float(t_field.min())), max(hi, float(t_field.max()))
            if not args.quiet and sys.stderr.isatty():
                print(f"\r  {i1}/{n} planes", end="", file=sys.stderr, flush=True)
    if not args.quiet:
        if sys.stderr.isatty():
            print(file=sys.stderr)
        print(f"generate: wrote {total / 2**20:.0f} MiB in {time.monotonic() - started:.1f} s; "
              f"temperature {lo:.0f}..{hi:.0f} K", flush=True)


if __name__ == "__main__":
    main()
