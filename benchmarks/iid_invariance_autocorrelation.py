"""How often the i.i.d. G-invariance Bayes factor calls a G-invariant run set G-dependent when
the residuals are autocorrelated (a run wandering about its curve, as the SDE's do).

The exact toy Bayes factor of ``tests/test_invariance.py`` (reward = mean + offset[G] + noise,
mean ~ N(0, 1), offsets ~ N(0, sd) under H1, unit noise under the i.i.d. likelihood): Gaussian
marginal likelihoods, no sampling. Each set: 2 runs at each of G 4 and 16 sharing one mean
(G-invariant), ``--steps`` steps each, noise AR(1) with lag-1 correlation ``rho`` and unit
variance. Prints per ``rho`` the share of sets decisive for G-dependence (log BF01 < -3, the
verdict's threshold), decisive for invariance (> 3), the median log BF01, the mean lag-1 r of the
residuals and the share above the white-noise band (where ``invariance_check`` warns).

    .venv/bin/python benchmarks/iid_invariance_autocorrelation.py   # ~20 s
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from bayes_grpo.checks.ppc import white_noise_band


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--runs-per-g", type=int, default=2)
    p.add_argument("--sets", type=int, default=400)
    p.add_argument("--offset-sd", type=float, default=0.5)
    p.add_argument("--rho", type=float, nargs="+", default=[0.0, 0.3, 0.6, 0.8, 0.9, 0.95])
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    groups = [0] * args.runs_per_g + [1] * args.runs_per_g
    n_runs, n = len(groups), args.steps
    size = n * n_runs
    z = np.eye(2)[np.repeat(groups, n)]
    base = np.eye(size) + np.ones((size, size))
    h0 = stats.multivariate_normal(np.zeros(size), base)
    h1 = stats.multivariate_normal(np.zeros(size), base + args.offset_sd**2 * z @ z.T)
    band = white_noise_band(size)
    print(f"white-noise band of the pooled lag-1 r: {band:.3f}")
    for rho in args.rho:
        log_bf, lag1 = [], []
        for _ in range(args.sets):
            e = np.empty((n_runs, n))
            e[:, 0] = rng.normal(size=n_runs)
            for t in range(1, n):
                e[:, t] = rho * e[:, t - 1] + np.sqrt(1 - rho**2) * rng.normal(size=n_runs)
            y = 0.2 + e
            log_bf.append(h0.logpdf(y.ravel()) - h1.logpdf(y.ravel()))
            r = y - y.mean()
            lag1.append(np.mean([np.corrcoef(x[:-1], x[1:])[0, 1] for x in r]))
        log_bf, lag1 = np.array(log_bf), np.array(lag1)
        print(
            f"rho {rho:.2f}: decisive for G-dependence {np.mean(log_bf < -3):.3f}, for invariance "
            f"{np.mean(log_bf > 3):.3f}, median log BF01 {np.median(log_bf):.2f}, mean lag-1 r "
            f"{lag1.mean():.2f} (above the band in {np.mean(lag1 > band):.0%})"
        )


if __name__ == "__main__":
    main()
