"""Effective oscillator coefficients of GRPO (DESIGN.md section 1).

All functions broadcast over their arguments and work on NumPy arrays and PyTensor
variables alike. Units: ``eta`` is the learning rate (per optimizer step), ``stiffness``
``K`` the curvature of the effective potential at the plateau (reward units per parameter
step), ``k_ref`` the lag ``L`` in optimizer steps, time in optimizer steps.
"""

from __future__ import annotations

from bayes_grpo.constants import EMA, HEAVY_BALL, MOMENTUM_CONVENTIONS
from bayes_grpo.dynamics._backend import ops_for


def effective_step(eta, momentum, convention: str = HEAVY_BALL):
    """Step size of the equivalent heavy-ball recursion.

    Heavy-ball (``v <- mu v + g``) keeps ``eta``; EMA momentum (Adam's beta1,
    ``m <- b1 m + (1 - b1) g``) is the same recursion with step ``eta (1 - b1)``.
    """
    if convention == HEAVY_BALL:
        return eta
    if convention == EMA:
        return eta * (1.0 - momentum)
    raise ValueError(f"unknown momentum convention {convention!r}; expected one of {MOMENTUM_CONVENTIONS}")


def gain(eta, stiffness, momentum=0.0, convention: str = HEAVY_BALL):
    """``a = eta_eff K``: the only identifiable combination of step and curvature."""
    return effective_step(eta, momentum, convention) * stiffness


def oscillator_coefficients(a, momentum, k_ref):
    """``(M_eff, C_eff, K_eff)`` from the gain ``a = eta K``, momentum ``mu`` and lag ``L``.

    ``M = (1 + mu)/2 + a L^2/2`` (momentum and lag add inertia),
    ``C = (1 - mu) - a L`` (lag erodes damping), ``K_eff = a``.
    Shapes broadcast.
    """
    mass = (1.0 + momentum) / 2.0 + a * k_ref**2 / 2.0
    damping = (1.0 - momentum) - a * k_ref
    return mass, damping, a


def coefficients_from_hyperparameters(eta, stiffness, momentum, k_ref, convention: str = HEAVY_BALL):
    """``(M_eff, C_eff, K_eff)`` from learning rate, curvature ``K``, momentum and lag."""
    return oscillator_coefficients(gain(eta, stiffness, momentum, convention), momentum, k_ref)


def damping_ratio(mass, damping, k_eff):
    """``zeta = C / (2 sqrt(M K_eff))``; oscillatory when ``zeta < 1``."""
    ops = ops_for(mass, damping, k_eff)
    return damping / (2.0 * ops.sqrt(mass * k_eff))


def natural_frequency(mass, k_eff):
    """``w0 = sqrt(K_eff / M)`` in radians per optimizer step."""
    ops = ops_for(mass, k_eff)
    return ops.sqrt(k_eff / mass)


def stationary_variance(noise_d, group_size, damping, k_eff):
    """Stationary variance of the reward around the plateau, ``D / (2 G C K_eff)``."""
    return noise_d / (2.0 * group_size * damping * k_eff)


__all__ = [
    "effective_step",
    "gain",
    "oscillator_coefficients",
    "coefficients_from_hyperparameters",
    "damping_ratio",
    "natural_frequency",
    "stationary_variance",
]
