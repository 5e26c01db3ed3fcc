"""Bayes-factor machinery against the analytic Bayes factor of a conjugate Normal model.

SMC evidence, bridge sampling (NUTS draws) and Savage-Dickey (Gaussian, KDE and
importance-weighted posterior densities) are each checked against the closed form.

Model: ``y_i = mu + delta x_i + eps_i``, ``eps ~ N(0, 1)``, ``mu ~ N(0, 1)``,
``H1: delta ~ N(0, s)``, ``H0: delta = 0``. The marginal likelihoods are Gaussian:
``y ~ N(0, I + 1 1^T + s^2 x x^T)`` under H1 and without the last term under H0.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from scipy import stats

from bayes_grpo.checks.bayes_factor import (
    UnconstrainedPosterior,
    bayes_factor_words,
    bridge_evidence,
    bridge_sampling,
    combine_chain_evidence,
    final_log_marginal_likelihood,
    log_bf01_from_bridge,
    log_bf01_from_evidence,
    log_density_at,
    normal_log_density_at_zero,
    offset_prior_log_density_at_zero,
    savage_dickey,
    savage_dickey_importance,
    smc_evidence,
)


def _data(delta: float, n: int = 40, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = np.linspace(-1, 1, n)
    y = 0.3 + delta * x + rng.normal(0, 1, n)
    return x, y


def _analytic_log_ml(x, y, s):
    cov = np.eye(len(y)) + np.ones((len(y), len(y))) + s**2 * np.outer(x, x)
    return stats.multivariate_normal(np.zeros(len(y)), cov).logpdf(y)


def _models(x, y, s):
    with pm.Model() as h0:
        mu = pm.Normal("mu", 0, 1)
        pm.Normal("y", mu, 1, observed=y)
    with pm.Model() as h1:
        mu = pm.Normal("mu", 0, 1)
        delta = pm.Normal("delta", 0, s)
        pm.Normal("y", mu + delta * x, 1, observed=y)
    return h0, h1


def test_final_log_marginal_likelihood_handles_ragged_nan_padded_stats():
    # PyMC's layout when all chains ran the same number of stages: (chain, stage), NaN-padded.
    stats_obj = np.empty((3, 3), dtype=object)
    stats_obj[0] = [np.nan, np.nan, -10.0]
    stats_obj[1] = [np.nan, -12.0, np.nan]
    stats_obj[2] = [np.nan, None, np.nan]  # a chain that produced nothing
    out = final_log_marginal_likelihood(stats_obj)
    assert out[0] == -10.0 and out[1] == -12.0 and np.isnan(out[2])
    log_ml, err = combine_chain_evidence(out)
    assert log_ml == pytest.approx(np.log((np.exp(-10.0) + np.exp(-12.0)) / 2))
    assert err == pytest.approx(np.std([-10.0, -12.0], ddof=1) / np.sqrt(2))
    # PyMC's ragged layout when chains ran different numbers of stages: shape (1, chain).
    ragged = np.empty((1, 2), dtype=object)
    ragged[0, 0] = [np.nan, np.nan, 46.86]
    ragged[0, 1] = [np.nan, 46.85]
    assert final_log_marginal_likelihood(ragged).tolist() == [46.86, 46.85]
    with pytest.raises(ValueError, match="no finite"):
        combine_chain_evidence([np.nan, np.nan])


@pytest.mark.parametrize("delta", [0.0, 1.5])
def test_smc_and_savage_dickey_match_the_analytic_bayes_factor(delta):
    s = 1.0
    x, y = _data(delta)
    exact = _analytic_log_ml(x, y, 0.0) - _analytic_log_ml(x, y, s)
    h0, h1 = _models(x, y, s)
    e0 = smc_evidence(h0, draws=600, chains=3, random_seed=1)
    e1 = smc_evidence(h1, draws=600, chains=3, random_seed=2)
    assert e0.log_ml == pytest.approx(_analytic_log_ml(x, y, 0.0), abs=0.15)
    assert e1.log_ml == pytest.approx(_analytic_log_ml(x, y, s), abs=0.15)
    log_bf, err = log_bf01_from_evidence(e0, e1)
    assert np.isfinite(err) and err < 0.2
    assert log_bf == pytest.approx(exact, abs=0.25)
    draws = e1.idata.posterior["delta"].values[..., None]  # (chain, draw, 1)
    sd = savage_dickey(draws, log_prior_density=normal_log_density_at_zero([s]))
    assert sd.log_bf01 == pytest.approx(exact, abs=0.25)
    assert sd.in_support == (delta == 0.0)
    if sd.in_support:  # a KDE only knows the density where there are draws
        sd_kde = savage_dickey(
            draws, log_prior_density=normal_log_density_at_zero([s]), method="kde"
        )
        assert sd_kde.log_bf01 == pytest.approx(exact, abs=0.35)
    # The verdict follows the truth: invariance supported when delta = 0, rejected otherwise.
    assert (exact > 0) == (delta == 0.0)
    assert ("H1" in bayes_factor_words(log_bf)) == (delta != 0.0)


def test_the_words_for_an_inconclusive_bayes_factor_give_its_range_on_both_sides():
    # "inconclusive (|BF| < 3)" held for BF01 = 0.2 too, which is moderate evidence for H1
    assert bayes_factor_words(np.log(0.5)) == "inconclusive (BF01 between 1/3 and 3)"
    assert bayes_factor_words(np.log(2.0)) == "inconclusive (BF01 between 1/3 and 3)"
    assert bayes_factor_words(np.log(0.2)) == "moderate evidence for H1 (G-dependence)"
    assert bayes_factor_words(np.log(5.0)) == "moderate evidence for H0 (invariance)"


def test_savage_dickey_in_several_dimensions_matches_the_exact_gaussian_ratio():
    rng = np.random.default_rng(3)
    mean = np.array([0.5, -0.2, 0.1])
    cov = np.array([[0.04, 0.01, 0.0], [0.01, 0.09, 0.02], [0.0, 0.02, 0.05]])
    draws = rng.multivariate_normal(mean, cov, size=(4, 4000))
    scales = [0.5, 0.5, 1.0]
    exact = stats.multivariate_normal(mean, cov).logpdf(np.zeros(3)) - normal_log_density_at_zero(
        scales
    )
    sd = savage_dickey(draws, log_prior_density=normal_log_density_at_zero(scales))
    assert sd.dim == 3
    assert sd.log_bf01 == pytest.approx(exact, abs=0.1)
    assert np.isfinite(sd.mc_error) and sd.mc_error < 0.1
    prior = rng.normal(0, scales, size=(20000, 3))
    sd_prior = savage_dickey(draws, prior_draws=prior)
    assert sd_prior.log_bf01 == pytest.approx(exact, abs=0.15)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="unknown density method"):
        log_density_at(np.zeros((10, 1)), method="spline")
    with pytest.raises(ValueError, match="more than"):
        log_density_at(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="positive"):
        normal_log_density_at_zero([0.0])
    with pytest.raises(ValueError, match="log_prior_density or prior_draws"):
        savage_dickey(np.zeros((10, 1)))


# ----------------------------------------------------------------------------- bridge sampling


def _models_with_positive_nuisance(x, y, s):
    """The conjugate models plus a HalfNormal nuisance that does not touch the likelihood.

    Its prior integrates to 1, so the analytic marginal likelihoods are unchanged, while the
    log-transformed value variable exercises the Jacobian of the unconstrained space.
    """
    with pm.Model() as h0:
        mu = pm.Normal("mu", 0, 1)
        pm.HalfNormal("tau", 1.0)
        pm.Normal("y", mu, 1, observed=y)
    with pm.Model() as h1:
        mu = pm.Normal("mu", 0, 1)
        pm.HalfNormal("tau", 1.0)
        delta = pm.Normal("delta", 0, s)
        pm.Normal("y", mu + delta * x, 1, observed=y)
    return h0, h1


@pytest.mark.parametrize("delta", [0.0, 1.5])
def test_bridge_sampling_matches_the_analytic_marginal_likelihood_and_bayes_factor(delta):
    s = 1.0
    x, y = _data(delta)
    h0, h1 = _models_with_positive_nuisance(x, y, s)
    b0 = bridge_evidence(h0, draws=600, tune=400, chains=2, random_seed=1)
    b1 = bridge_evidence(h1, draws=600, tune=400, chains=2, random_seed=2)
    assert b0.log_ml == pytest.approx(_analytic_log_ml(x, y, 0.0), abs=0.06)
    assert b1.log_ml == pytest.approx(_analytic_log_ml(x, y, s), abs=0.06)
    # the reported Monte Carlo error is small and of the size of the actual error
    assert 0.0 < b0.mc_error < 0.06 and 0.0 < b1.mc_error < 0.06
    exact = _analytic_log_ml(x, y, 0.0) - _analytic_log_ml(x, y, s)
    log_bf, err = log_bf01_from_bridge(b0, b1)
    assert log_bf == pytest.approx(exact, abs=0.1)
    assert err == pytest.approx(np.hypot(b0.mc_error, b1.mc_error))
    # Savage-Dickey from the same NUTS draws, two density estimators, prior density from the model
    post = b1.posterior
    idx = post.index_of(["delta"])
    log_prior0 = offset_prior_log_density_at_zero(h1, ["delta"])
    assert log_prior0 == pytest.approx(normal_log_density_at_zero([s]))
    sd_is = savage_dickey_importance(post, idx, log_prior0)
    assert sd_is.method == "importance" and sd_is.dim == 1
    assert sd_is.log_bf01 == pytest.approx(exact, abs=0.1)
    sd_g = savage_dickey(post.draws[..., idx], log_prior_density=log_prior0)
    assert sd_g.in_support == (delta == 0.0)
    if sd_g.in_support:  # out of support a Gaussian fit extrapolates 6 sd into its tail
        assert sd_g.log_bf01 == pytest.approx(exact, abs=0.25)


def test_bridge_sampling_of_draws_from_a_centred_twin_matches_the_analytic_marginal_likelihood():
    # sample_with: NUTS on another parameterisation of the model (the G-invariance check samples
    # H1 with centred offsets), the draws and the log density read back as the model's own
    s = 1.0
    x, y = _data(1.5)
    _, h1 = _models_with_positive_nuisance(x, y, s)
    with pm.Model() as twin:
        mu = pm.Normal("mu", 0, 1)
        pm.HalfNormal("tau", 1.0)
        value = pm.Normal("value", mu, s)  # mu + delta, delta ~ Normal(0, s)
        delta = pm.Deterministic("delta", value - mu)
        pm.Normal("y", mu + delta * x, 1, observed=y)
    b1 = bridge_evidence(h1, draws=600, tune=400, chains=2, random_seed=2, sample_with=twin)
    assert b1.posterior.names == [v.name for v in h1.value_vars]
    assert b1.log_ml == pytest.approx(_analytic_log_ml(x, y, s), abs=0.06)
    with pm.Model() as lacking:  # the same distribution, but no variable named delta
        mu = pm.Normal("mu", 0, 1)
        pm.HalfNormal("tau", 1.0)
        value = pm.Normal("value", mu, s)
        pm.Normal("y", value * x + mu * (1 - x), 1, observed=y)
    with pytest.raises(ValueError, match=r"\(sample_with\) has no free or deterministic variable named \['delta'\]"):
        bridge_evidence(h1, draws=20, tune=10, chains=1, sample_with=lacking)


def test_bridge_sampling_is_exact_for_a_gaussian_target_in_several_dimensions():
    """Unnormalised correlated Gaussian (known constant), exact draws: no MCMC involved."""
    rng = np.random.default_rng(5)
    k = 6
    a = rng.normal(size=(k, k))
    cov = a @ a.T / k + 0.5 * np.eye(k)
    mean = rng.normal(size=k)
    log_const = 12.3  # q = exp(log_const) * N(mean, cov): log_ml = log_const
    dist = stats.multivariate_normal(mean, cov)
    post = UnconstrainedPosterior(
        names=["theta"],
        sizes=[k],
        shapes=[(k,)],
        draws=dist.rvs(size=(2, 1000), random_state=rng),
        log_density=lambda v: log_const + dist.logpdf(v),
    )
    res = bridge_sampling(post, random_seed=0)
    assert res.log_ml == pytest.approx(log_const, abs=0.02)
    assert res.mc_error < 0.05 and res.n_iter >= 1
    # importance-weighted Savage-Dickey: exact Gaussian marginal density at 0 of 2 coordinates
    idx = np.array([1, 4])
    sd = savage_dickey_importance(post, idx, log_prior_density=0.0)
    exact = stats.multivariate_normal(mean[idx], cov[np.ix_(idx, idx)]).logpdf(np.zeros(2))
    assert sd.log_bf01 == pytest.approx(exact, abs=0.02)


def test_offset_prior_must_not_depend_on_other_parameters():
    with pm.Model() as m:
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("delta", 0, s)
    with pytest.raises(ValueError, match="depends on other parameters"):
        offset_prior_log_density_at_zero(m, ["delta"])
    with pytest.raises(ValueError, match="transformed"):
        offset_prior_log_density_at_zero(m, ["s_log__"])
    post = UnconstrainedPosterior(["a"], [1], [(1,)], np.zeros((2, 30, 1)), lambda v: 0.0)
    with pytest.raises(ValueError, match="no value variable"):
        post.index_of(["b"])


def test_bridge_sampling_that_does_not_converge_says_why_and_what_to_do():
    # the error was only "did not converge in 1000 iterations", after minutes of sampling
    rng = np.random.default_rng(1)
    dist = stats.multivariate_normal(np.zeros(3), np.eye(3))
    post = UnconstrainedPosterior(
        names=["theta"],
        sizes=[3],
        shapes=[(3,)],
        draws=dist.rvs(size=(2, 40), random_state=rng),
        log_density=lambda v: dist.logpdf(v),
    )
    with pytest.raises(ValueError) as exc:
        bridge_sampling(post, random_seed=0, tol=0.0, max_iter=3)
    msg = str(exc.value)
    assert "did not converge in 3 iterations" in msg
    assert "40 draws of 3 parameters" in msg and "sample more draws" in msg


def test_bridge_sampling_of_one_parameter_names_it_in_the_singular():
    # a model of one parameter read "its normal proposal, fitted to 40 draws of 1 parameters"
    rng = np.random.default_rng(1)
    dist = stats.norm(0.0, 1.0)
    post = UnconstrainedPosterior(
        names=["theta"], sizes=[1], shapes=[(1,)],
        draws=dist.rvs(size=(2, 40, 1), random_state=rng),
        log_density=lambda v: dist.logpdf(v).sum(axis=-1),
    )
    with pytest.raises(ValueError) as exc:
        bridge_sampling(post, random_seed=0, tol=0.0, max_iter=3)
    assert "fitted to 40 draws of 1 parameter, overlaps" in str(exc.value), str(exc.value)


def test_bridge_sampling_on_fewer_draws_than_parameters_says_so_not_that_a_matrix_is_singular():
    # 10 draws of 16 parameters in the first halves gave numpy's "When `allow_singular is
    # False`, the input matrix must be symmetric positive definite"
    rng = np.random.default_rng(1)
    dist = stats.multivariate_normal(np.zeros(16), np.eye(16))
    post = UnconstrainedPosterior(
        names=["theta"],
        sizes=[16],
        shapes=[(16,)],
        draws=dist.rvs(size=(1, 20), random_state=rng)[None],
        log_density=lambda v: dist.logpdf(v),
    )
    with pytest.raises(ValueError, match="10 draws of 16 parameters are too few .*sample more draws or chains"):
        bridge_sampling(post, random_seed=0)


def test_bridge_sampling_refuses_fewer_than_four_draws_per_parameter_not_only_fewer_than_parameters():
    # 2 x 100 draws of 47 parameters (100 fit the proposal) passed the old rule (more draws
    # than parameters) and did not converge; 3 per parameter is refused, 4 is sampled
    rng = np.random.default_rng(2)
    k = 5
    dist = stats.multivariate_normal(np.zeros(k), np.eye(k))

    def post(n_per_chain):
        return UnconstrainedPosterior(
            names=["theta"], sizes=[k], shapes=[(k,)],
            draws=dist.rvs(size=(1, n_per_chain), random_state=rng)[None],
            log_density=lambda v: dist.logpdf(v),
        )

    with pytest.raises(ValueError, match=r"15 draws of 5 parameters are too few \(it needs at least 20, 4 per parameter\)"):
        bridge_sampling(post(30), random_seed=0)
    assert np.isfinite(bridge_sampling(post(40), random_seed=0).log_ml)


def test_bridge_sampling_whose_proposal_covariance_is_singular_says_so_and_what_to_do():
    # a parameter that did not move in the first halves of the chains (enough draws per
    # parameter, past the check) gave scipy's "When `allow_singular is False`, the input matrix
    # must be symmetric positive definite", naming nothing a user sets
    rng = np.random.default_rng(3)
    draws = rng.normal(size=(2, 70, 3))
    draws[..., 2] = 0.5
    post = UnconstrainedPosterior(
        names=["theta"], sizes=[3], shapes=[(3,)], draws=draws,
        log_density=lambda v: float(-0.5 * np.sum(np.square(v))),
    )  # fmt: skip
    with pytest.raises(ValueError) as exc:
        bridge_sampling(post, random_seed=0)
    msg = str(exc.value)
    assert type(exc.value).__name__ == "TooFewDrawsError"  # one more draws can cure
    assert "covariance of those 70 draws of 3 parameters is singular (1 parameter did not move: 2)" in msg, msg
    assert "sample more draws or chains" in msg and "allow_singular" not in msg


def test_smc_evidence_says_nothing_on_stderr_without_its_progress(capfd):
    # every SMC fit printed ArviZ's "More chains (2) than draws (1)" (its per-stage sample stats
    # read as draws) and PyMC's "Initializing SMC sampler ...", under `invariance --json` too
    import warnings

    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        pm.Normal("y", mu, 1, observed=np.zeros(5))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evidence = smc_evidence(model, draws=50, chains=2, random_seed=1)
    assert np.isfinite(evidence.log_ml)
    assert not [str(w.message) for w in caught if "More chains" in str(w.message)]
    assert "SMC" not in capfd.readouterr().err
