"""The mathematics of the reduced-order GRPO model: small pure functions (NumPy and PyTensor)."""

from bayes_grpo.dynamics.coefficients import (
    coefficients_from_hyperparameters,
    damping_ratio,
    effective_step,
    gain,
    natural_frequency,
    oscillator_coefficients,
    stationary_variance,
)
from bayes_grpo.dynamics.stability import (
    CRITERIA,
    REGIMES,
    boundary_locus_threshold,
    classify_regime,
    closed_form_stable,
    closed_form_threshold,
    critical_k_ref,
    exact_stable,
    exact_threshold,
    phase_grid,
    spectral_radius,
)
from bayes_grpo.dynamics.trajectory import (
    error_trajectory,
    logistic,
    reward_trajectory,
    single_exponential,
)

__all__ = [
    "CRITERIA",
    "REGIMES",
    "boundary_locus_threshold",
    "classify_regime",
    "closed_form_stable",
    "closed_form_threshold",
    "critical_k_ref",
    "exact_stable",
    "exact_threshold",
    "phase_grid",
    "spectral_radius",
    "coefficients_from_hyperparameters",
    "damping_ratio",
    "effective_step",
    "error_trajectory",
    "gain",
    "logistic",
    "natural_frequency",
    "oscillator_coefficients",
    "reward_trajectory",
    "single_exponential",
    "stationary_variance",
]
