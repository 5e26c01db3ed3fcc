"""Simulators: the exact SDE discretisation reproduces the closed form without noise, its
one-step noise covariance equals the defining integral, the stationary variance is
D / (2 G C K_eff) (so proportional to 1/G), and simulated run sets carry their truth."""

import json
import re

import numpy as np
import pytest
from scipy.integrate import quad_vec
from scipy.linalg import expm

from bayes_grpo.dynamics import (
    error_trajectory,
    runset_truth,
    sde_transition,
    simulate_recursion,
    simulate_sde,
    simulate_sde_runset,
    stationary_variance,
    truth_frame,
)
from bayes_grpo.runset import load_runset, save_runset


def test_noise_free_sde_is_the_closed_form_trajectory_on_any_grid():
    mass = np.array([1.0, 0.95, 2.0, 1.2])
    damping = np.array([0.05, 0.2, 1.5, 2 * np.sqrt(1.2 * 0.01)])  # under, under, over, critical
    k_eff = np.array([0.01, 0.004, 0.02, 0.01])
    t = np.concatenate([[0.0], np.cumsum(np.random.default_rng(0).uniform(0.1, 7.0, 60))])
    e = simulate_sde(mass, damping, k_eff, 0.0, 1.0, t, e0=-0.6, v0=0.01)
    closed = error_trajectory(
        t[None, :], mass[:, None], damping[:, None], k_eff[:, None], -0.6, 0.01
    )
    np.testing.assert_allclose(e, closed, rtol=0, atol=1e-10)


def test_one_step_noise_covariance_equals_the_defining_integral():
    mass, damping, k_eff, d, g, h = 1.3, 0.11, 0.007, 0.02, 8.0, 3.5
    phi, q = sde_transition(mass, damping, k_eff, d, g, h)
    a = np.array([[0.0, 1.0], [-k_eff / mass, -damping / mass]])
    b = np.array([0.0, np.sqrt(d / g) / mass])
    ref, _ = quad_vec(lambda s: expm(a * s) @ np.outer(b, b) @ expm(a * s).T, 0.0, h, epsabs=1e-15)
    np.testing.assert_allclose(phi[0], expm(a * h), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(q[0], ref, rtol=1e-9, atol=1e-16)


@pytest.mark.parametrize("h", [300.0, 1000.0, 1e5])
def test_noise_covariance_over_a_long_interval_is_the_stationary_balance(h):
    """Q(h) = P - Phi P Phi^T for a stable oscillator (P the stationary covariance): a run
    logged every 1000 steps (exp(h C/M) = e^105 in Van Loan's block) got Q ~ -6e22 and
    rewards of -1e10; the interval is now halved into range and doubled back."""
    from bayes_grpo.dynamics.simulate import stationary_covariance

    mass, damping, k_eff, d, g = 0.95, 0.1, 5e-6, 4e-10, 8.0
    phi, q = sde_transition(mass, damping, k_eff, d, g, h)
    p = np.asarray(stationary_covariance(mass, damping, k_eff, d, g)).reshape(2, 2)
    a = np.array([[0.0, 1.0], [-k_eff / mass, -damping / mass]])
    np.testing.assert_allclose(phi[0], expm(a * h), rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(q[0], p - phi[0] @ p @ phi[0].T, rtol=1e-8, atol=1e-20)


@pytest.mark.parametrize("group_size", [4, 16])
def test_stationary_variance_is_d_over_2_g_c_k(group_size):
    # 200 independent long runs: per-run time averages are autocorrelated within a run but
    # independent across runs, so their spread gives an honest standard error.
    mass, damping, k_eff, d = 1.0, 0.2, 0.05, 0.01
    theory = float(stationary_variance(d, group_size, damping, k_eff))
    n_runs, burn, keep = 200, 200, 2000
    t = np.arange(0.0, burn + keep + 1)
    e = simulate_sde(
        np.full(n_runs, mass), damping, k_eff, d, group_size, t, e0=0.0, rng=7 + group_size
    )
    per_run = np.mean(e[:, burn:] ** 2, axis=1)  # the stationary mean is 0
    estimate = per_run.mean()
    se = per_run.std(ddof=1) / np.sqrt(n_runs)
    assert se < 0.03 * theory  # the test has power
    assert abs(estimate - theory) < 4.0 * se


def test_stationary_variance_does_not_depend_on_the_logging_interval():
    mass, damping, k_eff, d, g = 1.0, 0.3, 0.02, 0.01, 4.0
    theory = float(stationary_variance(d, g, damping, k_eff))
    t = np.arange(0.0, 30000.0, 25.0)  # coarse grid, still exact
    e = simulate_sde(np.full(100, mass), damping, k_eff, d, g, t, e0=0.0, rng=1)
    per_run = np.mean(e[:, 40:] ** 2, axis=1)
    assert abs(per_run.mean() - theory) < 4.0 * per_run.std(ddof=1) / 10.0


def test_simulators_are_reproducible_from_a_seed():
    t = np.arange(0.0, 50.0)
    first = simulate_sde(1.0, 0.1, 0.01, 0.01, 4, t, rng=5)
    np.testing.assert_array_equal(first, simulate_sde(1.0, 0.1, 0.01, 0.01, 4, t, rng=5))
    assert not np.array_equal(first, simulate_sde(1.0, 0.1, 0.01, 0.01, 4, t, rng=6))
    r1 = simulate_recursion([0.1, 0.2], 0.5, [1, 3], 100, noise_sd=0.01, rng=3)
    np.testing.assert_array_equal(
        r1, simulate_recursion([0.1, 0.2], 0.5, [1, 3], 100, noise_sd=0.01, rng=3)
    )


def test_recursion_follows_its_definition_step_by_step():
    a, mu, lag, e0 = 0.07, 0.6, 3, 0.8
    e = simulate_recursion(a, mu, lag, 30, e0=e0)[0]
    hist = {n: e0 for n in range(-lag - 1, 1)}
    for n in range(30):
        hist[n + 1] = hist[n] + mu * (hist[n] - hist[n - 1]) - a * hist[n - lag]
    np.testing.assert_allclose(e, [hist[n] for n in range(31)], rtol=1e-14)
    with pytest.raises(ValueError, match="integer"):
        simulate_recursion(0.1, 0.5, 1.5, 10)


def test_a_noisy_recursion_on_a_constant_schedule_is_the_noisy_recursion():
    # The docstring's promise ("the recursion above when every m[n] = 1") held without noise
    # only: on a schedule the noise was added to e[n+1] outside the momentum buffer, so at
    # mu 0.9 the stationary variance was 0.022 where the recursion's (no schedule) is 0.42,
    # 19x (1/(1 - mu)^2): DESIGN's noise enters the increment, which the momentum carries on
    a, mu, lag, n = np.full(400, 0.05), 0.9, 2, 1500
    plain = simulate_recursion(a, mu, lag, n, e0=0.0, noise_sd=0.01, rng=3)
    scheduled = simulate_recursion(a, mu, lag, n, e0=0.0, noise_sd=0.01, rng=3, lr_multipliers=np.ones(n))
    np.testing.assert_allclose(scheduled, plain, rtol=1e-9, atol=1e-12)
    # gradient noise moves the error at the rate of its update: none while the rate is 0
    frozen = simulate_recursion(a[:3], mu, lag, 10, e0=0.5, noise_sd=0.01, rng=3, lr_multipliers=np.zeros(10))
    np.testing.assert_array_equal(frozen, np.full((3, 11), 0.5))


def test_simulated_runset_carries_truth_and_follows_the_contract(tmp_path):
    ds = simulate_sde_runset(
        group_sizes=(4, 16),
        learning_rates=(1e-3, 2e-3),
        k_refs=(1, 2),
        n_seeds=2,
        n_steps=120,
        log_every=2,
        measurement_sd=0.02,
        measurement_g_exponent=1.0,
        run_sd={"plateau": 0.01},
        ragged=0.3,
        missing_frac=0.1,
        random_seed=11,
    )
    assert ds.sizes["run"] == 2 * 2 * 2 * 2 * 2
    truth = runset_truth(ds)
    frame = truth_frame(ds)
    assert set(frame.index) == {str(r) for r in ds["run"].values}
    row = frame.iloc[0]
    assert row["a"] == pytest.approx(
        row["learning_rate"] * (1 - 0.9) * truth["models"][row["model"]]["stiffness"]
    )
    assert row["C_eff"] == pytest.approx((1 - 0.9) - row["a"] * row["k_ref"])
    assert row["stationary_var"] == pytest.approx(
        row["noise_d"] / (2 * row["group_size"] * row["C_eff"] * row["K_eff"])
    )
    assert row["measurement_sd"] == pytest.approx(0.02 / np.sqrt(row["group_size"]))
    # coordinates agree with the truth
    np.testing.assert_array_equal(ds["group_size"].values, frame["group_size"].values)
    np.testing.assert_array_equal(ds["k_ref"].values, frame["k_ref"].values)
    assert set(ds["momentum_convention"].values) == {"ema"}
    # ragged lengths and missing points, step 0 always present with the true initial reward mean
    last = ds["reward"].notnull().cumsum("step").argmax("step")
    assert len(np.unique(ds["step"].values[last.values])) > 1
    assert np.all(ds["reward"].sel(step=0).notnull())
    np.testing.assert_allclose(
        ds["true_mean_reward"].sel(step=0).values, frame["initial_reward"].values
    )
    assert ds["reward"].isnull().sum() > 0
    # every 2nd step of steps 0 .. 119: an even grid, ending at 118
    assert np.all(np.diff(ds["step"].values) == 2) and ds["step"].values[-1] == 118
    # round trip through netCDF keeps the truth
    path = save_runset(ds, tmp_path / "sim.nc")
    assert runset_truth(load_runset(path)) == json.loads(json.dumps(truth))


def test_runset_mean_reward_tracks_noise_free_truth_across_seeds():
    ds = simulate_sde_runset(
        models={"m": {"stiffness": 50.0, "plateau": 0.8, "initial_reward": 0.2, "noise_d": 2e-6}},
        group_sizes=(8,),
        n_seeds=40,
        n_steps=200,
        random_seed=2,
    )
    mean = ds["reward"].mean("run")
    truth = ds["true_mean_reward"].isel(run=0)
    sd = float(np.sqrt(truth_frame(ds)["stationary_var"].iloc[0]))
    assert float(np.max(np.abs(mean - truth))) < 5.0 * sd / np.sqrt(40)


def test_unstable_settings_refused_unless_allowed():
    with pytest.raises(ValueError, match="unstable"):
        simulate_sde_runset(learning_rates=(0.1,), k_refs=(10,), n_steps=20)
    ds = simulate_sde_runset(learning_rates=(0.1,), k_refs=(10,), n_steps=20, allow_unstable=True)
    assert set(truth_frame(ds)["regime"]) == {"unstable"}


def test_a_setting_on_the_closed_form_boundary_is_refused_and_its_truth_says_unstable():
    # lr 0.3 x K 1, mu 0.1, K_ref 3: C_eff = (1 - mu) - a K_ref = 0 in exact arithmetic, 1.1e-16 after
    # rounding. It was simulated without --allow-unstable, and its truth read "underdamped", zeta
    # 7e-17 and a stationary variance of 1e11, where `stability` calls the setting unstable (closed
    # form: NO); the same boundary rounded the other way (C_eff = -2.8e-17) was refused.
    models = {"m": {"stiffness": 1.0, "plateau": 0.7, "initial_reward": 0.2, "noise_d": 1e-4}}
    kw = dict(models=models, learning_rates=(0.3,), momentum=0.1, convention="heavy_ball", k_refs=(3,), n_steps=20)
    with pytest.raises(ValueError, match=r"is unstable \(closed form: C_eff = 1.11e-16 \(0 up to rounding\), not > 0"):
        simulate_sde_runset(**kw)
    one = truth_frame(simulate_sde_runset(**kw, allow_unstable=True)).iloc[0]
    assert one["regime"] == "unstable"
    assert one["zeta"] is None or np.isnan(one["zeta"])
    assert one["stationary_var"] is None or np.isnan(one["stationary_var"])


def test_bad_model_spec_is_a_clear_error():
    with pytest.raises(ValueError, match="missing keys"):
        simulate_sde_runset(models={"m": {"stiffness": 1.0}})
    with pytest.raises(ValueError, match="truth"):
        runset_truth(simulate_sde_runset(n_steps=10).drop_attrs())
    # an LLM named '' (`simulate sde --model ''`, or a models file's "" key) was simulated as runs
    # '-G4-lr0.001-k1-s0' whose model the fit reads as unknown ("model unknown for runs ...")
    spec = {"stiffness": 40.0, "plateau": 0.7, "initial_reward": 0.2, "noise_d": 4e-6}
    for name in ("", "  "):
        with pytest.raises(ValueError, match=rf"model {name!r}: an LLM needs a name"):
            simulate_sde_runset(models={name: spec}, n_steps=10)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"group_sizes": (0,)}, "group size must be a finite positive number, got 0"),
        ({"group_sizes": (-4,)}, "group size must be a finite positive number, got -4"),
        # G = 1 was simulated as a run that learns, labelled group_size 1: GRPO does not learn
        # there (every advantage 0), and `simulate bandit` refuses it
        ({"group_sizes": (4, 1)}, "group size must be >= 2 (a group std needs two samples: at G = 1 every completion's advantage is 0"),
        ({"group_sizes": (1.5,)}, "GRPO does not learn, which the law cannot draw), got 1.5"),
        ({"learning_rates": (float("nan"),)}, "learning rate must be a finite positive number"),
        ({"learning_rates": (0.0,)}, "learning rate must be a finite positive number, got 0.0"),
        ({"measurement_sd": -0.1}, "measurement_sd must be a finite non-negative number"),
        ({"noise_g_exponent": float("inf")}, "noise_g_exponent must be a finite number"),
        # a NaN sd or departure made every reward NaN; an effect at a group size no run has was
        # applied to nothing; an empty list failed 'zero-size array to reduction operation'
        ({"run_sd": {"plateau": float("nan")}}, "run_sd['plateau'] must be a finite non-negative number"),
        ({"group_effects": {4: {"plateau": float("nan")}}}, "group_effects[4]['plateau'] must be a finite number"),
        ({"group_effects": {4: {"stiffness_factor": 0.0}}}, "group_effects[4]['stiffness_factor'] must be a finite positive"),
        ({"group_effects": {8: {"plateau": 0.05}}}, "group_effects[8]: no run has group size 8 (group_sizes [4.0, 16.0])"),
        ({"learning_rates": ()}, "learning_rates must hold at least one value"),
        # NaN read 'unstable (C_eff=nan ...)' and wrote NaN rewards with allow_unstable
        ({"momentum": float("nan"), "allow_unstable": True}, "momentum must be a finite number in [0, 1), got nan"),
        ({"momentum": -0.5}, "momentum must be a finite number in [0, 1), got -0.5"),
        # n_steps=10.5 logged steps 0 .. 11 with n_steps 10 in the truth; n_seeds=1.5 a TypeError
        ({"n_steps": 10.5}, "n_steps must be a whole number, got 10.5"),
        ({"n_seeds": 1.5}, "n_seeds must be a whole number, got 1.5"),
    ],
)
def test_settings_that_mean_nothing_are_refused_before_simulating(kwargs, message):
    # G = 0 wrote NaN rewards (a divide-by-zero RuntimeWarning only), G = -4 a noise-free run,
    # a NaN learning rate was 'unstable (C_eff=nan, spectral radius=nan)'
    with pytest.raises(ValueError, match=re.escape(message)):
        simulate_sde_runset(**({"n_steps": 10, "n_seeds": 1} | kwargs))


def test_a_negative_or_non_numeric_model_value_is_refused_naming_the_model_and_the_file(
    tmp_path, capsys
):
    # `simulate sde --noise-d -1` wrote runs without process noise (the negative variance was
    # clipped to 0) whose truth had stationary_var = -325.5
    from bayes_grpo.cli import main

    base = {"stiffness": 40.0, "plateau": 0.7, "initial_reward": 0.2, "noise_d": 4e-6}
    with pytest.raises(ValueError, match=r"model 'm': noise_d must be a finite non-negative number, got -1"):
        simulate_sde_runset(models={"m": base | {"noise_d": -1.0}}, n_steps=10)
    with pytest.raises(ValueError, match=r"model 'm': stiffness must be a number, got 'forty'"):
        simulate_sde_runset(models={"m": base | {"stiffness": "forty"}}, n_steps=10)
    out = tmp_path / "x.nc"
    # the command line refuses it as its flag's value (argparse: exit status 2 by SystemExit)
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "sde", "--noise-d=-1", "--steps", "5", "-o", str(out)])
    assert exc.value.code == 2
    assert "argument --noise-d: must be 0 or more, got '-1'" in capsys.readouterr().err
    spec = tmp_path / "llms.json"
    spec.write_text(json.dumps({"big": base | {"model_size": -7e9}}))
    assert main(["simulate", "sde", "--models", str(spec), "--steps", "5", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{spec}: model 'big': model_size must be a finite positive number" in err
    assert not out.exists()


def test_group_effects_and_noise_exponent_set_the_truth():
    model = {"m": {"stiffness": 50.0, "plateau": 0.7, "initial_reward": 0.2, "noise_d": 4e-6}}
    ds = simulate_sde_runset(
        models=model,
        group_sizes=(4, 16),
        n_seeds=1,
        n_steps=50,
        group_effects={16: {"plateau": 0.05, "stiffness_factor": 2.0}},
        noise_g_exponent=0.5,
    )
    frame = truth_frame(ds).set_index("group_size")
    assert frame.loc[16.0, "plateau"] == pytest.approx(0.75) and frame.loc[
        4.0, "plateau"
    ] == pytest.approx(0.7)
    assert frame.loc[16.0, "a"] == pytest.approx(2.0 * frame.loc[4.0, "a"])
    for gv in (4.0, 16.0):
        row = frame.loc[gv]
        assert row["stationary_var"] == pytest.approx(
            4e-6 / (2 * np.sqrt(gv) * row["C_eff"] * row["K_eff"])
        )
    assert runset_truth(ds)["settings"]["group_effects"] == {
        "16": {"plateau": 0.05, "stiffness_factor": 2.0}
    }
    with pytest.raises(ValueError, match="unknown keys"):
        simulate_sde_runset(models=model, group_effects={4: {"zeta": 1.0}}, n_steps=10)


def test_every_setting_asked_for_is_a_run_of_its_own():
    # runs were named with ':g', so learning rates 1e-3 and 1.0000001e-3 got one name and one
    # run wrote over the other: 4 runs instead of 8 (`simulate sde --lr 1e-3,1.0000001e-3`),
    # and a repeated value in Python dropped its runs the same way, both without a word
    ds = simulate_sde_runset(
        models={"m": {"stiffness": 40.0, "plateau": 0.7, "initial_reward": 0.2, "noise_d": 0.0}},
        learning_rates=(1e-3, 1.0000001e-3),
        n_steps=5,
    )
    assert ds.sizes["run"] == 8
    assert sorted(set(ds["learning_rate"].values.tolist())) == [1e-3, 1.0000001e-3]
    assert "m-G4-lr0.001-k1-s0" in ds["run"].values  # names of values ':g' keeps are unchanged
    assert "m-G4-lr0.0010000001-k1-s0" in ds["run"].values
    assert len(truth_frame(ds)) == 8
    with pytest.raises(ValueError, match="a value is repeated in group_sizes"):
        simulate_sde_runset(group_sizes=(4, 4.0), n_steps=5)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_time_that_is_not_finite_is_named(bad):
    # a NaN time gave [[1, nan, nan]] without a word; inf 'cannot convert float infinity to integer'
    with pytest.raises(ValueError, match=f"t must be finite; time 1 is {bad}"):
        simulate_sde(1.0, 0.5, 0.2, 0.0, 1.0, [0.0, bad, 2.0])


@pytest.mark.parametrize("lag", [float("nan"), float("inf"), 1.5, -1])
def test_the_recursion_refuses_a_lag_that_is_not_a_whole_number_of_steps(lag):
    # k_ref = nan or inf passed the check (NaN compares False) and ran as a gradient that never
    # left e0: [1, 0.9, 0.75, 0.575, ...], without a word
    with pytest.raises(ValueError, match="k_ref must be a non-negative integer per run"):
        simulate_recursion(0.1, 0.5, lag, 5)


def test_sde_runs_that_cannot_fit_in_memory_are_refused_before_anything_is_built(monkeypatch):
    # `simulate sde --steps 1e12` was a MemoryError traceback from numpy, and a huge --seeds built
    # a Python list of every run's setting on its way to exhausting the memory
    import bayes_grpo.dynamics.simulate as simulate

    with pytest.raises(ValueError, match=r"8 runs x 1000000000000 logged steps do not fit in memory"):
        simulate_sde_runset(n_steps=10**12)
    monkeypatch.setattr(simulate, "physical_memory", lambda: 10**6)  # a 1 MB machine
    with pytest.raises(ValueError, match=r"4000 runs x 10 logged steps do not fit in memory .* 0.001 GB"):
        simulate_sde_runset(n_seeds=1000, n_steps=10)
    assert simulate_sde_runset(n_seeds=1, n_steps=10, group_sizes=(4,)).sizes["run"] == 2  # 2 LLMs
    # one run is one run ("1 runs x 1000000000000 logged steps")
    with pytest.raises(ValueError, match=r"^1 run x 1000000000000 logged steps do not fit in memory"):
        simulate.check_fits_in_memory(1, 10**12, bytes_per_point=8, bytes_per_run=0, points="logged steps")


@pytest.mark.parametrize("h", [-1.0, float("inf"), float("nan")])
def test_the_sde_transition_refuses_an_interval_that_is_no_length(h):
    # h = -1 gave a noise 'covariance' with negative variances, h = inf an OverflowError
    # ("cannot convert float infinity to integer"), h = NaN a NaN transition
    from bayes_grpo.dynamics.simulate import sde_transition

    with pytest.raises(ValueError, match="interval h must be a finite number of steps >= 0"):
        sde_transition(1.0, 0.5, 0.1, 1e-3, 4, h)
    phi, q = sde_transition(1.0, 0.5, 0.1, 1e-3, 4, 0.0)
    assert np.allclose(phi[0], np.eye(2)) and np.allclose(q[0], 0.0)


@pytest.mark.parametrize("n_steps", [3.5, float("nan"), "10"])
def test_the_recursion_names_a_step_count_that_is_not_a_whole_number(n_steps):
    # 3.5 failed "'float' object cannot be interpreted as an integer", naming no parameter
    with pytest.raises(ValueError, match=r"n_steps must be a whole number"):
        simulate_recursion(0.1, 0.5, 2, n_steps)
    assert simulate_recursion(0.1, 0.5, 2, 4.0).shape == (1, 5)


@pytest.mark.parametrize("stiffness", [0.0, -40.0])
def test_a_stiffness_without_restoring_force_is_named_as_the_cause(stiffness):
    # it read "unstable (C_eff=0.1, spectral radius=1.000000)" at K = 0 (and C_eff 0.104 at K = -40):
    # a positive damping, and nothing naming the stiffness
    model = {"m": {"stiffness": stiffness, "plateau": 0.7, "initial_reward": 0.2, "noise_d": 4e-6}}
    with pytest.raises(ValueError, match=rf"is unstable \(the gain a = .* has no restoring force \(stiffness {stiffness:g} must be > 0\)\)"):
        simulate_sde_runset(models=model, n_steps=10)
