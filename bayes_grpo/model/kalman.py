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

Two filters give the same log-density (to rounding; both are tested against a dense Gaussian
likelihood): the textbook one as a PyTensor ``scan`` over the steps (``method="sequential"``),
and the parallel one of Sarkka and Garcia-Fernandez (2021) as an associative prefix scan
(``method="parallel"``, ``ceil(log2 T)`` vectorised levels): 2-3x faster gradients on the C
backend, but a larger graph to compile.

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


def _filtering_elements(y, m, e0, r, f, qn):
    """Per-step elements ``(A, b, C, eta, J)`` of the parallel Kalman filter (Sarkka and
    Garcia-Fernandez 2021, "Temporal parallelization of Bayesian smoothers", eqs. 11-12),
    for the scalar observation ``y_k = x_k[0] + eps``.

    Every input has shape ``(n_steps, n_runs)`` (``e0`` and ``r``: ``(n_runs,)``); ``f`` is the
    tuple ``(f11, f12, f21, f22)`` of the transition into step ``k``, ``qn`` the tuple
    ``(Q11, Q12, Q22)`` of its process noise, ``m`` the 0/1 observation mask (a missing
    observation gives the pure prediction element ``A = F, b = 0, C = Q, eta = J = 0``).
    Matrices are tuples of entries: ``A`` general ``(a11, a12, a21, a22)``, ``C`` and ``J``
    symmetric ``(c11, c12, c22)``, vectors ``(v1, v2)``. The first step carries the
    deterministic initial state ``(e0, 0)`` with zero covariance, so its ``A``, ``eta`` and
    ``J`` vanish and the prefix products are the filtered means ``b`` and covariances ``C``.
    """
    f11, f12, f21, f22 = f
    q11, q12, q22 = qn
    gain = m / (q11 + r)  # H^T S^-1 H weight; 0 where the step is missing
    k1, k2 = q11 * gain, q12 * gain
    first = pt.zeros_like(y)
    first = pt.set_subtensor(first[0], 1.0)
    later = 1.0 - first
    # predicted mean from the initial state (first step only): F (e0, 0)
    u1, u2 = first * f11 * e0, first * f21 * e0
    a = (later * (1.0 - k1) * f11, later * (1.0 - k1) * f12, later * (f21 - k2 * f11), later * (f22 - k2 * f12))
    b = (u1 + k1 * (y - u1), u2 + k2 * (y - u1))
    c = ((1.0 - k1) * q11, (1.0 - k1) * q12, q22 - k2 * q12)
    wy = later * gain * y
    eta = (wy * f11, wy * f12)
    wj = later * gain
    j = (wj * f11 * f11, wj * f11 * f12, wj * f12 * f12)
    return a, b, c, eta, j


def _combine(earlier, later):
    """The associative filtering operator ``earlier (x) later`` on element tuples (eq. 13)."""
    (a1, b1, c1, e1, j1), (a2, b2, c2, e2, j2) = earlier, later
    ai11, ai12, ai21, ai22 = a1
    aj11, aj12, aj21, aj22 = a2
    ci11, ci12, ci22 = c1
    jj11, jj12, jj22 = j2
    # D = I + C_i J_j and its inverse
    d11 = 1.0 + ci11 * jj11 + ci12 * jj12
    d12 = ci11 * jj12 + ci12 * jj22
    d21 = ci12 * jj11 + ci22 * jj12
    d22 = 1.0 + ci12 * jj12 + ci22 * jj22
    det = d11 * d22 - d12 * d21
    v11, v12, v21, v22 = d22 / det, -d12 / det, -d21 / det, d11 / det
    # N = D^-1 A_i, G = A_j D^-1
    n11, n12 = v11 * ai11 + v12 * ai21, v11 * ai12 + v12 * ai22
    n21, n22 = v21 * ai11 + v22 * ai21, v21 * ai12 + v22 * ai22
    g11, g12 = aj11 * v11 + aj12 * v21, aj11 * v12 + aj12 * v22
    g21, g22 = aj21 * v11 + aj22 * v21, aj21 * v12 + aj22 * v22
    a = (aj11 * n11 + aj12 * n21, aj11 * n12 + aj12 * n22, aj21 * n11 + aj22 * n21, aj21 * n12 + aj22 * n22)
    # b = G (b_i + C_i eta_j) + b_j
    w1 = b1[0] + ci11 * e2[0] + ci12 * e2[1]
    w2 = b1[1] + ci12 * e2[0] + ci22 * e2[1]
    b = (g11 * w1 + g12 * w2 + b2[0], g21 * w1 + g22 * w2 + b2[1])
    # C = G C_i A_j^T + C_j (symmetric)
    h11, h12 = g11 * ci11 + g12 * ci12, g11 * ci12 + g12 * ci22
    h21, h22 = g21 * ci11 + g22 * ci12, g21 * ci12 + g22 * ci22
    c = (
        h11 * aj11 + h12 * aj12 + c2[0],
        h11 * aj21 + h12 * aj22 + c2[1],
        h21 * aj21 + h22 * aj22 + c2[2],
    )
    # eta = N^T (eta_j - J_j b_i) + eta_i
    z1 = e2[0] - (jj11 * b1[0] + jj12 * b1[1])
    z2 = e2[1] - (jj12 * b1[0] + jj22 * b1[1])
    eta = (n11 * z1 + n21 * z2 + e1[0], n12 * z1 + n22 * z2 + e1[1])
    # J = N^T J_j A_i + J_i (symmetric)
    l11, l12 = jj11 * ai11 + jj12 * ai21, jj11 * ai12 + jj12 * ai22
    l21, l22 = jj12 * ai11 + jj22 * ai21, jj12 * ai12 + jj22 * ai22
    j = (
        n11 * l11 + n21 * l21 + j1[0],
        n11 * l12 + n21 * l22 + j1[1],
        n12 * l12 + n22 * l22 + j1[2],
    )
    return a, b, c, eta, j


def _prefix_scan(elements, n_steps: int):
    """Inclusive prefix products of the filtering elements along axis 0 (Hillis-Steele).

    At level ``l`` every element is combined with the one ``2^l`` steps earlier:
    ``ceil(log2 n_steps)`` vectorised levels, unrolled (a ``scan`` over the levels was
    measured slower per gradient, 11.9 ms against 5.4 ms for 2 runs x 1000 steps).
    """
    flat = [x for group in elements for x in group]
    sizes = [len(group) for group in elements]

    def unflatten(seq):
        out, i = [], 0
        for size in sizes:
            out.append(tuple(seq[i : i + size]))
            i += size
        return out

    shift = 1
    while shift < n_steps:
        combined = _combine(unflatten([x[:-shift] for x in flat]), unflatten([x[shift:] for x in flat]))
        flat = [pt.concatenate([x[:shift], c], axis=0) for x, c in zip(flat, [v for g in combined for v in g])]
        shift *= 2
    return unflatten(flat)


def _parallel_loglik(y, mask, f, qn, r, e0):
    """Per-step log-likelihood terms, shape ``(n_steps, n_runs)``, by the parallel filter."""
    n_steps = int(y.type.shape[0]) if y.type.shape[0] is not None else None
    if n_steps is None:
        raise ValueError("the parallel Kalman filter needs the number of steps at graph-build time")
    _, (m1, m2), (p11, p12, p22), _, _ = _prefix_scan(_filtering_elements(y, mask, e0, r, f, qn), n_steps)
    # filtered state before each step: the initial state (e0, 0), P = 0, then the filter's
    prev = [pt.concatenate([init[None, :], v[:-1]], axis=0) for init, v in ((e0, m1), (pt.zeros_like(e0), m2))]
    prev_p = [pt.concatenate([pt.zeros_like(e0)[None, :], v[:-1]], axis=0) for v in (p11, p12, p22)]
    f11, f12, _, _ = f
    mean = f11 * prev[0] + f12 * prev[1]
    var = f11 * f11 * prev_p[0] + 2.0 * f11 * f12 * prev_p[1] + f12 * f12 * prev_p[2] + qn[0] + r
    v = y - mean
    return mask * -0.5 * (np.log(2.0 * np.pi) + pt.log(var) + v * v / var)


def kalman_loglik(y, mask, steps, mass, damping, k_eff, q, r, e0, *, per_run: bool = False, intervals=None, method: str = "parallel"):
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
    method
        ``"parallel"`` (default): the associative-scan filter of :func:`_prefix_scan`,
        ``ceil(log2 n_steps)`` vectorised levels, which needs ``n_steps`` known when the graph
        is built (NumPy ``y`` or a static-shape ``pm.Data``); ``"sequential"``: the textbook
        filter as one PyTensor ``scan`` over the steps (per-step overhead, slow gradients).
        Both give the same log-density to rounding.

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
    if method == "parallel":
        ll = _parallel_loglik(seqs[0], seqs[1], tuple(seqs[2:6]), tuple(seqs[6:9]), r, e0).sum(axis=0)
        return ll if per_run else ll.sum()
    if method != "sequential":
        raise ValueError(f"method must be 'parallel' or 'sequential', not {method!r}")
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
