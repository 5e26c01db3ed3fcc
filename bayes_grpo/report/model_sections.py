"""Report sections that come from a fitted model: fit per run, convergence, posteriors."""

from __future__ import annotations

from typing import Any

from bayes_grpo.report.sections import Section, absent

FIT_INTRO = "Posterior-mean trajectory and 90% bands of the mean trajectory per run, against the logged reward, with R^2."
CONVERGENCE_INTRO = "R-hat, bulk and tail ESS, divergences, tree depth and E-BFMI of the sampler, with rank plots."
POSTERIOR_INTRO = "Posteriors of M_eff, C_eff, K_eff, zeta and D per model and group size."


def model_sections(model: Any | None) -> list[Section]:
    """The fit, convergence and posterior sections (absent when no fitted model is given)."""
    if model is None:
        reason = "no fitted posterior was given (bayes-grpo fit, then bayes-grpo report models/NAME.nc)."
        return [
            absent("fit", "Fit per run", reason, FIT_INTRO),
            absent("convergence", "Convergence", reason, CONVERGENCE_INTRO),
            absent("posteriors", "Posteriors of the oscillator coefficients", reason, POSTERIOR_INTRO),
        ]
    raise NotImplementedError("model sections are wired to bayes_grpo.model once it lands")
