"""Exact mean field of the softmax-bandit GRPO: expected update, fixed point, stiffness, noise.

The bandit has two arms; arm 1 pays reward 1, arm 0 pays 0. The policy is
``pi(1) = p = sigmoid(theta)``, so the expected reward of the policy *is* ``p`` and the
mean field is exact: the expected update is a deterministic function of ``theta`` alone.
(One good arm against ``n - 1`` symmetric bad ones reduces to this with a constant logit
offset, so only the two-arm case is implemented.)

Per optimizer step the estimator sees ``B`` groups (prompts) of ``G`` actions. A group's
contribution depends on its actions only through ``k``, its number of successes, which is
``Binomial(G, p)``; every expectation below is therefore an exact finite sum over ``k`` (no
Monte Carlo). The expected update is written in torch so that its Jacobian at the fixed
point comes from autograd.

Advantage estimators (``advantage=``), for a group with ``k`` successes (``r_i`` in {0, 1}):

``"group"``
    TRL's default (``scale_rewards="group"``): ``A_i = (r_i - mean_g) / (std_g + 1e-4)``,
    ``std_g`` the unbiased (Bessel) standard deviation, as ``torch.std``. A zero-std group
    (``k = 0`` or ``k = G``) gets advantage exactly 0. The expected update depends on ``G``
    (finite-group bias of ``1/std_g`` and the zero-std groups): the mean trajectory is *not*
    exactly G-invariant.
``"batch"``
    TRL's ``scale_rewards="batch"``: group-centred, scaled by the unbiased std of all ``B G``
    rewards of the step.
``"none"``
    TRL's ``scale_rewards="none"`` (Dr. GRPO): ``A_i = r_i - mean_g``. Expected gradient
    ``(G - 1)/G p (1 - p)``: depends on ``G`` through ``(G - 1)/G``.
``"loo"``
    Leave-one-out group baseline scaled by the sampling policy's exact reward std:
    ``A_i = (r_i - mean_{j != i} r_j) / sqrt(p_b (1 - p_b))`` (the ``B G -> infinity`` limit
    of TRL's batch std). Zero-std groups still get advantage 0. Its expectation is exactly
    ``sqrt(p (1 - p))`` per sample for every ``G``: the mean field is exactly G-invariant and
    ``G`` enters only the noise, as in the reduced-order model.

Anchor (``anchor=``) to a reference policy ``p_ref``: TRL's ``k3`` estimator,
``k3(a) = pi_ref(a)/pi(a) - log(pi_ref(a)/pi(a)) - 1``, has per-sample gradient
``(1 - pi_ref(a)/pi(a)) grad log pi(a)`` with expectation exactly ``p - p_ref`` (the gradient of
``KL(pi_ref || pi)``). ``"kl"`` (default) uses that expectation, computed from the full
distribution (no sampling noise); ``"k3"`` samples it as TRL does. The expected ascent
direction is ``g(theta) = h_G(p) - beta (p - p_ref)`` with ``h_G`` the expected policy
gradient; it has one interior zero ``p* in (p_ref, 1)``.

A finding worth knowing: with ``advantage="loo"`` and ``anchor="k3"`` the first-order noise of
the policy-gradient and k3 terms cancel exactly at ``p*`` (the k3 gradient of a binary action
has the same shape as the advantage-weighted score), so ``D`` falls like ``1/(G - 1)`` instead
of being constant. The default ``anchor="kl"`` has no such cancellation.

Stiffness. With the update ``theta <- theta + eta g`` (heavy ball with momentum ``mu``; EMA
uses ``eta (1 - mu)``) the linearisation at ``theta*`` is
``e[n+1] - e[n] = mu (e[n] - e[n-1]) - eta K e[n-L]`` with ``K = -dg/dtheta (theta*)``. The
same ``K`` governs the error in reward units ``e = p - p*``: the expected reward drift per
unit step ``u(p) = sigmoid'(theta) g(theta)`` has ``-du/dp (p*) = -dg/dtheta (theta*)``
because ``g(theta*) = 0``. :func:`fixed_point` computes it in reward units by autograd
(and the tests check it against the theta route and the closed form of ``"loo"``).

Noise. Per step the update in reward units carries noise of variance
``eta_eff^2 (p*(1-p*))^2 Var[g_hat]`` with ``Var[g_hat] = Var_k[S(k)] / (B G^2)``, ``S`` the
group's summed gradient. DESIGN.md writes this as ``D / G``, so
``D = G eta_eff^2 (p*(1-p*))^2 Var[g_hat]`` (under ``"batch"`` the groups share the step's
reward std, so ``Var[g_hat]`` is computed from the joint law of the groups instead);
:func:`fixed_point` returns
``noise_d_per_eta2 = D / eta_eff^2``. The logged reward (mean of ``B G`` binary rewards) adds
measurement noise of standard deviation ``sqrt(p (1 - p) / (B G))``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass

import torch

from bayes_grpo._arguments import whole_count

#: Advantage estimators of the simulator (see the module docstring).
ADVANTAGES: tuple[str, ...] = ("group", "batch", "none", "loo")
#: Anchors to the reference policy: exact KL from the full distribution, or TRL's sampled k3.
ANCHORS: tuple[str, ...] = ("kl", "k3")
#: TRL's epsilon in ``(r - mean) / (std + eps)``.
STD_EPS: float = 1e-4

_DT = torch.float64


def check_advantage(advantage: str) -> str:
    if advantage not in ADVANTAGES:
        raise ValueError(f"unknown advantage estimator {advantage!r}; expected one of {ADVANTAGES}")
    return advantage


def group_advantages(k, group_size, p_b, advantage: str, batch_std=None):
    """Advantages ``(A_success, A_failure)`` of a group with ``k`` successes.

    Parameters
    ----------
    k
        Successes per group, tensor of any shape (float).
    group_size
        ``G``, broadcastable to ``k``.
    p_b
        Success probability of the sampling (behaviour) policy, broadcastable to ``k``;
        used only by ``"loo"``.
    advantage
        One of :data:`ADVANTAGES`.
    batch_std
        Unbiased std of all rewards of the step (``"batch"`` only), broadcastable to ``k``.

    Returns
    -------
    (A1, A0)
        Advantage of a rewarded and of an unrewarded action in that group; same shape as
        ``k``. A zero-std group (``k = 0`` or ``k = G``) gets 0 for the action it contains.
    """
    G = group_size
    mean = k / G
    if advantage == "group":
        var = torch.clamp(k * (G - k) / (G * (G - 1)), min=0.0)
        scale = torch.sqrt(var) + STD_EPS
        return (1.0 - mean) / scale, (0.0 - mean) / scale
    if advantage == "batch":
        scale = batch_std + STD_EPS
        return (1.0 - mean) / scale, (0.0 - mean) / scale
    if advantage == "none":
        return 1.0 - mean, 0.0 - mean
    if advantage == "loo":
        sd = torch.sqrt(p_b * (1.0 - p_b))
        return (1.0 - (k - 1.0) / (G - 1)) / sd, (0.0 - k / (G - 1)) / sd
    raise ValueError(f"unknown advantage estimator {advantage!r}; expected one of {ADVANTAGES}")


def _log_binom_pmf(n: int, p: torch.Tensor) -> torch.Tensor:
    """``log Binomial(k; n, p)`` for ``k = 0..n`` (differentiable in ``p``)."""
    k = torch.arange(n + 1, dtype=_DT, device=p.device)
    logc = (
        torch.lgamma(torch.tensor(n + 1.0, dtype=_DT))
        - torch.lgamma(k + 1)
        - torch.lgamma(n - k + 1)
    )
    return logc + k * torch.log(p) + (n - k) * torch.log1p(-p)


def _group_terms(
    theta: torch.Tensor,
    group_size: int,
    beta: float,
    p_ref: float,
    advantage: str,
    n_prompts: int,
    anchor: str,
):
    """``(pmf(k), S(k))`` for ``k = 0..G``: probability and summed ascent gradient of a group.

    ``S(k) = k A1 (1 - p) - (G - k) A0 p - beta [anchor gradient summed over the group]``
    (see :func:`anchor_group_gradient`); all at the sampling policy (no lag, importance
    ratio 1, so no clipping). For ``"batch"`` the batch std is
    replaced by its ``B G -> infinity`` value ``sqrt(p (1 - p))`` here; :func:`expected_update`
    treats ``"batch"`` exactly.
    """
    G = int(group_size)
    p = torch.sigmoid(theta)
    k = torch.arange(G + 1, dtype=_DT, device=theta.device)
    pmf = torch.exp(_log_binom_pmf(G, p))
    a1, a0 = group_advantages(k, float(G), p, advantage, batch_std=torch.sqrt(p * (1 - p)))
    pg = k * a1 * (1.0 - p) - (G - k) * a0 * p
    return pmf, pg - beta * anchor_group_gradient(k, float(G), p, theta, p_ref, anchor)


def anchor_group_gradient(k, group_size, p, theta, p_ref: float, anchor: str):
    """Gradient (w.r.t. the logit) of the anchor summed over a group with ``k`` successes.

    ``"kl"``: the exact expectation of TRL's k3 gradient, i.e. the gradient of
    ``KL(pi_ref || pi)`` computed from the full distribution, ``p - p_ref`` per sample (no
    sampling noise); ``"k3"``: TRL's sampled k3 estimator, per-sample gradient
    ``(1 - pi_ref(a)/pi(a)) d log pi(a)/dtheta``, whose expectation is the same ``p - p_ref``.
    (``theta`` is unused; kept so that anchors share one signature.)
    """
    if anchor == "kl":
        return group_size * (p - p_ref) + 0.0 * k
    if anchor == "k3":
        c1 = (1.0 - p_ref / p) * (1.0 - p)
        c0 = -(1.0 - (1.0 - p_ref) / (1.0 - p)) * p
        return k * c1 + (group_size - k) * c0
    raise ValueError(f"unknown anchor {anchor!r}; expected one of {ANCHORS}")


def expected_update(
    theta: torch.Tensor,
    *,
    group_size: int,
    beta: float,
    p_ref: float = 0.5,
    advantage: str = "loo",
    n_prompts: int = 16,
    anchor: str = "kl",
) -> torch.Tensor:
    """Exact expected ascent direction ``g(theta) = E[g_hat]`` per unit learning rate.

    Parameters
    ----------
    theta
        Logit of the rewarded arm, 0-d float64 tensor (may require grad).
    group_size, beta, p_ref, advantage, n_prompts
        ``G``, KL weight, reference policy's success probability, advantage estimator
        (default ``"loo"``, the simulator's; ``"group"`` is TRL's default), groups per step
        ``B`` (matters only for ``"batch"``).

    Returns
    -------
    torch.Tensor
        ``g(theta)`` (logit units per unit learning rate), differentiable in ``theta``.
    """
    check_advantage(advantage)
    G = int(group_size)
    if advantage != "batch":
        pmf, s = _group_terms(theta, G, beta, p_ref, advantage, n_prompts, anchor)
        return (pmf * s).sum() / G
    # "batch": the scale is the unbiased std of all N = B G rewards; condition on their total
    # K ~ Binomial(N, p). Given K, one group's k is hypergeometric, and its policy-gradient sum
    # is k (G - k) / G / (std(K) + eps) (the score terms (1-p) and p add up to 1).
    p = torch.sigmoid(theta)
    N = int(n_prompts) * G
    K = torch.arange(N + 1, dtype=_DT, device=theta.device)
    pmf_k = torch.exp(_log_binom_pmf(N, p))
    q = K / N
    ek = G * q
    vark = G * q * (1 - q) * (N - G) / max(N - 1, 1)
    ekgk = G * ek - (vark + ek**2)
    std = torch.sqrt(torch.clamp(K * (N - K) / (N * (N - 1)), min=0.0))
    pg = (pmf_k * ekgk / G / (std + STD_EPS)).sum() / G
    return pg - beta * (p - p_ref)


def _batch_update_var(
    p: float, group_size: int, beta: float, p_ref: float, n_prompts: int, anchor: str
) -> float:
    """Exact ``Var[g_hat]`` of one step under ``advantage="batch"``.

    The step's policy-gradient sum ``W = sum_groups k (G - k)`` and its scale, the std of all
    ``N = B G`` rewards, both depend on the groups' successes: normalising by the realised
    std cancels much of ``W``'s fluctuation, so the groups are not independent and
    ``Var_k[S(k)] / (B G^2)`` (the ``B G -> infinity`` scale) overstates the noise about
    2.3-fold at every ``B``. Given the total ``K``, ``g_hat = W / (B G^2 (std(K) + eps)) -
    beta anchor(K)``; the moments of ``W`` given ``K`` come from a convolution over the groups.
    """
    G, B = int(group_size), int(n_prompts)
    N = B * G
    k = torch.arange(G + 1, dtype=_DT)
    pmf = torch.exp(_log_binom_pmf(G, torch.tensor(p, dtype=_DT)))
    w = k * (G - k)
    # mass[K], m1[K] = E[W 1{K}], m2[K] = E[W^2 1{K}] over the groups added so far
    mass = torch.zeros(N + 1, dtype=_DT)
    m1, m2 = torch.zeros_like(mass), torch.zeros_like(mass)
    mass[0] = 1.0
    for b in range(B):
        top = b * G
        nm, n1, n2 = torch.zeros_like(mass), torch.zeros_like(mass), torch.zeros_like(mass)
        for j in range(G + 1):
            sl = slice(j, top + j + 1)
            q, wj = pmf[j], w[j]
            nm[sl] += q * mass[: top + 1]
            n1[sl] += q * (m1[: top + 1] + wj * mass[: top + 1])
            n2[sl] += q * (m2[: top + 1] + 2 * wj * m1[: top + 1] + wj * wj * mass[: top + 1])
        mass, m1, m2 = nm, n1, n2
    K = torch.arange(N + 1, dtype=_DT)
    std = torch.sqrt(torch.clamp(K * (N - K) / (N * (N - 1)), min=0.0))
    f = 1.0 / (B * G * G * (std + STD_EPS))
    anc = anchor_group_gradient(K, float(N), torch.tensor(p, dtype=_DT), None, p_ref, anchor) / N
    h = -beta * anc
    e1 = (f * m1 + h * mass).sum()
    e2 = (f * f * m2 + 2 * f * h * m1 + h * h * mass).sum()
    return float(e2 - e1 * e1)


def _reward_drift(p: torch.Tensor, **kw) -> torch.Tensor:
    """Expected change of the reward per unit learning rate, ``u(p) = sigmoid'(theta) g(theta)``."""
    theta = torch.log(p) - torch.log1p(-p)
    return p * (1 - p) * expected_update(theta, **kw)


@dataclass(frozen=True)
class FixedPoint:
    """The bandit's fixed point and its linearisation (all exact; no simulation, no fit).

    Attributes
    ----------
    plateau
        ``p*``: expected reward at the fixed point (reward units).
    stiffness
        ``K = -du/dp (p*)``: curvature of the effective potential in reward units per unit
        learning rate (equal to ``-dg/dtheta`` at ``theta*``); ``a = eta_eff K``.
    noise_d_per_eta2
        ``D / eta_eff^2`` (reward units^2 per step, times ``G``): the state-noise temperature
        for a unit effective step; ``D = eta_eff^2 * noise_d_per_eta2``.
    measurement_sd
        Standard deviation of the logged reward around ``p*`` from finite sampling,
        ``sqrt(p* (1 - p*) / (B G))``.
    method
        How ``stiffness`` was obtained.
    """

    plateau: float
    stiffness: float
    noise_d_per_eta2: float
    measurement_sd: float
    group_size: int
    beta: float
    p_ref: float
    advantage: str
    n_prompts: int
    anchor: str = "kl"
    method: str = "jacobian: autograd of the exact expected update at p*"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@functools.lru_cache(maxsize=256)
def fixed_point(
    *,
    group_size: int,
    beta: float,
    p_ref: float = 0.5,
    advantage: str = "loo",
    n_prompts: int = 16,
    anchor: str = "kl",
    tol: float = 1e-14,
) -> FixedPoint:
    """Locate ``p*`` (bisection on the exact expected update) and linearise there.

    ``advantage`` defaults to ``"loo"``, as :func:`~bayes_grpo.bandit.simulate_bandit`'s does, so
    the defaults give the plateau and stiffness of the default simulated runs (``"group"``, TRL's
    default normalisation, has another plateau: 0.808 against 0.854 at ``G = 8``, ``beta = 1``).

    Raises ValueError when the expected update has no sign change on ``(p_ref, 1)``
    (``beta <= 0`` gives no interior fixed point). Results are cached (the arguments fully
    determine them; :class:`FixedPoint` is immutable).
    """
    check_advantage(advantage)
    # int() took group_size=4.5 for 4 and n_prompts=1.5 or True for 1 without a word; n_prompts=0
    # failed in a ZeroDivisionError
    G, B = whole_count(group_size, "group_size"), whole_count(n_prompts, "n_prompts")
    if G < 2:
        raise ValueError(
            f"group_size must be >= 2 (a group std needs two samples), got {group_size}"
        )
    if B < 1:
        raise ValueError(f"n_prompts must be >= 1, got {n_prompts}")
    if not beta > 0:
        raise ValueError(f"beta must be > 0 for an interior fixed point p* < 1, got {beta}")
    if not 0.0 < p_ref < 1.0:
        raise ValueError(f"p_ref must lie in (0, 1), got {p_ref}")
    kw = dict(
        group_size=G,
        beta=float(beta),
        p_ref=float(p_ref),
        advantage=advantage,
        n_prompts=B,
        anchor=anchor,
    )
    if anchor not in ANCHORS:
        raise ValueError(f"unknown anchor {anchor!r}; expected one of {ANCHORS}")

    def drift(p: float) -> float:
        with torch.no_grad():
            return float(_reward_drift(torch.tensor(p, dtype=_DT), **kw))

    lo, hi = float(p_ref), 1.0 - 1e-12
    if drift(lo) > 0 and not drift(hi) < 0:
        # "no interior fixed point" said that there is none; there is, too close to 1
        raise ValueError(
            f"the plateau p* lies within 1e-12 of 1 (beta = {beta:g} is too small a KL weight to hold "
            f"the policy inside (0, 1) in float64); use a larger beta. Settings: {kw}"
        )
    if not (drift(lo) > 0 > drift(hi)):
        raise ValueError(f"no interior fixed point of the expected update on ({lo}, 1) for {kw}")
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if drift(mid) > 0:
            lo = mid
        else:
            hi = mid
    p_star = 0.5 * (lo + hi)
    p = torch.tensor(p_star, dtype=_DT, requires_grad=True)
    (du,) = torch.autograd.grad(_reward_drift(p, **kw), p)
    stiffness = -float(du)

    with torch.no_grad():
        theta = torch.tensor(math.log(p_star / (1 - p_star)), dtype=_DT)
        pmf, s = _group_terms(
            theta, kw["group_size"], kw["beta"], kw["p_ref"], advantage, kw["n_prompts"], anchor
        )
        var_s = float((pmf * s**2).sum() - (pmf * s).sum() ** 2)
    G, B = kw["group_size"], kw["n_prompts"]
    var_g = var_s / (B * G**2)
    if advantage == "batch":  # the groups share the batch std: not independent
        var_g = _batch_update_var(p_star, G, kw["beta"], kw["p_ref"], B, anchor)
    noise = G * (p_star * (1 - p_star)) ** 2 * var_g
    return FixedPoint(
        plateau=p_star,
        stiffness=stiffness,
        noise_d_per_eta2=noise,
        measurement_sd=math.sqrt(p_star * (1 - p_star) / (B * G)),
        group_size=G,
        beta=kw["beta"],
        p_ref=kw["p_ref"],
        advantage=advantage,
        n_prompts=B,
        anchor=anchor,
    )


def theta_stiffness(fp: FixedPoint) -> float:
    """``-dg/dtheta`` at ``theta*`` (logit units), the same number as ``fp.stiffness``."""
    theta = torch.tensor(math.log(fp.plateau / (1 - fp.plateau)), dtype=_DT, requires_grad=True)
    g = expected_update(
        theta,
        group_size=fp.group_size,
        beta=fp.beta,
        p_ref=fp.p_ref,
        advantage=fp.advantage,
        n_prompts=fp.n_prompts,
        anchor=fp.anchor,
    )
    (dg,) = torch.autograd.grad(g, theta)
    return -float(dg)


def loo_fixed_point_closed_form(beta: float, p_ref: float) -> tuple[float, float]:
    """Closed form for ``advantage="loo"``: ``(p*, K)``.

    ``g = sqrt(p (1 - p)) - beta (p - p_ref)``; ``p*`` solves
    ``(1 + beta^2) p^2 - (1 + 2 beta^2 p_ref) p + beta^2 p_ref^2 = 0`` (larger root) and
    ``K = p*(1-p*) [beta - (1 - 2 p*) / (2 sqrt(p*(1-p*)))]``.
    """
    b2 = beta * beta
    qa, qb, qc = 1 + b2, -(1 + 2 * b2 * p_ref), b2 * p_ref * p_ref
    p = (-qb + math.sqrt(qb * qb - 4 * qa * qc)) / (2 * qa)
    v = p * (1 - p)
    return p, v * (beta - (1 - 2 * p) / (2 * math.sqrt(v)))


__all__ = [
    "ADVANTAGES",
    "ANCHORS",
    "anchor_group_gradient",
    "STD_EPS",
    "FixedPoint",
    "expected_update",
    "fixed_point",
    "group_advantages",
    "loo_fixed_point_closed_form",
    "theta_stiffness",
]
