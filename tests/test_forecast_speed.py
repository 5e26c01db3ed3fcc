"""A forecast's computational core does less work for the same answers: the trajectory's
branches no element takes are not evaluated, the censored probabilities are taken at the
censored steps only, the Laplace Hessian is one batched evaluation, the prior-conflict
check factors each component's covariance once, and BLAS runs on one thread for the
forecast's small matrices. Each is checked for the same values, bit for bit, as the
work it replaces (speed itself: ``benchmarks/bench_forecast.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from bayes_grpo.dynamics import _backend, trajectory
from bayes_grpo.predict import forecast


def _all_branches():
    """NumPy's namespace under another name: :func:`trajectory._propagators` then evaluates
    every branch over every element, as it did before (and as it does for PyTensor)."""
    return SimpleNamespace(**{**vars(_backend.NUMPY), "name": "numpy-all-branches"})


def _rows(rng, n, regime):
    w0 = np.exp(rng.normal(np.log(0.05), 0.3, (n, 1)))
    zeta = {"over": 2.0 + rng.uniform(0, 1, (n, 1)), "under": 0.3 + rng.uniform(0, 0.3, (n, 1)),
            "mixed": np.exp(rng.normal(0.0, 1.0, (n, 1)))}[regime]  # fmt: skip
    return 2.0 * zeta * w0, w0 * w0


@pytest.mark.parametrize("by_element", [False, True])
@pytest.mark.parametrize("regime", ["over", "under", "mixed"])
def test_numpy_propagators_are_the_all_branch_values_bit_for_bit(regime, by_element, monkeypatch):
    if by_element:  # each branch at its own elements, whatever the size
        monkeypatch.setattr(trajectory, "SUBSET_ELEMENTS", 0)
    rng = np.random.default_rng(1)
    for _ in range(40):
        damping, k_eff = _rows(rng, 13, regime)
        t = np.sort(rng.uniform(0, 300, 40))[None, :]
        gamma = damping / 2.0
        lam = gamma * gamma - k_eff
        with np.errstate(all="ignore"):
            fast = trajectory._propagators(gamma, lam, t, _backend.NUMPY, k_eff)
            full = trajectory._propagators(gamma, lam, t, _all_branches(), k_eff)
        for a, b in zip(fast, full):
            assert a.shape == b.shape
            assert np.array_equal(a, b, equal_nan=True)


def test_an_overdamped_batch_evaluates_no_cosine_and_an_underdamped_one_no_overdamped_exponentials(monkeypatch):
    calls = {"cos": 0, "sin": 0}
    for name in calls:
        real = getattr(np, name)

        def counted(x, _real=real, _name=name):
            calls[_name] += 1
            return _real(x)

        monkeypatch.setattr(_backend.NUMPY, name, counted)
    rng = np.random.default_rng(2)
    t = np.arange(1.0, 60.0)[None, :]
    damping, k_eff = _rows(rng, 13, "over")
    over = trajectory.error_trajectory(t, 1.0, damping, k_eff, 0.5)
    assert calls == {"cos": 0, "sin": 0}
    damping, k_eff = _rows(rng, 13, "under")
    sqrt_calls = []
    real_sqrt = np.sqrt
    monkeypatch.setattr(_backend.NUMPY, "sqrt", lambda x: sqrt_calls.append(1) or real_sqrt(x))
    under = trajectory.error_trajectory(t, 1.0, damping, k_eff, 0.5)
    assert calls == {"cos": 1, "sin": 1}
    assert len(sqrt_calls) == 1  # the underdamped frequency only, not the overdamped rate
    assert np.isfinite(over).all() and np.isfinite(under).all()


def test_censored_probabilities_are_taken_at_the_steps_logged_at_a_bound_only(monkeypatch):
    rng = np.random.default_rng(3)
    t = np.arange(1.0, 31.0)
    y = np.clip(rng.normal(0.3, 0.2, 30), 0.05, 0.95)  # inside the bounds but for:
    y[:6] = 0.0
    y[-2:] = 1.0
    u = np.column_stack([
        rng.normal(0.6, 0.05, 13), rng.normal(0.02, 0.01, 13), rng.normal(-3.0, 0.3, 13),
        rng.normal(0.0, 0.3, 13), rng.normal(-2.0, 0.1, 13), rng.normal(1.5, 0.3, 13),
    ])  # fmt: skip
    sizes = []
    real = forecast.special.log_ndtr
    monkeypatch.setattr(forecast.special, "log_ndtr", lambda x: sizes.append(np.size(x)) or real(x))
    got = forecast._log_lik(u, t, y, (0.0, 1.0))
    assert sizes == [13 * 6, 13 * 2]
    # the values: the density at the free steps, the censored probability at the others
    mu = forecast.mean_curve(u, t, (0.0, 1.0))
    sd = np.exp(u[:, 4:5]) * np.sqrt(forecast.noise_shape(mu, (0.0, 1.0)))
    z = (y - mu) / sd
    point = -0.5 * z * z - np.log(sd) - 0.5 * np.log(2 * np.pi)
    point[:, :6] = real((0.0 - mu[:, :6]) / sd[:, :6])
    point[:, -2:] = real((mu[:, -2:] - 1.0) / sd[:, -2:])
    np.testing.assert_allclose(got, point.sum(axis=1), rtol=1e-12)


def test_the_batched_laplace_hessian_is_the_pointwise_one_bit_for_bit():
    rng = np.random.default_rng(4)
    t = np.arange(1.0, 41.0)
    y = np.clip(0.6 - 0.5 * np.exp(-t / 12.0) + rng.normal(0, 0.05, 40), 0.0, 1.0)
    mean = np.array([0.6, 0.1, np.log(0.08), 0.0, np.log(0.05), np.log(2.0)])
    prec = np.diag(1.0 / np.array([0.3, 0.3, 1.5, 1.0, 1.0, 1.0]) ** 2)

    def f(u, ll=None):
        d = u - mean
        val = float(-(forecast._log_lik(u[None, :], t, y, (0.0, 1.0))[0] if ll is None else ll) + 0.5 * d @ prec @ d)
        return val if np.isfinite(val) else 1e300

    def rows(u):
        return [f(p, v) for p, v in zip(u, forecast._log_lik(u, t, y, (0.0, 1.0)))]

    steps = np.array([1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3])
    evaluated = []

    def counted_rows(u):
        evaluated.append(len(u))
        return rows(u)

    batched = forecast._numeric_hessian(f, mean, steps, rows=counted_rows)
    assert evaluated == [1 + 2 * 6 + 4 * 15]  # every point of the differences in one call
    assert np.array_equal(batched, forecast._numeric_hessian(f, mean, steps))


def test_component_draws_are_those_of_one_multivariate_normal_call_per_draw():
    rng0 = np.random.default_rng(5)
    means = rng0.normal(size=(12, 6))
    covs = []
    for _ in range(12):
        a = rng0.normal(size=(6, 6)) * rng0.uniform(1e-3, 2.0, 6)
        covs.append(a @ a.T + 1e-6 * np.eye(6))
    covs = np.array(covs)
    weights = rng0.dirichlet(np.ones(12))
    before = np.random.default_rng(0)
    comp = before.choice(12, size=500, p=weights)
    expected = np.array([before.multivariate_normal(means[j], covs[j]) for j in comp])
    after = np.random.default_rng(0)
    comp = after.choice(12, size=500, p=weights)
    assert np.array_equal(forecast._component_draws(after, means, covs, comp), expected)
    assert after.random() == before.random()  # the same normals consumed: later draws unmoved


def test_a_forecasts_fits_run_blas_on_one_thread_and_give_its_threads_back(monkeypatch):
    from threadpoolctl import threadpool_info

    def blas_threads():
        return {lib["filepath"]: lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    before = blas_threads()
    seen = []
    real = forecast._fit_run_in_unit

    def spy(*args, **kwargs):
        seen.append(blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(forecast, "_fit_run_in_unit", spy)
    t = np.arange(1.0, 21.0)
    y = 0.5 - 0.4 * np.exp(-t / 8.0) + np.random.default_rng(6).normal(0, 0.02, 20)
    forecast.fit_run(t, y, forecast.default_prior(t, y), n_draws=20, n_proposal=200, likelihood="iid", adapt=False)
    assert seen and all(set(threads.values()) == {1} for threads in seen)
    assert blas_threads() == before


@pytest.mark.parametrize("bounds", [None, (0.0, 1.0)])
def test_the_kalman_filter_and_its_paths_read_each_step_of_every_row_contiguously_for_the_same_values(monkeypatch, bounds):
    from bayes_grpo.predict import statespace

    copied = []
    real = statespace._step_major

    def spy(*arrays):
        out = real(*arrays)
        copied.append([a.flags.c_contiguous and a.shape == np.shape(arrays[0])[::-1] for a in out])
        return out

    monkeypatch.setattr(statespace, "_step_major", spy)
    rng = np.random.default_rng(7)
    t = np.arange(1.0, 41.0)
    y = np.clip(0.6 - 0.5 * np.exp(-t / 12.0) + rng.normal(0, 0.05, 40), 0.0, 1.0)
    y[:3] = 0.0
    v = np.column_stack([
        rng.normal(0.6, 0.05, 50), rng.normal(0.1, 0.02, 50), rng.normal(-2.5, 0.3, 50),
        rng.normal(0.0, 0.3, 50), rng.normal(-3.0, 0.1, 50), rng.normal(1.0, 0.3, 50), rng.normal(0.0, 0.5, 50),
    ])  # fmt: skip
    ll, x, p = statespace.kalman_filter(v, t, y, bounds)
    assert copied and all(all(flags) for flags in copied)
    # each row filtered alone: the same numbers, bit for bit
    alone = [statespace.kalman_filter(row[None, :], t, y, bounds) for row in v]
    assert np.array_equal(ll, [a[0][0] for a in alone])
    assert np.array_equal(x, np.vstack([a[1] for a in alone]))
    assert np.array_equal(p, np.vstack([a[2] for a in alone]))
    obs, point = statespace.forecast_paths(v, t, y, np.arange(41.0, 61.0), np.random.default_rng(0), bounds)
    assert obs.shape == point.shape == (50, 20) and obs.flags.c_contiguous and point.flags.c_contiguous
    assert np.isfinite(obs).all() and np.isfinite(point).all()


def test_a_large_batch_takes_the_cosine_at_its_underdamped_elements_only(monkeypatch):
    sizes = []
    real = np.cos
    monkeypatch.setattr(_backend.NUMPY, "cos", lambda x: sizes.append(np.size(x)) or real(x))
    rng = np.random.default_rng(8)
    damping, k_eff = _rows(rng, 1000, "mixed")
    t = np.arange(1.0, 301.0)[None, :]
    gamma = damping / 2.0
    lam = gamma * gamma - k_eff
    trajectory.error_trajectory(t, 1.0, damping, k_eff, 0.5)
    under = (np.abs(lam * t * t) >= trajectory.SERIES_THRESHOLD) & ~(lam > 0)
    assert 0 < under.sum() < under.size and sizes == [int(under.sum())]
