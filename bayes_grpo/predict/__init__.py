"""Prediction for new hyperparameters, forecasting of runs in progress, comparison of laws."""

from bayes_grpo.predict.forecast import (
    ForecastError,
    GaussianPrior,
    RunForecaster,
    coverage,
    default_prior,
    fit_run,
    forecast_run,
    prior_from_posterior,
    prior_from_runs,
)
from bayes_grpo.predict.summary import band, summarise_draws, summary_dict

__all__ = [
    "ForecastError",
    "GaussianPrior",
    "RunForecaster",
    "band",
    "coverage",
    "default_prior",
    "fit_run",
    "forecast_run",
    "prior_from_posterior",
    "prior_from_runs",
    "summarise_draws",
    "summary_dict",
]
