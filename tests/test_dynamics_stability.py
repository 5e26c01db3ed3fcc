"""Stability: the exact discrete threshold matches DESIGN.md's reference values and a second
analytic route; the closed form is exact at K_ref = 1 and conservative beyond; the spectral
radius is the growth rate of the simulated recursion; regimes, critical K_ref, phase grid."""

import numpy as np
import pytest

from bayes_grpo.dynamics import (
    boundary_locus_threshold,
    classify_regime,
    closed_form_stable,
    closed_form_threshold,
    critical_k_ref,
    exact_stable,
    exact_threshold,
    phase_grid,
    recursion_regime,
    simulate_recursion,
    spectral_radius,
    stability_summary,
)
from bayes_grpo.dynamics.coefficients import oscillator_coefficients


@pytest.mark.parametrize(
    ("mu", "lag", "expected", "tol"),
    [
        (0.0, 1, 1.0, 1e-9),
        (0.0, 2, 0.6180, 5e-5),
        (0.5, 5, 0.1286, 5e-5),
        (0.9, 10, 0.01139, 5e-6),
    ],
)
def test_exact_threshold_reproduces_design_reference_values(mu, lag, expected, tol):
    assert exact_threshold(mu, lag, method="bisection") == pytest.approx(expected, abs=tol)
    assert exact_threshold(mu, lag, method="boundary_locus") == pytest.approx(expected, abs=tol)


def test_exact_threshold_golden_ratio_at_lag_two():
    # mu = 0, L = 2: z^3 - z^2 + a has a root on the unit circle at a = (sqrt 5 - 1)/2.
    assert exact_threshold(0.0, 2, method="bisection") == pytest.approx(
        (np.sqrt(5) - 1) / 2, rel=1e-10
    )


def test_a_star_times_lag_tends_to_half_pi_for_large_lag_without_momentum():
    lags = np.array([10, 100, 1000, 10000])
    scaled = exact_threshold(0.0, lags) * lags
    gaps = np.abs(scaled - np.pi / 2)
    assert np.all(np.diff(gaps) < 0)
    assert gaps[-1] < 1e-3
    # mu = 0 has the closed form a* = 2 sin(pi / (2 (2L + 1))).
    np.testing.assert_allclose(scaled / lags, 2 * np.sin(np.pi / (2 * (2 * lags + 1))), rtol=1e-10)


def test_bisection_on_spectral_radius_agrees_with_boundary_locus():
    mus = np.array([0.0, 0.3, 0.6, 0.9, 0.95])[:, None]
    lags = np.array([1, 2, 3, 7, 16, 40])[None, :]
    bis = exact_threshold(mus, lags, method="bisection")
    locus = boundary_locus_threshold(mus, lags)
    np.testing.assert_allclose(bis, locus, rtol=1e-9)


def test_closed_form_exact_at_lag_one_and_conservative_beyond():
    mus = np.linspace(0.0, 0.95, 8)
    np.testing.assert_allclose(exact_threshold(mus, 1), closed_form_threshold(mus, 1), rtol=1e-10)
    for lag in (2, 3, 5, 10, 50):
        assert np.all(exact_threshold(mus, lag) > closed_form_threshold(mus, lag))


def test_no_lag_is_plain_heavy_ball():
    # L = 0: (z - 1)(z - mu) + a z; stable iff 0 < a < 2 (1 + mu); closed form never unstable.
    for mu in (0.0, 0.5, 0.9):
        assert exact_threshold(mu, 0) == pytest.approx(2 * (1 + mu))
        assert exact_stable(2 * (1 + mu) * 0.999, mu, 0)
        assert not exact_stable(2 * (1 + mu) * 1.001, mu, 0)
        assert np.isinf(closed_form_threshold(mu, 0))
        assert closed_form_stable(10.0, mu, 0)


def test_non_integer_lag_is_an_error_for_the_exact_criterion_only():
    with pytest.raises(ValueError, match="integer"):
        spectral_radius(0.1, 0.5, 2.5)
    with pytest.raises(ValueError, match="integer"):
        exact_threshold(0.5, 1.5)
    assert closed_form_threshold(0.5, 2.5) == pytest.approx(0.2)
    assert bool(closed_form_stable(0.1, 0.5, 2.5))
    with pytest.raises(ValueError, match=">= 0"):
        spectral_radius(0.1, 0.5, -1)


def test_a_non_integer_lag_against_many_gain_draws_is_named_once():
    # `stability --posterior --k-ref 1.5` said "got [1.5, 1.5, 1.5, 1.5, 1.5]": the lag
    # broadcast against the posterior's gain draws
    with pytest.raises(ValueError, match=r"got \[1\.5\] \("):
        spectral_radius(np.full(400, 0.01), 0.5, 1.5)


def test_thresholds_reject_momentum_outside_unit_interval():
    with pytest.raises(ValueError, match="momentum"):
        exact_threshold(1.0, 3)
    with pytest.raises(ValueError, match="momentum"):
        critical_k_ref(0.1, -0.2)


def _growth_rate(e, window=400):
    late, early = (
        np.max(np.abs(e[:, -window:]), axis=1),
        np.max(np.abs(e[:, -2 * window : -window]), axis=1),
    )
    return (late / early) ** (1.0 / window)


def test_spectral_radius_is_the_growth_rate_of_the_simulated_recursion():
    a = np.array([0.05, 0.2, 0.4, 0.3, 0.02, 0.015])
    mu = np.array([0.0, 0.5, 0.0, 0.2, 0.9, 0.9])
    lag = np.array([1, 2, 3, 4, 10, 10])
    e = simulate_recursion(a, mu, lag, n_steps=2000, e0=1.0)
    rate = _growth_rate(e)
    np.testing.assert_allclose(rate, spectral_radius(a, mu, lag), rtol=2e-3)


@pytest.mark.parametrize(("mu", "lag"), [(0.0, 5), (0.5, 5), (0.9, 10), (0.0, 30)])
def test_threshold_separates_converging_from_diverging_recursions(mu, lag):
    a_star = float(exact_threshold(mu, lag))
    a = np.array([0.95, 1.05]) * a_star
    radius = spectral_radius(a, mu, lag)
    assert radius[0] < 1 < radius[1]
    # long enough for a factor 1e5 of decay / growth at the slower of the two rates
    n_steps = int(np.ceil(np.log(1e5) / np.min(np.abs(np.log(radius))))) + 10 * lag
    e = simulate_recursion(a, mu, lag, n_steps=n_steps, e0=1.0)
    assert abs(e[0, -1]) < 1e-2  # below the threshold: converges
    assert abs(e[1, -1]) > 1e2  # above: diverges
    # The closed form calls the stable one unstable (it is conservative for L > 1).
    assert not closed_form_stable(a[0], mu, lag)
    assert exact_stable(a[0], mu, lag) and not exact_stable(a[1], mu, lag)
    assert exact_stable(a[0], mu, lag, method="eigenvalues")


def test_spectral_radius_vectorised_shapes_and_nan():
    a = np.full((3, 4), 0.05)
    a[1, 2] = np.nan
    lags = np.array([1, 2, 3, 4])
    radius = spectral_radius(a, 0.5, lags)
    assert radius.shape == (3, 4)
    assert np.isnan(radius[1, 2]) and np.isfinite(radius[0]).all()
    for j, lag in enumerate(lags):
        # z^(L+1) - (1 + mu) z^L + mu z^(L-1) + a, by numpy.roots (an independent routine)
        poly = np.zeros(lag + 2)
        poly[0], poly[1] = 1.0, -1.5
        poly[2] += 0.5
        poly[lag + 1] += 0.05
        assert radius[0, j] == pytest.approx(np.max(np.abs(np.roots(poly))), rel=1e-10)
    assert not exact_stable(np.nan, 0.5, 1)


def test_classify_regime_covers_every_case():
    assert classify_regime(1.0, 0.5, 0.01) == "overdamped"
    assert classify_regime(1.0, 0.2, 0.01) == "critical"
    assert classify_regime(1.0, 0.05, 0.01) == "underdamped"
    assert classify_regime(1.0, -0.05, 0.01) == "unstable"
    assert classify_regime(1.0, 0.05, 0.0) == "unstable"
    out = classify_regime(np.array([1.0, 1.0, np.nan]), np.array([0.5, 0.05, 0.1]), 0.01)
    assert out.tolist() == ["overdamped", "underdamped", ""]


def test_critical_k_ref_is_the_first_unstable_lag_by_each_criterion():
    rng = np.random.default_rng(3)
    a = rng.lognormal(np.log(0.05), 0.6, 16)
    mu = rng.choice([0.0, 0.5, 0.9], 16)
    exact = critical_k_ref(a, mu, method="exact")
    closed = critical_k_ref(a, mu, method="closed_form")
    for ai, mi, le, lc in zip(a, mu, exact, closed):
        assert exact_stable(ai, mi, le - 1, method="eigenvalues")
        assert not exact_stable(ai, mi, le, method="eigenvalues")
        assert closed_form_stable(ai, mi, lc - 1) and not closed_form_stable(ai, mi, lc)
    assert np.all(exact >= closed)
    assert critical_k_ref(0.0, 0.5) == 0
    assert critical_k_ref(5.0, 0.5) == 0  # unstable even without lag: a > 2 (1 + mu)
    with pytest.raises(ValueError, match="method"):
        critical_k_ref(0.1, 0.5, method="nope")


def test_critical_k_ref_of_a_tiny_gain_ends_and_the_setting_reads_stable():
    # a gain below ~3e-16 puts the critical lag beyond 2**53, where mid + 1 == mid: the
    # bisection never ended (`stability --eta-k 1e-17`, or --posterior with --lr 1e-17, hung);
    # beyond 2**63 the int64 cast of the lag gave garbage thresholds. And a radius within 1e-16
    # of 1 rounded to 1.0: `stability --eta-k 1e-20` said "exact: NO" for a stable setting.
    import signal

    def too_slow(signum, frame):
        raise TimeoutError("critical_k_ref did not finish in 20 s")

    previous = signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(20)
    try:
        a = np.array([1e-15, 1e-17, 1e-20, 1e-300])
        for mu in (0.0, 0.9):
            lag = critical_k_ref(a, mu, method="exact")
            # long lags: a* L -> (pi / 2) (1 - mu)
            np.testing.assert_allclose(lag * a, 0.5 * np.pi * (1.0 - mu), rtol=1e-6)
        s = stability_summary(1e-20, 0.0, 1)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert s["stable_exact"] is True and s["stable_closed_form"] is True


def test_closed_form_threshold_at_an_integer_boundary_up_to_rounding_is_that_integer():
    # the bandit's Jacobian stiffness 0.25 comes out of autograd as 0.24999999999999437; at
    # eta 0.2, mu 0.5, (1 - mu)/a = 10 in exact arithmetic: C_eff = 0 at L = 10 (marginal)
    k = 0.24999999999999437
    a = 0.2 * k
    assert (1.0 - 0.5) / a > 10.0  # rounding puts it just above the integer
    assert critical_k_ref(a, 0.5, method="closed_form") == 10
    assert not closed_form_stable(a, 0.5, 10) and closed_form_stable(a, 0.5, 9)
    assert critical_k_ref(0.2 * 0.25, 0.5, method="closed_form") == 10
    # from either side of the integer, within the relative tolerance, and outside it
    for rel in (-1e-13, 1e-13, -1e-11, 1e-11):
        assert critical_k_ref(0.05 * (1 + rel), 0.5, method="closed_form") == 10
    assert critical_k_ref(0.05 * (1 - 1e-6), 0.5, method="closed_form") == 11
    assert critical_k_ref(0.05 * (1 + 1e-6), 0.5, method="closed_form") == 10
    # the same tie in a batch of posterior draws, and with momentum 0.9
    a_batch = np.array([0.05, 0.05 * (1 + 5e-15), 0.05 * (1 - 5e-15)])
    np.testing.assert_array_equal(critical_k_ref(a_batch, 0.5, method="closed_form"), [10, 10, 10])
    assert critical_k_ref(0.1 / 7.0 * 0.7, 0.9, method="closed_form") == 10


def test_phase_grid_contents_and_ema_convention():
    lrs = np.geomspace(1e-3, 1e-1, 12)
    ds = phase_grid(1.0, 0.9, lrs, np.arange(0, 8), convention="ema")
    assert ds["exact_stable"].dims == ("learning_rate", "k_ref")
    np.testing.assert_allclose(ds["a"].sel(k_ref=3).values, lrs * 0.1)
    assert set(np.unique(ds["regime"].values)) <= {
        "overdamped",
        "critical",
        "underdamped",
        "unstable",
    }
    # exact stable region contains the closed-form one (L >= 1) and boundaries match thresholds
    cf, ex = ds["closed_form_stable"].values, ds["exact_stable"].values
    assert np.all(ex[:, 1:] | ~cf[:, 1:])
    for lag in range(1, 8):
        thr = float(ds["exact_threshold_lr"].sel(k_ref=lag))
        col = ds["exact_stable"].sel(k_ref=lag).values
        np.testing.assert_array_equal(col, lrs < thr)
    assert ds.attrs["convention"] == "ema"


def test_stability_summary_says_which_criterion_and_handles_real_lags():
    s = stability_summary(0.0123, 0.9, 10)
    assert s["stable_closed_form"] is False and s["stable_exact"] is False
    assert s["threshold_a_exact"] == pytest.approx(0.01139, abs=5e-6)
    assert s["critical_k_ref_closed_form"] == 9 and s["critical_k_ref_exact"] == 10
    s2 = stability_summary(0.0105, 0.9, 10)  # between the two thresholds
    assert s2["stable_closed_form"] is False and s2["stable_exact"] is True
    s3 = stability_summary(0.01, 0.5, 2.5)
    assert s3["stable_exact"] is None and "integer" in s3["note"]


def test_a_lag_whose_companion_matrix_cannot_be_built_is_a_clear_error_and_the_summary_still_answers(
    tmp_path, capsys
):
    # `simulate bandit --k-ref 1e8` died with a MemoryError traceback (numpy asked for 71 PiB);
    # the verdict and threshold need no eigenvalues (boundary locus) and hold at any lag
    from bayes_grpo.cli import main
    from bayes_grpo.dynamics.stability import MAX_ROOT_LAG

    big = 10**8
    with pytest.raises(ValueError, match=rf"K_ref = {big}: .* too large beyond K_ref = {MAX_ROOT_LAG}"):
        spectral_radius(1e-9, 0.5, big)
    with pytest.raises(ValueError, match="too large beyond"):
        recursion_regime(1e-9, 0.5, big)  # a stable setting needs its dominant root
    assert recursion_regime(1.0, 0.5, big) == "unstable"  # the verdict alone needs none
    s = stability_summary(1e-9, 0.5, big)
    assert s["stable_exact"] is True and s["spectral_radius"] is None and s["regime_exact"] is None
    assert s["threshold_a_exact"] == pytest.approx(float(boundary_locus_threshold(0.5, big)), rel=1e-12)
    assert f"K_ref above {MAX_ROOT_LAG}" in s["note"]
    assert stability_summary(1e-3, 0.5, big)["regime_exact"] == "unstable"
    assert main(["simulate", "bandit", "--k-ref", "1e8", "--steps", "5", "--seeds", "1", "-o", str(tmp_path / "b.nc")]) == 2
    assert "K_ref = 100000000: the characteristic roots" in capsys.readouterr().err


def test_the_summary_takes_its_radius_and_regime_from_one_set_of_roots_as_the_functions_give_them(monkeypatch):
    # stability_summary computed the companion eigenvalues twice (spectral_radius, then
    # recursion_regime): `stability --k-ref 2000` 74 s; once now, with the same answers
    calls = []
    eigvals = np.linalg.eigvals
    monkeypatch.setattr(np.linalg, "eigvals", lambda m: calls.append(m.shape) or eigvals(m))
    stability_summary(1e-4, 0.5, 200)  # above AUTO_BISECTION_MAX_LAG: a* by the boundary locus
    assert calls == [(1, 201, 201)]
    rng = np.random.default_rng(4)
    for lag in (0, 1, 3, 17):
        for mu in (0.0, 0.5, 0.9):
            thr = float(boundary_locus_threshold(mu, lag))
            for a in (thr * rng.uniform(0.01, 0.99), thr * 1.3, ((1 - np.sqrt(mu)) ** 2 if lag == 0 else thr / 7)):
                s = stability_summary(a, mu, lag)
                assert s["spectral_radius"] == pytest.approx(float(spectral_radius(a, mu, lag)), rel=1e-12)
                assert s["regime_exact"] == recursion_regime(a, mu, lag), (a, mu, lag)


def test_threshold_verdict_equals_eigenvalue_verdict_on_random_settings():
    # The fast exact_stable relies on the stable set in a being exactly (0, a*(mu, L)).
    rng = np.random.default_rng(12)
    lag = rng.integers(0, 25, 3000)
    mu = rng.choice([0.0, 0.3, 0.6, 0.9, 0.97], 3000)
    a = exact_threshold(mu, lag, method="boundary_locus") * rng.uniform(0.0, 3.0, 3000)
    fast = exact_stable(a, mu, lag)
    slow = exact_stable(a, mu, lag, method="eigenvalues")
    near = np.abs(a / exact_threshold(mu, lag, method="boundary_locus") - 1.0) < 1e-8
    assert np.array_equal(fast[~near], slow[~near])
    assert 0.2 < fast.mean() < 0.5  # both sides well represented


def test_the_summary_of_a_vanishing_gain_prints_no_overflow_warning():
    # its critical lag (5e299) squared overflows in M_eff, which the closed-form criterion
    # does not use: `stability --eta-k 1e-300` printed "RuntimeWarning: overflow encountered in square"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = stability_summary(1e-300, 0.5, 2)
    assert s["critical_k_ref_closed_form"] == pytest.approx(0.5 / 1e-300)


def test_the_recursions_regime_is_what_the_simulated_recursion_does_in_the_long_run():
    # The regime by the recursion's dominant root, checked against the recursion itself: past
    # its transient, an underdamped run keeps changing sign, an overdamped one keeps its sign,
    # an unstable one grows. Settings are drawn across momenta, lags (0 included) and gains up
    # to 1.2x the exact threshold; those whose long-run behaviour does not show within the
    # simulated steps (a subdominant root within 1% of the dominant one, an oscillation slower
    # than a few sign changes per tail, a decay that underflows) are left out by numpy.roots,
    # an independent routine.
    rng = np.random.default_rng(0)
    n_steps, tail = 4000, 1500
    checked, differs_from_continuum = 0, 0
    for _ in range(400):
        mu = float(rng.choice([0.0, 0.5, 0.9]))
        lag = int(rng.integers(0, 9))
        a = float(exact_threshold(mu, lag)) * 10 ** rng.uniform(-2.0, np.log10(1.2))
        poly = np.zeros(max(lag, 1) + 2)
        if lag == 0:
            poly[:3] = [1.0, a - 1.0 - mu, mu]
        else:
            poly[0], poly[1] = 1.0, -(1.0 + mu)
            poly[2] += mu
            poly[lag + 1] += a
        roots = np.roots(np.trim_zeros(poly, "b")) if lag == 0 else np.roots(poly)
        mod = np.sort(np.abs(roots))[::-1]
        dominant = roots[np.argmax(np.abs(roots))]
        angle = abs(np.angle(dominant))
        distinct = mod[1:][np.abs(mod[1:] - mod[0]) > 1e-9 * mod[0]]  # the pair's twin dropped
        gap = (distinct[0] / mod[0]) if distinct.size else 0.0
        if gap > 0.99 or (1e-9 < angle < 20 * np.pi / tail) or abs(n_steps * np.log(mod[0])) > 550:
            continue
        regime = recursion_regime(a, mu, lag)
        e = simulate_recursion(np.array([a]), np.array([mu]), np.array([lag]), n_steps=n_steps)[0]
        late = e[-tail:]
        sign_changes = int(np.sum(np.sign(late[1:]) != np.sign(late[:-1])))
        if regime == "unstable":
            assert np.max(np.abs(late)) > np.max(np.abs(e[-2 * tail : -tail]))
        elif regime == "underdamped":
            assert sign_changes >= 10, (a, mu, lag)
        else:
            assert regime == "overdamped" and sign_changes == 0, (a, mu, lag, regime)
        m, c, k = oscillator_coefficients(a, mu, lag)
        differs_from_continuum += regime != classify_regime(m, c, k)
        checked += 1
    assert checked >= 200
    # the cases where the continuum's label is wrong for the recursion are among them
    assert differs_from_continuum >= 10


def test_between_the_thresholds_the_continuum_says_unstable_and_the_recursion_oscillates():
    # mu 0.5, K_ref 2: closed-form threshold 0.25, exact 0.2808; at a = 0.27 the recursion
    # converges (spectral radius 0.993) with a complex dominant root
    s = stability_summary(0.27, 0.5, 2)
    assert s["regime"] == "unstable" and s["stable_exact"] is True
    assert s["regime_exact"] == "underdamped"
    assert stability_summary(0.27, 0.5, 2.5)["regime_exact"] is None  # no recursion for a real lag
    # a double real root: z^2 - z + 1/4 at mu 0, K_ref 1
    assert recursion_regime(0.25, 0.0, 1) == "critical"
    assert recursion_regime(np.array([0.2, np.nan, 0.3]), 0.0, 1).tolist() == [
        "overdamped",
        "",
        "underdamped",
    ]
    ds = phase_grid(1.0, 0.5, [0.2, 0.27, 0.3], [2])
    assert ds["regime"].values[1:, 0].tolist() == ["unstable", "unstable"]
    assert ds["regime_exact"].values[1:, 0].tolist() == ["underdamped", "unstable"]


def _companion_roots(a, mu, lag):
    from bayes_grpo.dynamics.stability import characteristic_coefficients

    c = characteristic_coefficients([a], [mu], lag)[0]
    companion = np.eye(c.size, k=-1)
    companion[0, :] = -c
    return np.linalg.eigvals(companion)[None, :]


def _overdamped_edge(mu, lag):
    # the gain at which the two real roots in (mu, 1) meet: the top of x^(L-1) (1 - x)(x - mu)
    b = lag * (1.0 + mu)
    top = (b + np.sqrt(b * b - 4.0 * (lag + 1) * (lag - 1) * mu)) / (2.0 * (lag + 1))
    return top ** (lag - 1) * (1.0 - top) * (top - mu)


def test_the_dominant_roots_by_the_root_count_give_the_eigenvalues_radius_and_regime():
    # `stability --k-ref 2000` took ~20 s in the eigenvalues of a 2001-row companion matrix; beyond
    # WINDING_MIN_LAG the dominant roots come from an argument-principle count (~0.3 s). Checked
    # where both run: random settings, near the stability boundary and near the overdamped edge.
    from bayes_grpo.dynamics.stability import _dominant_roots, _regime_of_roots

    rng = np.random.default_rng(21)
    regimes = set()
    for _ in range(30):
        lag = int(rng.integers(1, 160))
        mu = float(rng.choice([0.0, 0.5, 0.9, rng.uniform(0.0, 0.999)]))
        base = float(exact_threshold(mu, lag)) if rng.uniform() < 0.5 else _overdamped_edge(mu, lag)
        a = base * float(np.exp(rng.choice([rng.normal(0, 1e-7), rng.normal(0, 1e-2), rng.normal(0, 2)])))
        exact, fast = _companion_roots(a, mu, lag), _dominant_roots(a, mu, lag)[None, :]
        radius = np.max(np.abs(exact))
        assert np.max(np.abs(fast)) == pytest.approx(radius, rel=1e-10), (a, mu, lag)
        assert _regime_of_roots(fast)[0] == _regime_of_roots(exact)[0], (a, mu, lag)
        regimes.add(_regime_of_roots(exact)[0])
    assert regimes == {"overdamped", "underdamped"}


@pytest.mark.parametrize("lag", [1, 2, 7, 60, 300, 3000])
def test_the_root_count_inside_the_unit_circle_gives_the_exact_verdict_at_the_boundary(lag):
    # no false stable / unstable verdict: a gain a relative 1e-6 either side of a* reads as such
    from bayes_grpo.dynamics.stability import _roots_inside

    for mu in (0.0, 0.3, 0.9, 0.99):
        thr = float(boundary_locus_threshold(mu, lag))
        assert _roots_inside(1.0, thr * (1 - 1e-6), mu, lag) == lag + 1
        assert _roots_inside(1.0, thr * (1 + 1e-6), mu, lag) < lag + 1
        assert spectral_radius(thr * (1 - 1e-6), mu, lag) < 1.0 < spectral_radius(thr * (1 + 1e-6), mu, lag)


def test_beyond_the_eigenvalue_lags_the_radius_and_regime_are_the_companion_matrixs(monkeypatch):
    # the public functions at lags past WINDING_MIN_LAG (no eigenvalues called) against the
    # eigenvalues computed here, and the summary at K_ref = 2000 in well under its old ~20 s
    import time

    from bayes_grpo.dynamics.stability import WINDING_MIN_LAG, _regime_of_roots

    lag = WINDING_MIN_LAG + 44
    settings = [(0.5, 0.9), (0.999, 0.0), (1.3, 0.5), (0.05, 0.5), (0.3, 0.97)]
    exact = []
    for frac, mu in settings:
        a = frac * float(boundary_locus_threshold(mu, lag))
        roots = _companion_roots(a, mu, lag)
        exact.append((a, mu, np.max(np.abs(roots)), _regime_of_roots(roots)[0]))
    monkeypatch.setattr(np.linalg, "eigvals", lambda m: pytest.fail("eigenvalues computed"))
    for a, mu, radius, regime in exact:
        assert float(spectral_radius(a, mu, lag)) == pytest.approx(radius, rel=1e-10)
        want = regime if radius < 1.0 else "unstable"
        assert recursion_regime(a, mu, lag) == want
        s = stability_summary(a, mu, lag)
        assert s["spectral_radius"] == pytest.approx(radius, rel=1e-10) and s["regime_exact"] == want
    start = time.perf_counter()
    s = stability_summary(5e-4, 0.9, 2000)
    assert time.perf_counter() - start < 5.0
    assert s["spectral_radius"] == pytest.approx(1.00068378, abs=1e-8) and s["regime_exact"] == "unstable"


def test_the_dominant_roots_are_found_once_per_distinct_setting(monkeypatch):
    # `simulate sde --k-ref 2000 --seeds 3 --group-size 4,8,16` asked for the same root 9 times
    import bayes_grpo.dynamics.stability as stability

    calls = []
    real = stability._dominant_roots
    monkeypatch.setattr(stability, "_dominant_roots", lambda a, mu, lag: calls.append(a) or real(a, mu, lag))
    a = np.array([1e-5, 2e-5, 1e-5, 1e-5, 2e-5])
    radius = spectral_radius(a, 0.9, 300)
    assert len(calls) == 2 and radius[0] == radius[2] == radius[3] and radius[1] == radius[4]
    assert radius[0] == pytest.approx(float(spectral_radius(1e-5, 0.9, 300)), rel=0)


@pytest.mark.parametrize("a", [1e30, 1e300])
def test_the_dominant_root_of_a_huge_gain_is_found_without_overflow(a):
    # Cauchy's bound 1 + a put the first circle at r = 1e300: (r - 1)^2 overflowed (a traceback
    # from `stability --eta-k 1e300 --k-ref 1000`); the root satisfies |g(z)| = a, g = z^(L-1)(z-1)(z-mu)
    from bayes_grpo.dynamics.stability import _dominant_roots

    lag, mu = 1000, 0.5
    z = complex(_dominant_roots(a, mu, lag)[0])
    log_g = (lag - 1) * np.log(abs(z)) + np.log(abs(z - 1)) + np.log(abs(z - mu))
    assert log_g == pytest.approx(np.log(a), rel=1e-9)
    assert stability_summary(a, mu, lag)["regime_exact"] == "unstable"


@pytest.mark.parametrize("a, mu, lag", [(0.3, 0.1, 3), (0.18, 0.1, 5), (0.1, 0.5, 5), (0.01, 0.9, 10)])
def test_a_setting_on_the_closed_form_boundary_is_unstable_in_its_continuum_regime_too(a, mu, lag):
    # C_eff = (1 - mu) - a K_ref is 0 up to rounding (1.1e-16 at a 0.3, mu 0.1, K_ref 3): the
    # closed form says "not stable", and the continuum regime said "underdamped, zeta = 7e-17"
    s = stability_summary(a, mu, lag)
    assert s["stable_closed_form"] is False
    assert s["regime"] == "unstable" and s["zeta"] is None


def test_closed_form_marginal_is_c_eff_zero_up_to_rounding_of_either_sign():
    # `stability` printed C_eff = -2.77556e-17 (a 0.05, mu 0.9, K_ref 2) and 1.11022e-16 (a 0.3,
    # mu 0.1, K_ref 3): both the threshold; one rule, closed_form_stable's, tells the text so
    from bayes_grpo.dynamics.stability import closed_form_marginal

    a, mu, lag = np.array([0.05, 0.3, 0.0499, 0.31, np.nan]), np.array([0.9, 0.1, 0.9, 0.1, 0.5]), np.array([2, 3, 2, 3, 1])
    damping = oscillator_coefficients(a, mu, lag)[1]
    assert damping[0] < 0 < damping[1] and max(abs(damping[:2])) < 1e-15  # rounding, both ways
    assert closed_form_marginal(a, mu, lag).tolist() == [True, True, False, False, False]
    assert not closed_form_stable(a, mu, lag)[:2].any() and closed_form_stable(a, mu, lag)[2]


@pytest.mark.parametrize("a, mu, lag", [(0.3, 0.1, 3), (0.18, 0.1, 5)])
def test_a_setting_on_the_closed_form_boundary_is_unstable_in_the_phase_grid_too(a, mu, lag):
    # C_eff = 1.1e-16 (0 up to rounding): the summary said "unstable" while the phase grid of the
    # same setting said "underdamped" with zeta 7e-17; one rule for both, closed_form_stable's
    grid = phase_grid(1.0, mu, [a], [lag])
    assert not bool(grid["closed_form_stable"].values[0, 0])
    assert str(grid["regime"].values[0, 0]) == stability_summary(a, mu, lag)["regime"] == "unstable"
    assert np.isnan(grid["zeta"].values[0, 0])


def test_dominant_period_is_that_of_the_root_of_largest_modulus():
    # K_ref = 0: z^2 - (1 + mu - a) z + mu, a complex pair of angle arccos((1 + mu - a) / (2 sqrt mu))
    from bayes_grpo.dynamics.stability import dominant_period

    mu, a = 0.5, 0.1
    assert dominant_period(a, mu, 0) == pytest.approx(
        2 * np.pi / np.arccos((1 + mu - a) / (2 * np.sqrt(mu))), rel=1e-12
    )
    # real dominant roots: positive (mu = 0, a small: z = 1 - a) is monotone, negative alternates
    assert dominant_period(0.01, 0.0, 0) == np.inf and dominant_period(1.9, 0.0, 0) == 2.0
    # a long lag (dominant roots by the argument principle) against the companion matrix
    z = np.roots([1.0, -(1 + mu), mu] + [0.0] * 38 + [a])
    top = z[np.argmax(np.abs(z))]
    assert dominant_period(a, mu, 40) == pytest.approx(2 * np.pi / abs(np.angle(top)), rel=1e-6)


def test_a_gain_whose_critical_lag_is_beyond_the_floats_has_none_not_an_error_about_k_ref(capsys):
    # critical_k_ref(1e-308, 0.5) failed with "k_ref must be finite for the exact stability
    # criterion" (its search bound pi (1 + mu) / a overflowed to inf), and `stability --eta-k
    # 1e-308` said so for a K_ref of 1; the closed form warned of an overflow at 5e-324
    import warnings

    from bayes_grpo.cli import main
    from bayes_grpo.dynamics.stability import critical_k_ref

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exact = critical_k_ref([1e-308, 5e-324, 1e-300], 0.5)
        closed = critical_k_ref([1e-308, 5e-324, 1e-300], 0.5, method="closed_form")
    # long lags: a*(L) -> pi (1 - mu) / (2 L), so the critical lag is pi (1 - mu) / (2 a)
    assert exact[0] == pytest.approx(np.pi * 0.5 / 2e-308, rel=1e-6) and np.isinf(exact[1])
    assert exact[2] == pytest.approx(np.pi * 0.5 / 2e-300, rel=1e-6)
    assert closed[0] == pytest.approx(5e307) and np.isinf(closed[1])
    assert main(["stability", "--eta-k", "1e-308", "--momentum", "0.5"]) == 0
    assert "critical K_ref exact: first unstable K_ref = 7.85398e+307" in capsys.readouterr().out
    assert main(["stability", "--eta-k", "1e-320", "--momentum", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "critical K_ref exact: first unstable K_ref = none below the largest float" in out


def test_a_lag_beyond_the_64_bit_integers_is_judged_by_the_threshold_not_refused_as_negative():
    # exact_stable(a, mu, 1e19) said "k_ref must be >= 0, got -9.223372036854776e+18" (the lag
    # wrapped in an int64 cast); the boundary locus takes any whole lag
    from bayes_grpo.dynamics.stability import exact_stable, spectral_radius

    # a*(L) -> pi (1 - mu) / (2 L): 1.57e-20 at L = 1e19, mu = 0.9
    assert exact_stable(np.array([1e-3, 1e-21]), 0.9, 1e19).tolist() == [False, True]
    with pytest.raises(ValueError, match=r"K_ref = 1e\+19: the characteristic roots .* not computed beyond K_ref = 100000"):
        spectral_radius(0.1, 0.5, 1e19)
