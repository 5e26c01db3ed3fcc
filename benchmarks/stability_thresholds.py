"""Regenerate the stability-threshold table of the README (dynamics section).

For each momentum mu and lag K_ref: the exact discrete threshold a* (bisection on the
spectral radius; boundary locus beyond K_ref = 128), the closed-form threshold (1 - mu)/K_ref,
their ratio, and the agreement of the two exact routes. Also times the vectorised spectral
radius, and at long lags the root count against the companion eigenvalues it replaces there
(the same radius and regime). Usage:

    .venv/bin/python benchmarks/stability_thresholds.py
"""

from __future__ import annotations

import time

import numpy as np

from bayes_grpo.dynamics import (
    boundary_locus_threshold,
    closed_form_threshold,
    exact_threshold,
    spectral_radius,
)
from bayes_grpo.dynamics.stability import (
    _characteristic_roots,
    _dominant_roots,
    _regime_of_roots,
    characteristic_coefficients,
)

MOMENTA = (0.0, 0.5, 0.9, 0.99)
LAGS = (1, 2, 5, 10, 20, 50, 100, 1000)


def main() -> None:
    print("| mu | K_ref | exact a* | closed form (1-mu)/K_ref | exact / closed | a* K_ref |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    for mu in MOMENTA:
        for lag in LAGS:
            ex = float(exact_threshold(mu, lag))
            cf = float(closed_form_threshold(mu, lag))
            if lag <= 100:
                bis = float(exact_threshold(mu, lag, method="bisection"))
                worst = max(worst, abs(bis / float(boundary_locus_threshold(mu, lag)) - 1.0))
            print(f"| {mu:g} | {lag} | {ex:.6g} | {cf:.6g} | {ex / cf:.4f} | {ex * lag:.5f} |")
    print(f"\nmax relative gap, eigenvalue bisection vs boundary locus (K_ref <= 100): {worst:.2e}")
    a = np.random.default_rng(0).lognormal(np.log(0.01), 0.5, 4000)
    for lag in (2, 10, 50):
        start = time.perf_counter()
        spectral_radius(a, 0.9, lag)
        print(
            f"spectral radius of 4000 settings at K_ref={lag}: {time.perf_counter() - start:.3f} s"
        )
    print("\n| K_ref | companion eigenvalues (s) | root count (s) | radius (count) | rel. gap | regimes |")
    print("|---|---|---|---|---|---|")
    for lag in (128, 256, 512, 1000, 2000, 4096, 20000, 100000):
        a, mu = 0.5 * float(exact_threshold(0.9, lag)), 0.9
        start = time.perf_counter()
        fast = _dominant_roots(a, mu, lag)[None, :]
        t_fast = time.perf_counter() - start
        t_eig, gap, regimes = float("nan"), float("nan"), str(_regime_of_roots(fast)[0])
        if lag <= 2000:
            c = characteristic_coefficients([a], [mu], lag)[0]
            companion = np.eye(c.size, k=-1)
            companion[0, :] = -c
            start = time.perf_counter()
            roots = np.linalg.eigvals(companion)[None, :]
            t_eig = time.perf_counter() - start
            gap = abs(np.max(np.abs(fast)) / np.max(np.abs(roots)) - 1.0)
            regimes = f"{_regime_of_roots(roots)[0]} / {regimes}"
        radius = float(np.max(np.abs(_characteristic_roots(np.array([a]), np.array([mu]), lag))))
        print(f"| {lag} | {t_eig:.3f} | {t_fast:.3f} | {radius:.12f} | {gap:.1e} | {regimes} |")


if __name__ == "__main__":
    main()
