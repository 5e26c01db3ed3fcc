"""Regenerate the stability-threshold table of the README (dynamics section).

For each momentum mu and lag K_ref: the exact discrete threshold a* (bisection on the
spectral radius; boundary locus beyond K_ref = 128), the closed-form threshold (1 - mu)/K_ref,
their ratio, and the agreement of the two exact routes. Also times the vectorised spectral
radius. Usage:

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


if __name__ == "__main__":
    main()
