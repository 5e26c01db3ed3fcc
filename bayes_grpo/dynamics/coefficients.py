"""Effective oscillator coefficients of GRPO (DESIGN.md section 1).

All functions broadcast over their arguments and work on NumPy arrays and PyTensor
variables alike. Units: ``eta`` is the learning rate (per optimizer step), ``stiffness``
``K`` the curvature of the effective potential at the plateau (reward units per parameter
step), ``k_ref`` the lag ``L`` in optimizer steps, time in optimizer steps.
"""

from __future__ import annotations

import numpy as np

from bayes_grpo.constants import EMA, HEAVY_BALL, MOMENTUM_CONVENTIONS
from bayes_grpo.dynamics._backend import as_numbers, ops_for


def effective_step(eta, momentum, convention: str = HEAVY_BALL):
    """Step size of the equivalent heavy-ball recursion.

    Heavy-ball (``v <- mu v + g``) keeps ``eta``; EMA momentum (Adam's beta1,
    ``m <- b1 m + (1 - b1) g``) is the same recursion with step ``eta (1 - b1)``.
    """
    eta, momentum = as_numbers(eta, momentum)
    if convention == HEAVY_BALL:
        return eta
    if convention == EMA:
        return eta * (1.0 - momentum)
    raise ValueError(f"unknown momentum convention {convention!r}; expected one of {MOMENTUM_CONVENTIONS}")


def gain(eta, stiffness, momentum=0.0, convention: str = HEAVY_BALL):
    """``a = eta_eff K``: the only identifiable combination of step and curvature."""
    (stiffness,) = as_numbers(stiffness)
    return effective_step(eta, momentum, convention) * stiffness


def oscillator_coefficients(a, momentum, k_ref):
    """``(M_eff, C_eff, K_eff)`` from the gain ``a = eta K``, momentum ``mu`` and lag ``L``.

    ``M = (1 + mu)/2 + a L^2/2`` (momentum and lag add inertia),
    ``C = (1 - mu) - a L`` (lag erodes damping), ``K_eff = a``.
    Shapes broadcast.
    """
    a, momentum, k_ref = as_numbers(a, momentum, k_ref)
    mass = (1.0 + momentum) / 2.0 + a * k_ref**2 / 2.0
    damping = (1.0 - momentum) - a * k_ref
    return mass, damping, a


def coefficients_from_hyperparameters(eta, stiffness, momentum, k_ref, convention: str = HEAVY_BALL):
    """``(M_eff, C_eff, K_eff)`` from learning rate, curvature ``K``, momentum and lag."""
    return oscillator_coefficients(gain(eta, stiffness, momentum, convention), momentum, k_ref)


def damping_ratio(mass, damping, k_eff):
    """``zeta = C / (2 sqrt(M K_eff))``; oscillatory when ``zeta < 1``."""
    mass, damping, k_eff = as_numbers(mass, damping, k_eff)
    ops = ops_for(mass, damping, k_eff)
    return damping / (2.0 * ops.sqrt(mass * k_eff))


def natural_frequency(mass, k_eff):
    """``w0 = sqrt(K_eff / M)`` in radians per optimizer step."""
    mass, k_eff = as_numbers(mass, k_eff)
    ops = ops_for(mass, k_eff)
    return ops.sqrt(k_eff / mass)


def stationary_variance(noise_d, group_size, damping, k_eff):
    """Stationary variance of the reward around the plateau, ``D / (2 G C K_eff)``."""
    noise_d, group_size, damping, k_eff = as_numbers(noise_d, group_size, damping, k_eff)
    return noise_d / (2.0 * group_size * damping * k_eff)


def retime_oscillator(w0, zeta, source, target):
    """``(w0, zeta)`` of an LLM's run carried from its own setting to another one of the same LLM.

    The curvature ``K`` belongs to the LLM; the gain ``a = eta_eff K`` scales with the
    effective step (:func:`effective_step`), and the mass and damping follow the gain, the
    momentum and the lag as in :func:`oscillator_coefficients`. The run's gain is read from
    its natural frequency (``w0^2 = a / M(a)``, so ``a = w0^2 (1 + mu)/2 / (1 - w0^2 L^2/2)``);
    whatever damping the run has beyond the mechanistic ``(1 - mu) - a L`` (a fitted
    phenomenological ``zeta`` need not follow it) is kept as an additive excess ``C - C_mech``.
    At the target, ``a' = a eta_eff' / eta_eff``, ``M' = M(a')``, ``C' = C_mech(a') + excess``.
    A run that follows the mechanistic law keeps following it; with only the learning rate
    changed and no lag, ``w0`` scales as ``sqrt(r)`` and ``zeta`` as ``1/sqrt(r)``
    (``r = eta'/eta``); the same setting returns the input.

    ``w0`` in radians per optimizer step, ``zeta`` dimensionless (arrays broadcast);
    ``source`` and ``target``: mappings with ``learning_rate``, ``momentum``, ``k_ref``
    (steps) and ``momentum_convention``. Returns ``(w0', zeta')``, NaN where the run's
    frequency admits no gain at its lag (``w0^2 L^2 >= 2``) or the target would not be a
    damped oscillator (``C' <= 0``: unstable there).
    """
    w0 = np.asarray(w0, dtype=float)
    zeta = np.asarray(zeta, dtype=float)
    mu_s, lag_s = float(source["momentum"]), float(source["k_ref"])
    mu_t, lag_t = float(target["momentum"]), float(target["k_ref"])
    step_s = effective_step(float(source["learning_rate"]), mu_s, str(source["momentum_convention"]))
    step_t = effective_step(float(target["learning_rate"]), mu_t, str(target["momentum_convention"]))
    w2 = w0 * w0
    with np.errstate(divide="ignore", invalid="ignore"):
        room = 1.0 - w2 * lag_s**2 / 2.0
        a_s = np.where(room > 0.0, w2 * (1.0 + mu_s) / 2.0 / room, np.nan)
        mass_s, damping_mech_s, _ = oscillator_coefficients(a_s, mu_s, lag_s)
        excess = 2.0 * zeta * w0 * mass_s - damping_mech_s
        a_t = a_s * (step_t / step_s)
        mass_t, damping_t, _ = oscillator_coefficients(a_t, mu_t, lag_t)
        damping_t = damping_t + excess
        w0_t = np.sqrt(a_t / mass_t)
        zeta_t = np.where(damping_t > 0.0, damping_t / (2.0 * np.sqrt(a_t * mass_t)), np.nan)
    return np.where(np.isfinite(zeta_t), w0_t, np.nan), zeta_t


__all__ = [
    "effective_step",
    "gain",
    "oscillator_coefficients",
    "coefficients_from_hyperparameters",
    "damping_ratio",
    "natural_frequency",
    "stationary_variance",
    "retime_oscillator",
]
