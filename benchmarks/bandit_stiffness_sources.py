"""Where the curve-level stiffness of the bandit differs from the Jacobian one, and why.

Least-squares fits of DESIGN.md's closed-form trajectory (mechanistic: one stiffness ``K``
shared by every setting, ``M, C, K_eff`` from each run's ``eta, mu, K_ref``; free plateau and
initial reward) to *noise-free* curves, so that every number below is a bias, not noise:

* ``mean field``: the bandit's exact expected update (``bayes_grpo.bandit.mean_field``)
  iterated with heavy-ball momentum and the gradient ``K_ref`` steps late: the seed-mean
  of the simulator without its noise;
* ``linear``: the linearised recursion ``e[n+1] - e[n] = mu (e[n] - e[n-1]) - a e[n - L]``
  with the Jacobian ``K`` (what the stability criterion assumes).

Each is fitted to the logged curve (rollout reward: the policy ``K_ref`` steps old, flat for
the first ``K_ref`` steps) and to the curve aligned to the generating policy
(:func:`bayes_grpo.bandit.experiments.align_to_generating_policy`), for starts at the
reference policy and at ``p* -+ amplitude``. The last column interpolates the two sides
linearly in the initial error to ``e0 = 0``.

Example::

    .venv/bin/python benchmarks/bandit_stiffness_sources.py --out benchmarks/results/bandit_stiffness_sources.json
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import torch
from scipy.optimize import least_squares

from bayes_grpo._io import write_text_atomic
from bayes_grpo.bandit.mean_field import expected_update, fixed_point
from bayes_grpo.dynamics.coefficients import oscillator_coefficients
from bayes_grpo.dynamics.trajectory import reward_trajectory


def curve(drift, to_p, x0: float, lr: float, mu: float, lag: int, steps: int, aligned: bool):
    """Noise-free reward curve: heavy ball on the state ``x`` with the drift ``K_ref`` steps late.

    ``x`` is the logit (mean field) or the reward error ``e`` (linear recursion); ``to_p``
    maps it to the expected reward.
    """
    x = [x0]
    v = 0.0
    for n in range(steps + lag):
        v = mu * v + drift(x[max(0, n - lag)])
        x.append(x[-1] + lr * v)
    p = np.array([to_p(xi) for xi in x])
    if aligned:
        return p[:steps]  # the policy at step n
    return np.concatenate([np.full(lag, p[0]), p[: steps - lag]])  # rollouts L steps old


def fit_k(curves, settings, steps: int) -> float:
    t = np.arange(steps, dtype=float)

    def resid(x):
        k, p_star, r0 = math.exp(x[0]), x[1], x[2]
        return np.concatenate(
            [
                reward_trajectory(t, *oscillator_coefficients(lr * k, mu, lag), p_star, r0) - y
                for (lr, mu, lag), y in zip(settings, curves)
            ]
        )

    y0 = float(np.mean([c[0] for c in curves]))
    sol = least_squares(resid, [math.log(0.3), float(np.mean([c[-1] for c in curves])), y0])
    return math.exp(sol.x[0])


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--lrs", type=float, nargs="+", default=[0.1, 0.2])
    p.add_argument("--k-refs", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--momentum", type=float, default=0.5)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--amplitudes", type=float, nargs="+", default=[0.03, 0.08])
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--out", default="benchmarks/results/bandit_stiffness_sources.json")
    args = p.parse_args()

    fp = fixed_point(group_size=args.group_size, beta=1.0, advantage="loo")

    def mean_field(theta: float) -> float:
        with torch.no_grad():
            t = torch.tensor(theta, dtype=torch.float64)
            return float(expected_update(t, group_size=args.group_size, beta=1.0, advantage="loo"))

    def sigmoid(theta: float) -> float:
        return 1.0 / (1.0 + math.exp(-theta))

    def logit(p_: float) -> float:
        return math.log(p_ / (1 - p_))

    dynamics = {
        # state: logit; drift: the exact expected update (loo advantage, exact KL anchor)
        "mean field": (mean_field, sigmoid, logit),
        # state: e = p - p*; drift: -K e (the linearised recursion, Jacobian K)
        "linear": (
            lambda e: -fp.stiffness * e,
            lambda e: fp.plateau + e,
            lambda p_: p_ - fp.plateau,
        ),
    }

    settings = [(lr, args.momentum, lag) for lr in args.lrs for lag in args.k_refs]
    rows = []
    for name, (drift, to_p, from_p) in dynamics.items():
        for aligned in (False, True):
            row = {"dynamics": name, "reward": "aligned" if aligned else "logged (rollouts)"}
            starts = {"from p_ref 0.5": 0.5}
            for amp in args.amplitudes:
                starts[f"p* - {amp:g}"] = fp.plateau - amp
                starts[f"p* + {amp:g}"] = fp.plateau + amp
            for label, p0 in starts.items():
                cs = [curve(drift, to_p, from_p(p0), *s, args.steps, aligned) for s in settings]
                row[label] = fit_k(cs, settings, args.steps)
            for amp in args.amplitudes:
                row[f"two-sided {amp:g}"] = 0.5 * (row[f"p* - {amp:g}"] + row[f"p* + {amp:g}"])
            rows.append(row)
            print(
                json.dumps(
                    {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}
                )
            )
    out = {
        "settings": vars(args),
        "jacobian_stiffness": fp.stiffness,
        "plateau": fp.plateau,
        "rows": rows,
    }
    write_text_atomic(args.out, json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
