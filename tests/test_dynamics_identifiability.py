"""Jeffreys' density of the oscillator's curve shape: the prior weight that counts distinguishable
curves, so that the over- and undamped ridges (where many (zeta, w0) draw one curve) do not
outweigh the curves between them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayes_grpo.dynamics._backend import NUMPY
from bayes_grpo.dynamics.identifiability import (
    design_times,
    shape_information_log_density,
    unit_curve_and_shape_derivatives,
)
from bayes_grpo.dynamics.trajectory import error_trajectory


def _reference(log_zeta: float, log_w0: float, t: np.ndarray, h: float = 1e-5) -> float:
    """Independent computation: finite-difference Jacobian, least-squares projection off [1, f]."""

    def unit(lz, lw):
        w0 = np.exp(lw)
        return error_trajectory(t, 1.0, 2 * np.exp(lz) * w0, w0**2, 1.0)

    f = unit(log_zeta, log_w0)
    jac = np.column_stack(
        [
            (unit(log_zeta + h, log_w0) - unit(log_zeta - h, log_w0)) / (2 * h),
            (unit(log_zeta, log_w0 + h) - unit(log_zeta, log_w0 - h)) / (2 * h),
        ]
    )
    design = np.column_stack([np.ones_like(f), f])
    coef, *_ = np.linalg.lstsq(design, jac, rcond=None)
    resid = jac - design @ coef
    return 0.5 * np.log(np.linalg.det(resid.T @ resid / t.size))


@pytest.mark.parametrize("log_zeta", [-3.0, -0.7, 0.0, 0.4, 1.5])
def test_log_density_is_half_log_det_of_the_projected_shape_information(log_zeta):
    t = np.arange(0.0, 300.0)
    lw = np.log(4.0 / 300.0)
    got = shape_information_log_density(np.array([log_zeta]), np.array([lw]), t[None, :])
    assert got[0] == pytest.approx(_reference(log_zeta, lw, t), abs=1e-5)


def test_pytensor_graph_gives_the_numpy_values_and_a_finite_gradient():
    import pytensor
    import pytensor.tensor as pt

    t = np.tile(np.arange(0.0, 120.0), (4, 1))
    lz = np.array([-4.0, -0.5, 0.8, 3.0])
    lw = np.log(np.array([0.01, 0.03, 0.05, 0.2]))
    a, b = pt.vector("lz"), pt.vector("lw")
    dens = shape_information_log_density(a, b, pt.as_tensor_variable(t))
    # FAST_COMPILE: the C compilation of this gradient graph takes minutes on a cold cache
    f = pytensor.function([a, b], [dens, *pytensor.grad(dens.sum(), [a, b])], mode="FAST_COMPILE")
    value, g_z, g_w = f(lz, lw)
    np.testing.assert_allclose(value, shape_information_log_density(lz, lw, t), rtol=1e-10)
    assert np.isfinite(g_z).all() and np.isfinite(g_w).all()


@pytest.mark.parametrize(
    "zeta, w0",
    [
        (1e-3, 0.05),  # nearly undamped, several periods
        (0.3, 0.02),
        (0.999, 0.05),  # near critical: the series branch for most of the run
        (1.0, 0.05),  # critical
        (1.02, 0.04),
        (4.0, 0.1),  # overdamped
        (40.0, 0.5),  # strongly overdamped (the slow rate without cancellation)
        (0.05, 0.8),  # w0 t up to 240 rad
    ],
)
def test_closed_form_shape_derivatives_match_fine_finite_differences(zeta, w0):
    """The exact derivatives of the unit curve in log zeta and log w0 (one propagator
    evaluation) agree with fine central differences of the curve itself in every regime,
    through critical damping."""
    t = np.arange(0.0, 300.0)
    h = 1e-6

    def unit(lz, lw):
        w = np.exp(lw)
        return error_trajectory(t, 1.0, 2 * np.exp(lz) * w, w**2, 1.0)

    lz, lw = np.log(zeta), np.log(w0)
    f, d_zeta, d_w0 = unit_curve_and_shape_derivatives(lz, lw, t, NUMPY)
    np.testing.assert_allclose(f, unit(lz, lw), rtol=0, atol=1e-12)
    fd_zeta = (unit(lz + h, lw) - unit(lz - h, lw)) / (2 * h)
    fd_w0 = (unit(lz, lw + h) - unit(lz, lw - h)) / (2 * h)
    # rounding of the differences: ~1e-16 / h relative to the curve's scale (1)
    np.testing.assert_allclose(d_zeta, fd_zeta, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(d_w0, fd_w0, rtol=1e-6, atol=1e-8)


def test_the_overdamped_ridge_is_down_weighted_at_the_same_slow_time_scale():
    """Past zeta ~ 2 a larger zeta (slow rate ~ w0 / 2 zeta held) draws the same single
    exponential: the density keeps falling along that ridge, while a log-normal prior alone
    would give zeta = 5 and zeta = 20 comparable weight per unit of log zeta."""
    t = np.arange(0.0, 300.0)
    slow = 4.0 / 300.0
    zetas = np.array([1.0, 2.0, 5.0, 20.0])
    w0 = 2.0 * zetas * slow  # w0 / (2 zeta) = slow rate
    dens = shape_information_log_density(np.log(zetas), np.log(w0), np.tile(t, (4, 1)))
    assert np.all(np.diff(dens) < -1.0)


def test_the_undamped_ridge_is_down_weighted_too():
    """An envelope exp(-zeta w0 t) flat over the run (2.4 periods here) cannot tell zeta = 3e-4
    from 3e-5: the density falls in proportion to zeta there (log(10) per decade)."""
    t = np.arange(0.0, 300.0)
    lz = np.log(np.array([0.003, 0.0003, 0.00003]))
    lw = np.full(3, np.log(0.05))
    dens = shape_information_log_density(lz, lw, np.tile(t, (3, 1)))
    np.testing.assert_allclose(np.diff(dens), -np.log(10.0), atol=0.1)


def test_padding_points_with_zero_weight_changes_nothing():
    t = np.arange(0.0, 80.0)
    padded = np.concatenate([t, np.zeros(40)])
    weight = np.concatenate([np.ones(80), np.zeros(40)])
    lz, lw = np.array([-0.3]), np.array([np.log(0.06)])
    assert shape_information_log_density(lz, lw, padded[None], weight[None])[0] == pytest.approx(
        shape_information_log_density(lz, lw, t[None])[0], abs=1e-12
    )


def test_design_times_thin_long_runs_evenly_and_keep_both_ends():
    t = design_times(np.r_[np.arange(1000.0), np.nan, 5.0], max_points=200)
    assert t.size == 200 and t[0] == 0.0 and t[-1] == 999.0
    assert np.ptp(np.diff(t)) <= 1.0
    np.testing.assert_array_equal(design_times([3.0, 1.0, 2.0]), [1.0, 2.0, 3.0])


def test_phenomenological_model_adds_the_weight_as_a_potential_and_can_switch_it_off():
    """The model's log density differs from the unweighted model's by exactly the density
    summed over LLMs, evaluated on each LLM's observed steps."""

    from bayes_grpo.model.builder import build_pymc_model
    from bayes_grpo.model.config import DEFAULT_MODEL_CONFIG, merge_config
    from bayes_grpo.model.prepare import prepare_data
    from bayes_grpo.runset import make_runset

    curves, meta = {}, {}
    for i, (model, n) in enumerate([("a", 60), ("a", 40), ("b", 50)]):
        steps = np.arange(n)
        curves[f"r{i}"] = pd.DataFrame({"reward": 0.2 + 0.5 * (1 - np.exp(-steps / 12.0)) + 0.01 * np.sin(steps)}, index=steps)
        meta[f"r{i}"] = {"model": model, "group_size": 4}
    ds = make_runset(curves, meta)
    assert DEFAULT_MODEL_CONFIG["damping_ratio"]["shape_information_weight"] is True
    off = merge_config(DEFAULT_MODEL_CONFIG, {"damping_ratio": {"shape_information_weight": False}})
    logps = []
    for cfg in (DEFAULT_MODEL_CONFIG, off):
        data = prepare_data(ds, cfg, "phenomenological")
        model = build_pymc_model(data, cfg, parameterisation="phenomenological")
        assert ("damping_shape_information" in model.named_vars) is cfg["damping_ratio"]["shape_information_weight"]
        point = model.initial_point()
        point["log_damping_ratio_z"] = np.array([0.4, -1.2])
        point["log_frequency_z"] = np.array([-0.3, 0.5])
        logps.append(model.compile_logp()(point))
    lz = 0.0 + 1.0 * np.array([0.4, -1.2])
    lw = np.log(1.0 / (0.25 * data.run_length)) + 1.5 * np.array([-0.3, 0.5])
    expected = sum(
        shape_information_log_density(lz[m : m + 1], lw[m : m + 1], np.arange(n, dtype=float)[None])[0]
        for m, n in enumerate([60, 50])
    )
    assert logps[0] - logps[1] == pytest.approx(expected, abs=1e-8)


def test_prior_predictive_draws_come_from_the_weighted_prior():
    """PyMC's forward sampling ignores potentials: the model resamples its prior draws by the
    shape weight, so the prior predictive check shows the prior the fit uses (fewer
    single-exponential-like draws, zeta > 3, than the log-normal alone gives)."""
    import warnings

    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.runset import make_runset

    steps = np.arange(80)
    ds = make_runset(
        {"r0": pd.DataFrame({"reward": 0.2 + 0.5 * (1 - np.exp(-steps / 12.0))}, index=steps)},
        {"r0": {"model": "a", "group_size": 4}},
    )
    share = {}
    for weighted in (True, False):
        cfg = {"damping_ratio": {"shape_information_weight": weighted}}
        model = GRPODynamicsModel(parameterisation="phenomenological", model_config=cfg)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            idata = model.sample_prior_predictive(ds, samples=400, random_seed=3)
        zeta = idata.prior["damping_ratio_model"].values.ravel()
        assert zeta.size == 400 and idata.prior.sizes["draw"] == 400
        share[weighted] = float(np.mean(zeta > 3.0))
    assert share[False] > 0.08  # log-normal(0, 1): P(zeta > 3) = 0.14
    assert share[True] < share[False] / 3
