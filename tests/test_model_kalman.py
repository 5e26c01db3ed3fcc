"""The state-space likelihood equals a dense Gaussian likelihood of the same SDE (to 1e-6)."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.linalg as sl
from scipy.integrate import quad_vec
from scipy.stats import multivariate_normal

from bayes_grpo.model.kalman import grid_intervals, kalman_loglik, process_noise, transition


def _dense_loglik(y, t_obs, mass, damping, k_eff, q, r, e0):
    """Independent route: mean from expm, covariance from numerical integration."""
    a = np.array([[0.0, 1.0], [-k_eff / mass, -damping / mass]])
    bb = np.array([[0.0, 0.0], [0.0, q / mass**2]])

    def state_cov(t):
        return quad_vec(lambda u: sl.expm(a * u) @ bb @ sl.expm(a * u).T, 0.0, t, epsabs=1e-15, epsrel=1e-12)[0]

    mean = np.array([(sl.expm(a * t) @ [e0, 0.0])[0] for t in t_obs])
    n = len(t_obs)
    cov = np.zeros((n, n))
    covs = [state_cov(t) for t in t_obs]
    for i in range(n):
        for j in range(i + 1):
            c = (sl.expm(a * (t_obs[i] - t_obs[j])) @ covs[j])[0, 0]
            cov[i, j] = cov[j, i] = c
    cov += r * np.eye(n)
    return multivariate_normal(mean, cov).logpdf(y)


CASES = [
    (1.0, 0.3, 0.02),  # overdamped, slow
    (0.8, 0.05, 0.3),  # underdamped
    (1.2, 0.6, 0.05),  # overdamped, long gaps (Lyapunov branch)
    (1.0, 2 * 0.01, 1e-4),  # critically damped, very slow
    (0.5, 3.0, 0.5),  # stiff, heavily overdamped
    (0.95, 0.099, 0.0026),  # Adam-like heavy ball at the critical point
]


def test_state_space_likelihood_equals_dense_gaussian_likelihood():
    rng = np.random.default_rng(7)
    steps = np.array([0.0, 1, 2, 3, 5, 6, 9, 10, 11, 30, 31, 32])
    y = rng.normal(scale=0.5, size=(2, len(steps)))
    mask = np.ones_like(y)
    mask[0, [3, 7]] = 0  # gaps
    mask[1, 8:] = 0  # a shorter (ragged) run
    q, r, e0 = np.array([0.05, 0.2]), np.array([0.01, 0.05]), np.array([-1.0, 0.7])
    params = [pt.dvector(n) for n in ("mass", "damping", "k_eff")]
    fn = pytensor.function(params, kalman_loglik(y, mask, steps, *params, q, r, e0, per_run=True))
    for mass, damping, k_eff in CASES:
        got = fn(*[np.full(2, v) for v in (mass, damping, k_eff)])
        for i in range(2):
            keep = mask[i] > 0
            want = _dense_loglik(y[i, keep], steps[keep], mass, damping, k_eff, q[i], r[i], e0[i])
            assert abs(got[i] - want) < 1e-6, (mass, damping, k_eff, i, got[i], want)


def test_transition_and_process_noise_match_matrix_exponential():
    mass, damping, k_eff, q = 1.1, 0.2, 0.4, 0.3
    a = np.array([[0.0, 1.0], [-k_eff / mass, -damping / mass]])
    bb = np.array([[0.0, 0.0], [0.0, q / mass**2]])
    dts = pt.dmatrix("dt")
    qfn = pytensor.function([dts], list(process_noise(dts, *[pt.as_tensor([v]) for v in (mass, damping, k_eff, q)])))
    for dt in (0.3, 1.0, 4.0, 25.0):
        f = np.ravel([np.asarray(v) for v in transition(np.array([[dt]]), mass, damping, k_eff)])
        np.testing.assert_allclose(f, sl.expm(a * dt).ravel(), rtol=1e-10, atol=1e-13)
        qk = [float(v.item()) for v in qfn(np.array([[dt]]))]
        want = quad_vec(lambda u: sl.expm(a * u) @ bb @ sl.expm(a * u).T, 0.0, dt, epsabs=1e-15, epsrel=1e-12)[0]
        np.testing.assert_allclose(qk, [want[0, 0], want[0, 1], want[1, 1]], rtol=1e-8, atol=1e-14)


def test_state_space_likelihood_has_finite_gradients():
    steps = np.arange(1.0, 40.0)
    y = np.sin(steps / 5.0)[None, :]
    mask = np.ones_like(y)
    theta = pt.dvector("theta")
    ll = kalman_loglik(y, mask, steps, theta[0:1], theta[1:2], theta[2:3], theta[3:4], theta[4:5], theta[5:6])
    fn = pytensor.function([theta], pytensor.grad(ll, theta))
    for point in ([1.0, 0.2, 0.01, 0.1, 0.05, -1.0], [1.0, 0.2, 0.01, 0.1, 0.05, -1.0 + 1e-9], [0.9, 0.1, 0.0025, 0.02, 0.01, -0.5]):
        g = fn(np.array(point))
        assert np.all(np.isfinite(g))


def test_grid_intervals_start_at_zero_and_reject_unsorted_steps():
    unique, index = grid_intervals(np.array([2.0, 3.0, 4.0, 10.0]))
    np.testing.assert_allclose(unique[index], [2.0, 1.0, 1.0, 6.0])
    with pytest.raises(ValueError):
        grid_intervals(np.array([3.0, 2.0]))



def test_transition_graph_of_symbolic_coefficients_canonicalises_quickly():
    # Regression: written through error_trajectory with the unit initial states (1, 0) and (0, 1),
    # the products with the constant 0 sent PyTensor's canonicaliser into a rewrite that did not
    # finish in minutes for a handful of nodes, so the state-space model never compiled under
    # nutpie. It takes well under a second now. It runs in a subprocess because the rewriter
    # swallows exceptions raised inside it (an alarm cannot interrupt it).
    import subprocess
    import sys

    code = (
        "import numpy as np, pytensor.tensor as pt\n"
        "from pytensor.graph.rewriting.utils import rewrite_graph\n"
        "from bayes_grpo.model.kalman import transition\n"
        "m, c, k = (pt.dvector(n) for n in 'mck')\n"
        "total = sum(f.sum() for f in transition(np.arange(5.0)[:, None], m, c, k))\n"
        "rewrite_graph(total, include=['canonicalize', 'stabilize'])\n"
    )
    try:
        subprocess.run([sys.executable, "-c", code], check=True, timeout=120, capture_output=True)
    except subprocess.TimeoutExpired:
        pytest.fail("canonicalisation of the symbolic transition matrix did not finish in 120 s")


@pytest.mark.parametrize("exponent", ["alpha", 0, {"mu": 0.5, "sigma": 1.0}])
def test_measurement_noise_scales_with_g_as_configured(exponent):
    # TRL's batch size counts completions: with a fixed number per step the logged mean is as
    # noisy at G = 32 as at G = 2, while the model scaled the measurement noise by G^-alpha
    # like the SDE noise. A state-space fit of such runs read alpha 0.15 [0.09, 0.21] for a
    # truth of 1. noise.measurement_g_exponent now sets the measurement noise's own exponent.
    import arviz as az

    from bayes_grpo.dynamics.simulate import simulate_sde_runset
    from bayes_grpo.model import GRPODynamicsModel

    ds = simulate_sde_runset(
        models={"m": {"stiffness": 400.0, "plateau": 0.7, "initial_reward": 0.2, "noise_d": 2e-4}},
        group_sizes=(2, 32), learning_rates=(1e-4,), n_seeds=1, n_steps=40, measurement_sd=0.05,
    )
    model = GRPODynamicsModel(model_config={"noise": {"measurement_g_exponent": exponent}}, likelihood="state_space")
    prior = model.sample_prior_predictive(ds, samples=50, random_seed=2).prior
    g = ds["group_size"].values
    stat_var = prior["noise_d"].values[..., :1] / (g ** prior["alpha"].values[..., None] * 2 * np.abs(prior["C_eff"].values) * prior["K_eff"].values)
    meas_var = prior["sigma"].values ** 2 - stat_var  # (chain, draw, run): runs G = 2, G = 32
    ratio = meas_var[..., 0] / meas_var[..., 1]
    if exponent == "alpha":
        expected = 16.0 ** prior["alpha"].values  # (G / G_ref)^-alpha per run
    elif exponent == 0:
        expected = np.ones_like(ratio)
    else:
        expected = 16.0 ** prior["measurement_alpha"].values
    np.testing.assert_allclose(ratio, expected, rtol=1e-6)
    assert ("measurement_alpha" in prior) == isinstance(exponent, dict)
    # a new run's sigma (coefficient_draws: predict, forecast priors) follows the same law
    model.runset, model.idata = ds, az.InferenceData(posterior=prior)
    for run in range(2):
        coords = {k: ds[k].values.tolist()[run] for k in ("learning_rate", "momentum", "momentum_convention", "k_ref", "group_size")}
        draws = model.coefficient_draws(model="m", run_offset=False, **coords)
        np.testing.assert_allclose(draws["sigma"].values, prior["sigma"].values[..., run], rtol=1e-6)
        # and its measurement part, which the stationary-variance check adds to D / (2 G C K_eff)
        np.testing.assert_allclose(draws["measurement_sd"].values ** 2, meas_var[..., run], rtol=1e-6)


def test_a_measurement_exponent_that_is_not_a_number_alpha_or_a_prior_is_a_clear_error():
    from bayes_grpo.model import GRPODynamicsModel

    for bad in ("none", True, {"mu": 0.0}, {"mu": 0.0, "sigma": -1.0}, float("nan")):
        with pytest.raises(ValueError, match="measurement_g_exponent"):
            GRPODynamicsModel(model_config={"noise": {"measurement_g_exponent": bad}}, likelihood="state_space")


def test_the_batch_exponent_tells_a_fixed_prompt_budget_from_a_fixed_completion_budget():
    from bayes_grpo.model.prepare import batch_g_exponent

    g = np.array([4.0, 4.0, 16.0, 16.0])
    assert batch_g_exponent(g, 8 * g) == 1.0  # 8 prompts x G completions per step
    assert batch_g_exponent(g, np.full(4, 128.0)) == 0.0  # TRL-style: 128 completions at any G
    assert np.isnan(batch_g_exponent(g, np.array([32.0, 128.0, 128.0, 128.0])))
    assert batch_g_exponent(np.full(4, 8.0), np.full(4, 64.0)) is None  # one G: nothing to tell
    assert batch_g_exponent(g, np.full(4, np.nan)) is None  # batches unknown


@pytest.mark.parametrize(
    "completions, exponent, says",
    [
        ((128, 128), "alpha", "set noise.measurement_g_exponent to 0"),
        ((128, 128), 0, None),
        ((16, 256), "alpha", None),
        ((16, 256), 0, "set noise.measurement_g_exponent to 'alpha' or 1"),
        ((np.nan, np.nan), "alpha", None),
        ((128, 128), {"mu": 0.5, "sigma": 0.5}, None),
    ],
)
def test_a_state_space_fit_says_when_the_logged_batches_contradict_its_measurement_scaling(completions, exponent, says):
    # the runner records completions per step; a run set of G 2 and 32 runs at 128 completions
    # each was fitted with the measurement noise falling as G^-alpha and nothing said so
    from bayes_grpo.dynamics.simulate import simulate_sde_runset
    from bayes_grpo.model import GRPODynamicsModel

    ds = simulate_sde_runset(
        models={"m": {"stiffness": 400.0, "plateau": 0.7, "initial_reward": 0.2, "noise_d": 2e-4}},
        group_sizes=(2, 32), learning_rates=(1e-4,), n_seeds=1, n_steps=40, measurement_sd=0.05,
    )
    ds = ds.assign_coords(completions_per_step=("run", np.array(completions, dtype=float)))
    model = GRPODynamicsModel(model_config={"noise": {"measurement_g_exponent": exponent}}, likelihood="state_space")
    model.build_model(ds)
    found = [n for n in model.data.notes if "measurement" in n]
    if says is None:
        assert not found, found
    else:
        assert len(found) == 1 and says in found[0], found
    iid = GRPODynamicsModel(likelihood="iid")  # no measurement noise of its own: no note
    iid.build_model(ds)
    assert not [n for n in iid.data.notes if "measurement" in n]
