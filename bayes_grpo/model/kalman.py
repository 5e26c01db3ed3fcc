"""Exact state-space likelihood of the linear SDE plus measurement noise (PyTensor).

The error ``e = p - p*`` follows ``M e'' + C e' + K e = sqrt(q) xi(t)`` with
``q = D / G^alpha`` (DESIGN.md section 1). With state ``x = (e, e')`` and
``gamma = C / 2M``, ``w0^2 = K / M``, the exact transition over an interval ``dt`` is

    Phi(dt) = [[E(dt),            S(dt)            ],
               [-w0^2 S(dt),      E(dt) - 2 gamma S(dt)]]

where ``E`` is the free trajectory from ``(e, e') = (1, 0)`` and ``S`` the one from
``(0, 1)``: both come from :func:`bayes_grpo.dynamics.trajectory.transition_entries` (the propagators of
:func:`bayes_grpo.dynamics.error_trajectory`), so the formula
(and its smooth treatment of critical damping) is not repeated here. The process-noise
covariance ``Q(dt) = s^2 int_0^dt phi2(u) phi2(u)^T du`` (``phi2`` the second column of
``Phi``, ``s^2 = q / M^2``) is computed by 16-point Gauss-Legendre quadrature when
``dt (|gamma| + w0) < 2`` (integrand smooth: quadrature error far below 1e-12) and from
the Lyapunov identity ``Q = P - Phi P Phi^T`` with ``P = diag(s^2 / (4 gamma w0^2),
s^2 / (4 gamma))`` otherwise (no cancellation there); ``Q12 = s^2 S(dt)^2 / 2`` exactly.

Observations ``y_t = p* + e(t) + eps_t``, ``eps_t ~ N(0, r)``, at the steps of a grid
shared by all runs; missing entries (ragged runs, gaps) are skipped by a mask, so the
filter predicts through them. The initial state is deterministic: ``e(0) = R0 - p*``,
``e'(0) = 0`` (the slow start), covariance 0 at ``t = 0``.
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt

from bayes_grpo.dynamics.trajectory import transition_entries

#: Gauss-Legendre order of the process-noise quadrature.
QUADRATURE_ORDER: int = 16
#: ``dt (|gamma| + w0)`` below which the quadrature is used (the Lyapunov form above).
QUADRATURE_LIMIT: float = 2.0

_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(QUADRATURE_ORDER)


def transition(dt, mass, damping, k_eff):
    """Exact transition matrix entries ``(f11, f12, f21, f22)`` over intervals ``dt``.

    ``dt`` and the coefficients broadcast (e.g. ``dt`` shape ``(n_int, 1)``, coefficients
    ``(n_runs,)`` give ``(n_int, n_runs)``). Works on NumPy and PyTensor inputs.
    """
    return transition_entries(dt, mass, damping, k_eff)


def process_noise(dt, mass, damping, k_eff, q):
    """Process-noise covariance entries ``(Q11, Q12, Q22)`` over intervals ``dt`` (PyTensor).

    Parameters
    ----------
    dt
        Interval lengths in optimizer steps, shape ``(n_int, 1)``.
    mass, damping, k_eff, q
        Per-run ``M, C, K_eff`` and noise intensity ``q = D / G^alpha``, shape ``(n_runs,)``.
    """
    dt = pt.as_tensor_variable(dt)
    gamma = damping / (2.0 * mass)
    w2 = k_eff / mass
    s2 = q / (mass * mass)
    rate = dt * (pt.abs(gamma) + pt.sqrt(pt.abs(w2)))
    use_quad = rate < QUADRATURE_LIMIT
    # Quadrature branch (intervals clamped to 0 where not used, so no branch can overflow).
    dt_q = pt.switch(use_quad, dt, 0.0)
    nodes = pt.as_tensor_variable((_NODES + 1.0) / 2.0)[:, None, None]
    weights = pt.as_tensor_variable(_WEIGHTS / 2.0)[:, None, None]
    u = nodes * dt_q[None]
    _, s, _, sd = transition(u, mass, damping, k_eff)
    q11_quad = s2 * dt_q * pt.sum(weights * s * s, axis=0)
    q22_quad = s2 * dt_q * pt.sum(weights * sd * sd, axis=0)
    # Lyapunov branch (gamma and w0^2 kept away from 0 where not used).
    g_l = pt.switch(use_quad, 1.0, gamma)
    g_l = pt.switch(pt.abs(g_l) < 1e-300, 1e-300, g_l)
    w2_l = pt.switch(use_quad, 1.0, w2)
    f11, f12, f21, f22 = transition(pt.switch(use_quad, 0.0, dt), mass, damping, k_eff)
    p11 = s2 / (4.0 * g_l * w2_l)
    p22 = s2 / (4.0 * g_l)
    q11_lyap = p11 - (f11 * f11 * p11 + f12 * f12 * p22)
    q22_lyap = p22 - (f21 * f21 * p11 + f22 * f22 * p22)
    _, s_dt, _, _ = transition(dt, mass, damping, k_eff)
    q12 = s2 * s_dt * s_dt / 2.0
    return pt.switch(use_quad, q11_quad, q11_lyap), q12, pt.switch(use_quad, q22_quad, q22_lyap)


def grid_intervals(steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique interval lengths of a step grid starting from ``t = 0`` and each step's index.

    Returns ``(unique_dt, index)`` with ``unique_dt[index[k]] = steps[k] - steps[k-1]``
    (``steps[-1] := 0``).
    """
    steps = np.asarray(steps, dtype=float)
    dts = np.diff(np.concatenate([[0.0], steps]))
    if (dts < 0).any():
        raise ValueError("steps must be increasing and >= 0")
    unique, index = np.unique(dts, return_inverse=True)
    return unique, index.astype(int)


def kalman_loglik(y, mask, steps, mass, damping, k_eff, q, r, e0, *, per_run: bool = False, intervals=None):
    """Exact log-likelihood of the observed errors under the SDE + measurement noise.

    Parameters
    ----------
    y
        Observed ``reward - p*`` per run and step, shape ``(n_runs, n_steps)`` (any
        finite value where missing).
    mask
        Shape ``(n_runs, n_steps)``, 1 where observed, 0 where missing.
    steps
        Optimizer steps of the grid, shape ``(n_steps,)``, increasing, >= 0 (NumPy).
    mass, damping, k_eff
        Per-run ``M, C, K_eff``, shape ``(n_runs,)``.
    q
        Per-run process-noise intensity ``D / G^alpha``, shape ``(n_runs,)``.
    r
        Per-run measurement-noise variance, shape ``(n_runs,)``.
    e0
        Per-run initial error ``R0 - p*``, shape ``(n_runs,)``.
    per_run
        Return the ``(n_runs,)`` vector instead of the total.
    intervals
        Optional ``(unique_dt, index)`` of :func:`grid_intervals` (NumPy or shared
        variables); replaces ``steps`` (pass ``steps=None``).

    Returns
    -------
    PyTensor scalar (or vector): the Gaussian log-density of the observed entries.
    """
    unique_dt, index = grid_intervals(steps) if intervals is None else intervals
    dt = pt.as_tensor_variable(unique_dt)[:, None]
    f11, f12, f21, f22 = transition(dt, mass, damping, k_eff)
    q11, q12, q22 = process_noise(dt, mass, damping, k_eff, q)
    idx = pt.as_tensor_variable(index)
    seqs = [pt.as_tensor_variable(y).T, pt.as_tensor_variable(mask).astype("float64").T] + [
        m[idx] for m in (f11, f12, f21, f22, q11, q12, q22)
    ]
    r = pt.as_tensor_variable(r)
    e0 = pt.as_tensor_variable(e0)
    zeros = pt.zeros_like(e0)

    def step(y_t, m_t, a11, a12, a21, a22, b11, b12, b22, x1, x2, p11, p12, p22, rr):
        # predict
        x1p = a11 * x1 + a12 * x2
        x2p = a21 * x1 + a22 * x2
        p11p = a11 * a11 * p11 + 2.0 * a11 * a12 * p12 + a12 * a12 * p22 + b11
        p12p = a11 * a21 * p11 + (a11 * a22 + a12 * a21) * p12 + a12 * a22 * p22 + b12
        p22p = a21 * a21 * p11 + 2.0 * a21 * a22 * p12 + a22 * a22 * p22 + b22
        # update where observed
        s = p11p + rr
        v = y_t - x1p
        k1 = m_t * p11p / s
        k2 = m_t * p12p / s
        ll = m_t * -0.5 * (np.log(2.0 * np.pi) + pt.log(s) + v * v / s)
        return (
            x1p + k1 * v,
            x2p + k2 * v,
            p11p - k1 * p11p,
            p12p - k1 * p12p,
            p22p - k2 * p12p,
            ll,
        )

    outputs = pytensor.scan(
        step,
        sequences=seqs,
        outputs_info=[e0, zeros, zeros, zeros, zeros, None],
        non_sequences=[r],
        return_updates=False,
    )
    ll = outputs[-1].sum(axis=0)
    return ll if per_run else ll.sum()


__all__ = ["transition", "process_noise", "kalman_loglik", "grid_intervals", "QUADRATURE_ORDER"]
