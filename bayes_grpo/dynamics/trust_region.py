"""PPO clipping (GRPO's trust region) in the mean-field law of a success-rate reward.

GRPO's surrogate ``min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A)`` has zero gradient for a
sample whose importance ratio ``rho = pi_now(a) / pi_behaviour(a)`` has left the clip range in the
direction its advantage pushes. With a success-rate reward (1 for a rewarded completion, 0
otherwise) and ``p`` the policy's probability of success, the successes carry the positive
advantages and the failures the negative ones. In the mean field of the softmax bandit (DESIGN.md
section 2: two arms, or one good arm against symmetric bad ones) every success has the ratio
``p_now / p_b`` and every failure ``(1 - p_now) / (1 - p_b)``; the group-relative advantages sum
to zero within each group (``k A_1 = -(G - k) A_0``) and the scores of the logit are
``1 - p_b`` (success) and ``-p_b`` (failure), so the policy gradient splits into the share
``1 - p_b`` carried by the successes and ``p_b`` carried by the failures. Clipping masks:

* the successes once ``p_now / p_b > 1 + eps_high`` (the policy has moved up past the range),
* the failures once ``(1 - p_now) / (1 - p_b) < 1 - eps_low``,

and leaves the share :func:`unclipped_share` of the gradient. In the lagged recursion of DESIGN.md
section 1 the gradient term ``-a e[n-L]`` is scaled by it, with ``p_now = p* + e[n]`` (the policy
being updated) and ``p_b = p* + e[n-L]`` (the policy ``K_ref`` steps old that drew the
rollouts): :func:`bayes_grpo.dynamics.simulate.simulate_recursion` with ``clip_range``.
The whole gradient term is scaled (the KL anchor's part with it): clipping bites during the fast
rise, far from the plateau, where the policy gradient dominates the anchor. Past the plateau (an
overshoot, a limit cycle) that is not so: there the bandit's restoring force grows when its
successes are masked (the anchor is not), while the scaled law's shrinks; the anchor's share at
``p*`` is not identified by a fit of the reward curve, so the law does not split it.

The masks and shares are exact for the bandit's mean field (``bayes_grpo.bandit.simulator`` masks
exactly so), the scaling of the whole term where the policy gradient dominates; for an LLM
it is the two-class mean-field approximation (every success moved alike), the same reduction the
law itself rests on. Without lag (``K_ref = 0``) the ratios are 1 and nothing is clipped.
"""

from __future__ import annotations

import math

import numpy as np

#: Probabilities are kept this far inside (0, 1) before ratios are taken.
P_EPS: float = 1e-9
#: TRL's default clip range (``GRPOConfig.epsilon``): what a run whose range is not given most
#: likely ran with, against which a prediction without a range is checked (:func:`largest_move`).
TRL_DEFAULT_CLIP_EPSILON: float = 0.2


def check_clip_range(clip_epsilon, clip_epsilon_high=None) -> tuple[float, float] | None:
    """``(eps_low, eps_high)`` of a PPO clip range, or None for no clipping.

    ``clip_epsilon``: TRL's ``epsilon`` (``GRPOConfig``; 0.2 by default there), None or inf for no
    clipping; ``clip_epsilon_high``: TRL's ``epsilon_high`` (the upper bound, DAPO's clip-higher),
    None for ``clip_epsilon``. Each must be > 0 (a range of 0 masks every sample: no update at
    all); ``ValueError`` naming the value otherwise.
    """
    if clip_epsilon is None:
        if clip_epsilon_high is not None:
            raise ValueError(
                f"clip_epsilon_high = {clip_epsilon_high!r} needs clip_epsilon (the lower bound of the "
                "clip range) too"
            )
        return None
    values = []
    for name, value in (("clip_epsilon", clip_epsilon), ("clip_epsilon_high", clip_epsilon_high)):
        if value is None:
            values.append(values[0])
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number > 0, got {value!r}") from None
        if math.isnan(number) or number <= 0:
            raise ValueError(
                f"{name} must be > 0 (inf: no clipping), got {value!r}: a clip range of 0 masks every "
                "sample, so nothing would move"
            )
        values.append(number)
    low, high = values
    return None if math.isinf(low) and math.isinf(high) else (low, high)


def format_clip_range(clip_range: tuple[float, float]) -> str:
    """``"0.2"`` for a symmetric range, ``"[0.2, 0.28]"`` (low, high) otherwise."""
    low, high = clip_range
    return f"{low:g}" if low == high else f"[{low:g}, {high:g}]"


def unclipped_share(p_now, p_behaviour, clip_range: tuple[float, float] | None) -> np.ndarray:
    """Share of the policy gradient of a success-rate reward that PPO clipping leaves (module docstring).

    Parameters
    ----------
    p_now, p_behaviour
        Success probabilities of the current policy and of the behaviour policy that drew the
        rollouts (broadcast together; kept within ``[P_EPS, 1 - P_EPS]``).
    clip_range
        ``(eps_low, eps_high)`` from :func:`check_clip_range`; None: nothing clipped.

    Returns
    -------
    numpy.ndarray of the broadcast shape, in ``[0, 1]``: 1 inside the range, ``p_b`` with the
    successes masked, ``1 - p_b`` with the failures masked, 0 with both.
    """
    p_now, p_b = np.broadcast_arrays(
        np.asarray(p_now, dtype=float), np.asarray(p_behaviour, dtype=float)
    )
    if clip_range is None:
        return np.ones(p_now.shape)
    low, high = clip_range
    now = np.clip(p_now, P_EPS, 1.0 - P_EPS)
    b = np.clip(p_b, P_EPS, 1.0 - P_EPS)
    successes_kept = ~(now / b > 1.0 + high)
    failures_kept = ~((1.0 - now) / (1.0 - b) < 1.0 - low)
    share = (1.0 - b) * successes_kept + b * failures_kept
    # a NaN state (a diverged draw) stays NaN rather than reading as "inside the range"
    return np.where(np.isnan(p_now) | np.isnan(p_b), np.nan, share)


def largest_move(success_rate, lag: int) -> tuple[float, int]:
    """The largest relative move of a success-rate trajectory within ``lag`` steps, as the clip
    reads it: ``max(p[n] / p[n-L] - 1, 1 - (1 - p[n]) / (1 - p[n-L]))`` over ``n``, and the
    step index ``n`` where it is reached. Above the clip range ``eps``, clipping masks samples
    (:func:`unclipped_share`) and slows a rise the linear law draws unclipped.

    ``success_rate``: ``(n_steps,)`` on consecutive whole steps, within ``[0, 1]``; ``lag``: the
    ``K_ref`` in steps. ``(0.0, 0)`` when ``lag`` is 0 or the trajectory is shorter than it.
    """
    p = np.clip(np.asarray(success_rate, dtype=float), P_EPS, 1.0 - P_EPS)
    lag = int(lag)
    if lag <= 0 or p.size <= lag:
        return 0.0, 0
    with np.errstate(invalid="ignore"):
        move = np.fmax(p[lag:] / p[:-lag] - 1.0, 1.0 - (1.0 - p[lag:]) / (1.0 - p[:-lag]))
    if not np.isfinite(move).any():
        return 0.0, 0
    i = int(np.nanargmax(move))
    return float(move[i]), i + lag
