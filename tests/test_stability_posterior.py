"""Stability with uncertainty: posterior probabilities from curvature draws.

The probabilities are checked against an independent route: iterating the discrete
lagged heavy-ball recursion for each draw and seeing whether it diverges.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from bayes_grpo.checks.stability import (
    phase_diagram_from_draws,
    phase_probabilities,
    stability_from_draws,
    stability_probabilities,
    stability_verdict,
)


def _diverges(a: float, mu: float, lag: int, n: int = 6000) -> bool:
    """Iterate e[n+1] = e[n] + mu (e[n] - e[n-1]) - a e[n-L] from e = 1 and look at the tail."""
    e = np.ones(n)
    for k in range(max(lag, 1), n - 1):
        e[k + 1] = e[k] + mu * (e[k] - e[k - 1]) - a * e[k - lag]
        if abs(e[k + 1]) > 1e6:
            return True
    return bool(np.max(np.abs(e[-500:])) > 1e-3)


def _draws(median: float, sd_log: float = 0.4, n: int = 400, seed: int = 0) -> np.ndarray:
    return np.exp(np.random.default_rng(seed).normal(np.log(median), sd_log, n))


def test_posterior_probability_of_instability_matches_simulating_each_draw():
    mu, lag = 0.5, 5
    a = _draws(0.12, n=120)  # straddles the exact threshold a* = 0.1286
    out = stability_probabilities(a, momentum=mu, k_ref=lag)
    simulated = np.mean([_diverges(x, mu, lag) for x in a])
    assert out["p_unstable_exact"] == pytest.approx(simulated, abs=1 / 60)
    assert 0.2 < out["p_unstable_exact"] < 0.8
    # The closed form is conservative beyond L = 1: it calls more draws unstable.
    assert out["p_unstable_closed_form"] >= out["p_unstable_exact"]
    assert out["p_unstable_closed_form"] == pytest.approx(np.mean(a * lag >= 1 - mu))


def test_the_exact_verdict_over_posterior_draws_needs_no_eigenvalues_at_long_lags(monkeypatch):
    # p_unstable_exact took the companion eigenvalues of every draw: 0.23 s a draw at K_ref = 300,
    # `stability --posterior models/tiny.nc ... --k-ref 300` over 5 minutes (2000 draws)
    from bayes_grpo.dynamics.stability import boundary_locus_threshold, spectral_radius

    mu, lag = 0.5, 300
    a = _draws(float(boundary_locus_threshold(mu, lag)), sd_log=0.2, n=2000)

    def no_eigenvalues(m):
        raise AssertionError(f"eigenvalues of {m.shape[0]} companion matrices of {m.shape[1]} rows")

    monkeypatch.setattr(np.linalg, "eigvals", no_eigenvalues)
    out = stability_probabilities(a, momentum=mu, k_ref=lag)
    assert 0.3 < out["p_unstable_exact"] < 0.7 and np.isnan(out["spectral_radius_median"])
    monkeypatch.undo()
    # the same verdict as the eigenvalues (on a few draws: each costs a 301 x 301 eigenproblem)
    few = a[::400]
    verdict = stability_probabilities(few, momentum=mu, k_ref=lag)["p_unstable_exact"]
    assert verdict == np.mean(~(spectral_radius(few, mu, lag) < 1.0))
    # short lags keep the median radius from the eigenvalues
    assert np.isfinite(stability_probabilities(a[:50], momentum=mu, k_ref=5)["spectral_radius_median"])


def test_oscillation_probability_and_zeta_follow_the_coefficients():
    mu, lag = 0.0, 1
    a = _draws(0.05, n=2000)
    out = stability_probabilities(a, momentum=mu, k_ref=lag)
    M, C = (1 + mu) / 2 + a * lag**2 / 2, (1 - mu) - a * lag
    zeta = C / (2 * np.sqrt(M * a))
    assert out["p_oscillatory"] == pytest.approx(np.mean((C > 0) & (zeta < 1)))
    assert out["zeta_median"] == pytest.approx(np.median(zeta))
    assert out["zeta_lo"] < out["zeta_median"] < out["zeta_hi"]
    # Stiff, lag-free, momentum-free: every draw stable; critical K_ref around (1 - mu)/a.
    assert out["p_unstable_exact"] == 0.0
    assert out["critical_k_ref_closed_form_median"] == pytest.approx(
        np.median(np.ceil(1 / a)), rel=0.01
    )


def test_verdict_needs_ninety_percent_posterior_mass():
    assert stability_verdict(0.05) is True
    assert stability_verdict(0.5) is None
    assert stability_verdict(0.95) is False
    assert stability_verdict(float("nan")) is None


def test_stability_check_result_reports_both_criteria_and_says_which():
    res = stability_from_draws(
        _draws(0.8), learning_rate=1e-3, momentum=0.0, momentum_convention="heavy_ball", k_ref=4
    )
    assert res.name == "stability" and res.passed is False
    assert "exact discrete criterion" in res.summary and "closed form" in res.summary
    d = res.to_dict()
    assert d["values"]["p_unstable_exact"] > 0.9
    assert "critical K_ref, exact" in res.table.index


def test_phase_grid_probability_rises_with_learning_rate_and_lag():
    K = _draws(100.0, n=500)
    grid = phase_probabilities(
        K,
        momentum=0.9,
        momentum_convention="ema",
        learning_rates=np.geomspace(1e-4, 1e-1, 12),
        k_refs=range(0, 9),
    )
    p = grid["p_unstable_exact"].values
    assert np.all(np.diff(p, axis=0) >= -1e-12) and np.all(np.diff(p[:, 1:], axis=1) >= -1e-12)
    # Direct check at one grid point through the spectral radius route.
    i, j = 7, 6
    a = float(grid["learning_rate"][i]) * (1 - 0.9) * K
    direct = stability_probabilities(a, momentum=0.9, k_ref=6)["p_unstable_exact"]
    assert p[i, j] == pytest.approx(direct)
    assert np.all(grid["p_unstable_closed_form"].values[:, 1:] >= p[:, 1:] - 1e-12)


def test_the_phase_grid_takes_its_exact_threshold_without_eigenvalues(monkeypatch):
    # `phase-diagram models/tiny.nc --k-ref-max 128` took 27 s, 19 of them bisecting on companion
    # eigenvalues for a* at each K_ref <= 128; the boundary locus is the verdict's own route
    from bayes_grpo.dynamics import exact_threshold

    lags = np.arange(0, 129)
    slow = {lag: float(exact_threshold(0.9, lag, method="bisection")) for lag in (1, 2, 17, 128)}
    monkeypatch.setattr(np.linalg, "eigvals", lambda m: pytest.fail("eigenvalues computed"))
    grid = phase_probabilities(
        _draws(100.0, n=50),
        momentum=0.9,
        momentum_convention="ema",
        learning_rates=np.geomspace(1e-4, 1e-1, 3),
        k_refs=lags,
    )
    for lag, a_star in slow.items():
        assert float(grid["exact_threshold_gain"].sel(k_ref=lag)) == pytest.approx(a_star, rel=1e-9)


def test_a_long_k_ref_grid_is_computed_in_blocks_with_the_same_probabilities(monkeypatch):
    # `phase-diagram --k-ref-max 5000` peaked at 820 MB (draws x K_ref arrays; ~16 GB at 100000)
    import bayes_grpo.checks.stability as stability

    kwargs = dict(
        momentum=0.5,
        momentum_convention="heavy_ball",
        learning_rates=np.geomspace(1e-4, 1e-2, 4),
        k_refs=np.arange(0, 301),
    )
    K = _draws(20.0, n=200)
    whole = phase_probabilities(K, **kwargs)
    seen = []
    real = stability.oscillator_coefficients
    monkeypatch.setattr(
        stability, "oscillator_coefficients", lambda a, mu, lag: seen.append(np.size(lag)) or real(a, mu, lag)
    )
    monkeypatch.setattr(stability, "_MAX_GRID_ENTRIES", 200 * 64)
    blocked = phase_probabilities(K, **kwargs)
    assert max(seen) == 64
    for name in ("p_unstable_exact", "p_unstable_closed_form", "p_oscillatory"):
        np.testing.assert_array_equal(blocked[name].values, whole[name].values)
    assert 0 < float(whole["p_oscillatory"].mean()) < 1 and 0 < float(whole["p_unstable_exact"].mean()) < 1


def test_a_phase_diagram_over_a_long_k_ref_grid_holds_no_draws_by_k_ref_array():
    # the threshold table divided a* by every draw's curvature: a draws x K_ref array (1.6 GB for
    # 2000 draws at `phase-diagram --k-ref-max 100000`), as did the grid's probabilities
    import tracemalloc

    from bayes_grpo.constants import HDI_PROB
    from bayes_grpo.dynamics import boundary_locus_threshold

    K = _draws(50.0, n=2000)
    small = phase_diagram_from_draws(
        K, momentum=0.5, momentum_convention="heavy_ball", k_refs=range(0, 9)
    )
    for lag in (0, 3, 8):
        direct = float(boundary_locus_threshold(0.5, lag)) / K  # per draw
        row = small.table.loc[lag]
        assert row["threshold_lr_median"] == pytest.approx(float(np.median(direct)), rel=1e-12)
        tail = (1.0 - HDI_PROB) / 2.0
        assert row["threshold_lr_lo"] == pytest.approx(float(np.quantile(direct, tail)), rel=1e-12)
        assert row["threshold_lr_hi"] == pytest.approx(float(np.quantile(direct, 1 - tail)), rel=1e-12)
    tracemalloc.start()
    try:
        phase_diagram_from_draws(
            K,
            momentum=0.5,
            momentum_convention="heavy_ball",
            learning_rates=np.geomspace(1e-4, 1e-2, 3),
            k_refs=np.arange(0, 20001),
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 120e6  # one draws x K_ref array of floats alone is 320 MB


def test_phase_diagram_marks_observed_runs_and_flags_those_at_risk():
    K = _draws(50.0, n=300)
    observed = pd.DataFrame({"learning_rate": [1e-3, 1e-3], "k_ref": [1, 2]})
    res = phase_diagram_from_draws(
        K, momentum=0.0, momentum_convention="heavy_ball", observed=observed
    )
    assert res.passed is True and "phase diagram" in res.figures
    risky = pd.DataFrame({"learning_rate": [1e-3, 0.1], "k_ref": [1, 8]})
    res2 = phase_diagram_from_draws(
        K, momentum=0.0, momentum_convention="heavy_ball", observed=risky
    )
    assert res2.passed is False and res2.values["n_observed_at_risk"] == 1
    lr_med = res.table.loc[1, "threshold_lr_median"]
    assert lr_med == pytest.approx(1.0 / np.median(K), rel=1e-6)  # a* = 1 at mu=0, L=1


class _StiffnessPosterior:
    """coefficient_draws with the gain from curvature draws around a given K."""

    def __init__(self, stiffness: float, sd_log: float = 0.05):
        self.K = np.exp(np.random.default_rng(0).normal(np.log(stiffness), sd_log, 400))

    def coefficient_draws(
        self, *, learning_rate, momentum, momentum_convention, k_ref, group_size=None, model=None
    ):
        from bayes_grpo.dynamics import effective_step

        a = effective_step(learning_rate, momentum, momentum_convention) * self.K
        return {"a": pd.Series(a)}


def test_bandit_threshold_predicted_from_the_posterior_contains_the_sweep_threshold():
    from bayes_grpo.bandit import bandit_truth
    from bayes_grpo.bandit.experiments import sweep_k_ref
    from bayes_grpo.checks.stability import bandit_threshold_check

    K = bandit_truth(
        group_size=8,
        learning_rate=1.0,
        momentum=0.5,
        momentum_convention="heavy_ball",
        k_ref=1,
        beta=1.0,
    )["stiffness"]
    sweep = sweep_k_ref(
        list(range(0, 8)),
        seeds=4,
        steps=800,
        group_size=8,
        learning_rate=0.8,
        momentum=0.5,
        progress=False,
    )
    res = bandit_threshold_check(_StiffnessPosterior(K), sweep)
    assert res.passed is True
    assert (
        res.values["predicted_exact_lo"]
        <= res.values["empirical_threshold_k_ref"]
        <= res.values["predicted_exact_hi"]
    )
    # A posterior with the curvature 3x too large puts the threshold too early: the check fails.
    wrong = bandit_threshold_check(_StiffnessPosterior(3 * K), sweep)
    assert wrong.passed is False


def test_phase_diagram_default_grid_takes_the_number_of_learning_rates(tmp_path, capsys):
    # `phase-diagram --n-lr 10` (and 0, -3) was ignored without --lr-min/--lr-max: always 40
    from bayes_grpo.cli import main

    K = _draws(50.0, n=100)
    res = phase_diagram_from_draws(
        K, momentum=0.0, momentum_convention="heavy_ball", n_learning_rates=7
    )
    assert len(res.values["learning_rates"]) == 7
    with pytest.raises(ValueError, match="at least 2 learning rates, got 1"):
        phase_diagram_from_draws(
            K, momentum=0.0, momentum_convention="heavy_ball", n_learning_rates=1
        )
    out = tmp_path / "phase.png"
    assert main(["phase-diagram", str(tmp_path / "fit.nc"), "-o", str(out), "--n-lr", "0"]) == 2
    assert "--n-lr must be at least 2" in capsys.readouterr().err
    assert not out.exists()


def test_a_damping_ratio_is_reported_only_for_draws_whose_oscillator_is_damped():
    """Like the point summary and the phase grid: C_eff <= 0 is the unstable regime, not a negative zeta."""
    mu, lag = 0.5, 4
    a = np.r_[np.full(300, 0.05), np.full(700, 0.3)]  # C_eff = 0.3 and -0.7
    res = stability_from_draws(a, learning_rate=1.0, momentum=mu, momentum_convention="heavy_ball", k_ref=lag)
    M, C = (1 + mu) / 2 + 0.05 * lag**2 / 2, (1 - mu) - 0.05 * lag
    assert res.values["zeta_median"] == pytest.approx(C / (2 * np.sqrt(M * 0.05)))
    assert res.values["zeta_lo"] > 0 and res.values["p_damped"] == pytest.approx(0.3)
    assert "over the 30.0% of draws with C_eff > 0" in res.summary
    anti = stability_from_draws(np.full(50, 0.3), learning_rate=1.0, momentum=mu, momentum_convention="heavy_ball", k_ref=lag)
    assert np.isnan(anti.values["zeta_median"]) and "zeta n/a" in anti.summary and "nan" not in anti.summary


def test_a_fractional_k_ref_gets_the_closed_form_and_no_exact_verdict_as_in_point_mode():
    # `stability --posterior --k-ref 1.5` refused ("needs an integer lag") where point mode and
    # predict give the closed form and say the exact criterion is not defined
    import warnings

    a = _draws(0.2, n=400)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = stability_from_draws(a, learning_rate=1.0, momentum=0.5, momentum_convention="heavy_ball", k_ref=1.5)
    assert np.isnan(res.values["p_unstable_exact"]) and res.passed is None
    assert res.values["p_unstable_closed_form"] == pytest.approx(np.mean(a * 1.5 >= 0.5))
    assert "exact criterion is not defined" in res.summary and "nan" not in res.summary


def test_a_phenomenological_fit_asked_about_a_new_llm_says_it_needs_a_mechanistic_fit():
    # `phase-diagram phen.nc` / `stability --posterior phen.nc` without --model failed in
    # coefficient_draws ("the phenomenological model has no population level: model must be
    # one of [...]"), sending the user to --model, which then failed for the real reason
    from bayes_grpo.checks.stability import phase_diagram, stability_from_posterior

    class PhenomenologicalFit:
        parameterisation = "phenomenological"
        runset = None

        def coefficient_draws(self, *, model=None, **kwargs):
            raise ValueError(
                "the phenomenological model has no population level: model must be one of ['x']"
            )

    setting = dict(momentum=0.9, momentum_convention="ema", k_ref=1)
    with pytest.raises(ValueError, match="needs a mechanistic fit; this one is phenomenological"):
        stability_from_posterior(PhenomenologicalFit(), learning_rate=1e-6, **setting)
    with pytest.raises(ValueError, match="needs a mechanistic fit; this one is phenomenological"):
        phase_diagram(PhenomenologicalFit(), momentum=0.9, momentum_convention="ema")


def test_a_saved_phenomenological_fit_refused_by_stability_is_named_by_its_path(monkeypatch, tmp_path, capsys):
    # `stability --posterior phen.nc ...` and `phase-diagram phen.nc` (a fit of the public
    # wordle and Qwen3.5 logs) said "error: stability of a setting needs a mechanistic fit; this
    # one is phenomenological ..." without naming the file
    import bayes_grpo.model.core as core
    from bayes_grpo.checks.stability import phase_diagram, stability_from_posterior

    class PhenomenologicalFit:
        parameterisation = "phenomenological"
        runset = None

    monkeypatch.setattr(core, "as_fitted_model", lambda posterior, **kw: (PhenomenologicalFit(), []))
    setting = dict(momentum=0.9, momentum_convention="ema", k_ref=1)
    with pytest.raises(ValueError, match=r"^models/phen\.nc: stability of a setting needs a mechanistic fit; this one is phenomenological"):
        stability_from_posterior("models/phen.nc", learning_rate=1e-6, **setting)
    with pytest.raises(ValueError, match=r"^models/phen\.nc: stability of a setting needs a mechanistic fit"):
        phase_diagram("models/phen.nc", momentum=0.9, momentum_convention="ema")
    from bayes_grpo.cli import main

    capsys.readouterr()
    assert main(["phase-diagram", "models/phen.nc", "-o", str(tmp_path / "phase.png"), "--momentum", "0.9"]) != 0
    assert "phase-diagram: error: models/phen.nc: stability of a setting needs a mechanistic fit" in capsys.readouterr().err


def test_a_run_at_a_fractional_k_ref_is_marked_on_the_phase_diagram_but_not_assessed():
    # `phase-diagram fit.nc` of runs logged at K_ref 1.5 (ingest keeps it, with a warning; the
    # fit takes it) failed: "the exact stability criterion needs an integer lag k_ref; got [1.5]"
    K = _draws(50.0, n=300)
    observed = pd.DataFrame({"learning_rate": [1e-3, 1e-3, 0.1], "k_ref": [1.5, 2.0, 8.0]})
    res = phase_diagram_from_draws(K, momentum=0.0, momentum_convention="heavy_ball", observed=observed)
    assert res.passed is False and res.values["n_observed_at_risk"] == 1
    assert res.values["n_observed_not_assessed"] == 1
    assert "1 of 2 observed runs" in res.summary and "fractional K_ref (1.5)" in res.summary
    # one run in the singular (it said "1 observed run(s) at a fractional K_ref (1.5) are marked")
    assert "1 observed run at a fractional K_ref (1.5) is marked but not assessed" in res.summary
    only = phase_diagram_from_draws(K, momentum=0.0, momentum_convention="heavy_ball", observed=observed[:1])
    assert only.passed is None and "not assessed" in only.summary


def test_a_phase_diagram_of_one_k_ref_draws_its_row():
    # `phase-diagram fit.nc --k-ref-max 0` drew two empty panels: shading="nearest" gave the one
    # K_ref a row of zero height
    from matplotlib.collections import QuadMesh

    K = _draws(50.0, n=300)
    res = phase_diagram_from_draws(K, momentum=0.0, momentum_convention="heavy_ball", k_refs=[0])
    for ax in res.figures["phase diagram"].axes[:2]:  # the two panels (then their colour bars)
        mesh = next(c for c in ax.collections if isinstance(c, QuadMesh))
        y = mesh.get_coordinates()[..., 1]
        assert y.min() == pytest.approx(-0.5) and y.max() == pytest.approx(0.5)  # K_ref 0 +- half a step


def test_a_phase_diagram_names_the_observed_runs_off_its_grid():
    # `phase-diagram fit.nc --k-ref-max 0` of runs at K_ref 1 and 2 said "0 of 8 observed runs
    # sit where P(unstable) >= 0.5" with no word that none of them was on the grid drawn
    K = _draws(50.0, n=300)
    observed = pd.DataFrame({"learning_rate": [1e-3, 1e-3, 1e-3], "k_ref": [0, 1, 2]})
    res = phase_diagram_from_draws(
        K, momentum=0.0, momentum_convention="heavy_ball", k_refs=[0], observed=observed
    )
    assert res.passed is True and res.values["n_observed_outside_grid"] == 2
    assert "2 of the 3 observed runs lie outside the grid (K_ref 0," in res.summary
    on_grid = phase_diagram_from_draws(K, momentum=0.0, momentum_convention="heavy_ball", observed=observed)
    assert on_grid.values["n_observed_outside_grid"] == 0 and "outside the grid" not in on_grid.summary


@pytest.mark.parametrize("k_ref", [float("nan"), float("inf"), -1.0])
def test_a_lag_that_is_no_setting_is_refused_not_called_unstable(k_ref):
    # k_ref NaN gave P(unstable) = 1 by the closed form: C_eff NaN counted as C_eff <= 0
    with pytest.raises(ValueError, match="k_ref must be a finite lag >= 0"):
        stability_probabilities(_draws(0.2), momentum=0.5, k_ref=k_ref)
    with pytest.raises(ValueError, match="momentum must be a finite number"):
        stability_probabilities(_draws(0.2), momentum=float("nan"), k_ref=2)


def test_a_learning_rate_that_is_no_setting_is_named_by_the_posterior_check():
    # NaN is an unknown rate to coefficient_draws: the check said "no finite gain draws"
    from bayes_grpo.checks.stability import stability_from_posterior

    setting = dict(momentum=0.5, momentum_convention="heavy_ball", k_ref=2)
    for lr in (float("nan"), float("inf"), 0.0):
        with pytest.raises(ValueError, match="learning_rate must be a finite positive number"):
            stability_from_posterior(_StiffnessPosterior(50.0), learning_rate=lr, **setting)


@pytest.mark.parametrize(
    "flag, value",
    [("--momentum", "nan"), ("--lr-max", "inf"), ("--lr-min", "nan"), ("--k-ref-max", "-1")],
)
def test_phase_diagram_refuses_a_grid_setting_that_is_no_number_naming_its_flag(
    flag, value, tmp_path, capsys
):
    # `phase-diagram fit.nc --momentum nan` (or --lr-max inf) failed in matplotlib: "x and y
    # arguments to pcolormesh cannot have non-finite values"; --k-ref-max -1 named no flag
    from bayes_grpo.cli import main

    out = tmp_path / "phase.png"
    args = ["phase-diagram", str(tmp_path / "fit.nc"), "-o", str(out), "--lr-min", "1e-4"]
    args += ["--lr-max", "1e-2", flag, value]
    with pytest.raises(SystemExit) as exc:  # argparse: before the posterior is read
        main(args)
    assert exc.value.code == 2
    assert f"argument {flag}" in capsys.readouterr().err
    assert not out.exists()


def test_a_huge_gain_is_unstable_without_a_numpy_warning():
    # `stability --posterior fit.nc --lr 1e300 ...` printed "coefficients.py:53: RuntimeWarning:
    # overflow encountered in multiply" above its (right) answer: M K_eff of the masked,
    # anti-damped draws overflowed
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = stability_probabilities(np.full(20, 2e301), momentum=0.5, k_ref=2)
    assert out["p_unstable_exact"] == 1.0 and out["p_unstable_closed_form"] == 1.0
    assert np.isnan(out["zeta_median"]) and out["p_damped"] == 0.0


def test_a_phase_diagram_marks_a_run_at_the_momentum_the_fit_gave_it_by_default():
    # runs logged without a momentum, fitted with `fit --default momentum=0.9
    # momentum_convention=ema`: the diagram at that momentum marked none of them ("0 observed
    # runs"), reading the logged NaN, not the value the fit took
    from types import SimpleNamespace

    from bayes_grpo.checks.stability import phase_diagram
    from bayes_grpo.runset import make_runset

    steps = np.arange(20)
    ds = make_runset(
        {r: pd.DataFrame({"reward": np.linspace(0.2, 0.6, 20)}, index=steps) for r in ("a", "b")},
        {r: {"model": "m", "learning_rate": 1e-3, "k_ref": 1, "group_size": 8} for r in ("a", "b")},
    )
    assert np.isnan(ds["momentum"].values).all()
    fitted = _StiffnessPosterior(50.0)
    fitted.runset = ds
    fitted.data = SimpleNamespace(
        run_ids=["b", "a"],  # the fit's own order
        models=["m"],
        learning_rate=np.array([1e-3, 1e-3]),
        momentum=np.array([0.9, 0.9]),
        momentum_convention=["ema", "ema"],
        k_ref=np.array([1.0, 1.0]),
    )
    res = phase_diagram(fitted, momentum=0.9, momentum_convention="ema", k_refs=[0, 1, 2])
    assert "0 of 2 observed runs sit where" in res.summary and res.passed is True, res.summary


def test_draws_on_the_closed_form_boundary_are_unstable_by_it_as_in_point_mode():
    # C_eff = (1 - mu) - a K_ref = 1.1e-16 at a 0.3, mu 0.1, K_ref 3: marginal, so not stable
    # by the closed form in point mode (stability_summary); the posterior counted it stable
    from bayes_grpo.dynamics import stability_summary

    assert stability_summary(0.3, 0.1, 3)["stable_closed_form"] is False
    v = stability_probabilities(np.full(50, 0.3), momentum=0.1, k_ref=3)
    assert v["p_unstable_closed_form"] == 1.0
    assert v["p_oscillatory"] == 0.0 and v["p_damped"] == 0.0


def test_a_phase_diagram_says_which_fitted_runs_it_leaves_unmarked_at_another_momentum():
    # `phase-diagram models/bandit.nc --momentum 0.9`: the 12 fitted runs (momentum 0.5) are
    # not on the diagram; the summary dropped its "N of M observed runs" sentence and said
    # nothing, so an empty diagram read as if the fit had no runs
    from types import SimpleNamespace

    from bayes_grpo.checks.stability import phase_diagram
    from bayes_grpo.runset import make_runset

    steps = np.arange(20)
    settings = {
        "a": {"momentum": 0.5, "momentum_convention": "heavy_ball"},
        "b": {"momentum": 0.5, "momentum_convention": "heavy_ball"},
        "c": {"momentum": 0.9, "momentum_convention": "ema"},
    }
    ds = make_runset(
        {r: pd.DataFrame({"reward": np.linspace(0.2, 0.6, 20)}, index=steps) for r in settings},
        {
            r: {"model": "m", "learning_rate": 1e-3, "k_ref": 1, "group_size": 8} | s
            for r, s in settings.items()
        },
    )
    fitted = _StiffnessPosterior(50.0)
    fitted.runset = ds
    fitted.data = SimpleNamespace(models=["m"])
    res = phase_diagram(fitted, momentum=0.9, momentum_convention="ema", k_refs=[0, 1, 2])
    assert "0 of 1 observed runs sit where" in res.summary, res.summary
    assert "2 fitted runs at another momentum (0.5 heavy_ball) are not marked" in res.summary
    assert res.values["n_observed_other_momentum"] == 2
    res = phase_diagram(fitted, momentum=0.7, momentum_convention="heavy_ball", k_refs=[0, 1])
    assert "3 fitted runs at another momentum (0.5 heavy_ball, 0.9 ema) are not marked" in res.summary


def test_the_reports_per_momentum_phase_diagrams_say_once_that_runs_at_another_momentum_are_elsewhere():
    # the report draws a diagram per momentum setting, and each said "N fitted run(s) at another
    # momentum (...) are not marked", though every one of them was marked on its own diagram
    from types import SimpleNamespace

    from bayes_grpo.checks.stability import phase_diagram
    from bayes_grpo.report.build import build_sections
    from bayes_grpo.runset import make_runset

    steps = np.arange(20)
    settings = {"a": (0.5, "heavy_ball"), "b": (0.5, "heavy_ball"), "c": (0.9, "ema")}
    ds = make_runset(
        {r: pd.DataFrame({"reward": np.linspace(0.2, 0.6, 20)}, index=steps) for r in settings},
        {
            r: {"model": "m", "learning_rate": 1e-3, "k_ref": 1, "group_size": 8, "momentum": mu, "momentum_convention": c}
            for r, (mu, c) in settings.items()
        },
    )
    fitted = _StiffnessPosterior(50.0)
    fitted.runset = ds
    fitted.data = SimpleNamespace(models=["m"])
    diagrams = [
        phase_diagram(fitted, momentum=mu, momentum_convention=c, k_refs=[0, 1], note_other_momenta=False)
        for mu, c in sorted(set(settings.values()))
    ]
    for res in diagrams:
        assert "at another momentum" not in res.summary, res.summary
        assert res.values["n_observed_other_momentum"] > 0
    stability = next(s for s in build_sections(stability=diagrams) if s.key == "stability")
    assert stability.intro.count("those at another are on the diagram of theirs") == 1, stability.intro
    # a diagram drawn alone still says it
    alone = phase_diagram(fitted, momentum=0.9, momentum_convention="ema", k_refs=[0, 1])
    assert "2 fitted runs at another momentum (0.5 heavy_ball) are not marked" in alone.summary
    assert "diagram of theirs" not in next(s for s in build_sections(stability=[alone]) if s.key == "stability").intro


def test_an_llm_the_fit_lacks_is_named_in_a_warning_with_the_fitted_ones():
    # `stability --posterior tiny.nc --model tiny-gpt` (the fit's LLM is tiny-gpt2) answered for
    # a new LLM from the population level with no word of the near miss, where predict warns
    from types import SimpleNamespace

    from bayes_grpo.checks.stability import phase_diagram, stability_from_posterior

    fitted = _StiffnessPosterior(50.0)
    fitted.data = SimpleNamespace(models=["llm 1.5B", "llm 7B"])
    setting = dict(learning_rate=1e-3, momentum=0.5, momentum_convention="heavy_ball")
    match = r"model 'llm-1\.5B' is not in the fit \(its LLMs: \['llm 1\.5B', 'llm 7B'\]\); did you mean 'llm 1\.5B'\?"
    with pytest.warns(UserWarning, match=match):
        res = stability_from_posterior(fitted, k_ref=2, model="llm-1.5B", **setting)
    assert res.values["new_model"] is True
    with pytest.warns(UserWarning, match=match):
        phase_diagram(fitted, momentum=0.5, momentum_convention="heavy_ball", model="llm-1.5B", k_refs=[0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fitted LLM, or no --model (a new one by choice): no warning
        stability_from_posterior(fitted, k_ref=2, model="llm 7B", **setting)
        stability_from_posterior(fitted, k_ref=2, **setting)


def test_a_sweep_past_the_threshold_from_its_first_lag_does_not_fail_a_right_prediction():
    # a = 0.1, mu = 0.5: exact threshold K_ref = 7; the sweep over 12-13 does not converge at its
    # first lag, so its threshold is "at or below 12" (threshold_check: no verdict). The posterior
    # check took 12 as the threshold and failed the true curvature's prediction [7, 7].
    from bayes_grpo.bandit import simulate_bandit
    from bayes_grpo.checks.stability import bandit_threshold_check

    sweep = simulate_bandit(
        k_ref=[12, 13], learning_rate=0.4, momentum=0.5, seeds=3, steps=400, clip_eps=np.inf, seed=1
    )
    K = 0.25  # the bandit's measured stiffness at these defaults (a = 0.4 K = 0.1)
    res = bandit_threshold_check(_StiffnessPosterior(K, sd_log=0.01), sweep)
    assert res.values["predicted_exact_hi"] == 7 and res.values["empirical_threshold_k_ref"] == 12
    assert res.passed is None, res.summary
    assert "at or below K_ref = 12" in res.summary
    # a prediction of stability beyond the first lag swept is contradicted all the same
    late = bandit_threshold_check(_StiffnessPosterior(K / 4, sd_log=0.01), sweep)
    assert late.values["predicted_exact_lo"] > 12 and late.passed is False, late.summary


def test_a_sweep_too_short_to_resolve_the_threshold_gives_the_posterior_check_no_verdict():
    # a = 0.1 x 0.25 = 0.025, mu = 0.5: exact threshold K_ref = 30. A 60-step sweep read its
    # threshold as 18 (slowly decaying runs judged not converging) and the true curvature's
    # prediction 30 [30, 30] failed ('Not inside the interval'): the horizon's reading, not the
    # dynamics'
    from bayes_grpo.bandit import simulate_bandit
    from bayes_grpo.checks.stability import bandit_threshold_check

    sweep = simulate_bandit(
        k_ref=list(range(16, 33)), learning_rate=0.1, momentum=0.5, seeds=2, steps=60, seed=1
    )
    res = bandit_threshold_check(_StiffnessPosterior(0.25, sd_log=0.01), sweep)
    assert res.values["predicted_exact_lo"] == 30 and res.values["empirical_threshold_k_ref"] < 29
    assert res.passed is None and res.values["threshold_determined"] is False, res.summary
    assert "No verdict: the sweep's threshold is not determined" in res.summary
    assert "Simulate at least" in res.summary and "Not inside" not in res.summary


def test_stability_and_phase_diagram_json_carry_the_saved_fits_own_warnings(tmp_path, capsys):
    """`stability --posterior models/tiny.nc ... --json` (and `phase-diagram --json`) printed no
    word of the i.i.d. fit being too confident, which stderr said and `predict --json` lists in
    `posterior_warnings`: a script reading the JSON never saw it. Both now give the list, as
    predict does; the Python result keeps it in values["posterior_warnings"]."""
    import json
    from pathlib import Path

    from bayes_grpo.checks.stability import stability_from_posterior
    from bayes_grpo.cli import main

    path = str(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    setting = ["--lr", "0.001", "--momentum", "0.9", "--convention", "ema", "--k-ref", "2"]
    assert main(["stability", "--posterior", path, *setting, "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    (note,) = [w for w in out["posterior_warnings"] if "too confident" in w]
    assert note.startswith(path) and captured.err.count("too confident") == 1
    assert "posterior_warnings" not in out["values"]  # once, where predict has it
    figure = tmp_path / "phase.png"
    assert main(["phase-diagram", path, "-o", str(figure), "--n-lr", "4", "--k-ref-max", "3", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["posterior_warnings"] == out["posterior_warnings"]
    assert captured.err.count("too confident") == 1
    with pytest.warns(UserWarning, match="too confident"):
        result = stability_from_posterior(path, learning_rate=0.001, momentum=0.9, momentum_convention="ema", k_ref=2)
    assert result.values["posterior_warnings"] == out["posterior_warnings"]


def test_a_fitted_model_is_loaded_by_one_helper_with_its_warnings():
    # checks.stability._as_model, predict.forecast._load_model and predict._load_model_with_notes
    # were three loaders of one thing (a path or a fitted model), with two error types and one
    # of them keeping the fit's warnings; model.core.as_fitted_model is the one
    from pathlib import Path

    from bayes_grpo.model.core import as_fitted_model
    from bayes_grpo.predict.forecast import ForecastError

    path = Path(__file__).resolve().parents[1] / "models" / "tiny.nc"
    with pytest.warns(UserWarning, match="too confident"):
        fitted, notes = as_fitted_model(path)
    assert any("too confident" in n for n in notes)
    assert as_fitted_model(fitted) == (fitted, [])  # a fitted model: taken as it is
    with pytest.raises(ForecastError, match="a fitted GRPODynamicsModel"):
        as_fitted_model(42, error=ForecastError)
    with pytest.raises(FileNotFoundError, match="no such"):
        as_fitted_model(path.with_name("absent.nc"))


def test_a_posterior_whose_every_critical_lag_is_infinite_has_an_infinite_interval_not_nan(capsys):
    # `stability --posterior models/tiny.nc --lr 1e-310 ...` said "critical K_ref (exact) = inf
    # [nan, nan]": the interval kept the finite draws only, of which there were none; and
    # --json wrote null for the infinite lags with no word of what null meant
    from bayes_grpo.checks.stability import stability_from_draws
    from bayes_grpo.cli import build_parser

    res = stability_from_draws(
        np.full(50, 1e-311), learning_rate=1e-310, momentum=0.9, momentum_convention="ema", k_ref=1
    )
    assert "critical K_ref (exact) = inf [inf, inf]" in res.summary
    assert np.isinf(res.values["critical_k_ref_exact_hi"]) and np.isinf(res.values["critical_k_ref_closed_form_lo"])
    # a few infinite draws among finite ones: the upper end is infinite, not the finite draws' end
    mixed = stability_from_draws(
        np.r_[np.full(90, 0.01), np.full(10, 1e-311)], learning_rate=1.0, momentum=0.0,
        momentum_convention="heavy_ball", k_ref=1,
    )
    assert np.isinf(mixed.values["critical_k_ref_exact_hi"]) and np.isfinite(mixed.values["critical_k_ref_exact_lo"])
    epilog = build_parser()._subparsers._group_actions[0].choices["stability"].epilog
    assert "an infinite number is written null" in epilog and "critical_k_ref_*" in epilog


def test_an_infinite_critical_lag_or_threshold_written_null_in_json_is_named_with_its_reason(capsys):
    # `stability --eta-k 1e-310 --momentum 0.9 --k-ref 4 --json` wrote critical_k_ref_* null
    # with "note": "" (and --k-ref 0 threshold_a_closed_form null), and the posterior mode's
    # text said "critical K_ref (exact) = inf [inf, inf]" with no word of why
    import json

    from bayes_grpo.checks.stability import stability_from_draws
    from bayes_grpo.cli import main

    assert main(["stability", "--eta-k", "1e-310", "--momentum", "0.9", "--k-ref", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["critical_k_ref_exact"] is None and out["critical_k_ref_closed_form"] is None
    note = out["critical_k_ref_note"]
    assert "critical_k_ref_closed_form, critical_k_ref_exact infinite (null in JSON)" in note
    assert "no lag below the largest float" in note and "threshold_a_closed_form_note" not in out
    assert main(["stability", "--eta-k", "0.1", "--momentum", "0.9", "--k-ref", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["threshold_a_closed_form"] is None and "critical_k_ref_note" not in out
    assert "no closed-form threshold at K_ref 0" in out["threshold_a_closed_form_note"]
    assert main(["stability", "--eta-k", "0.01", "--momentum", "0.9", "--k-ref", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)  # every number finite: no notes
    assert not any(k.endswith("_note") for k in out), out

    res = stability_from_draws(
        np.r_[np.full(90, 0.01), np.full(10, 1e-311)], learning_rate=1.0, momentum=0.0,
        momentum_convention="heavy_ball", k_ref=1,
    )  # fmt: skip
    note = res.values["critical_k_ref_note"]
    assert note.startswith("critical_k_ref_exact_hi, critical_k_ref_closed_form_hi infinite (null in JSON)"), note
    assert "(inf: no lag below the largest float" in res.summary
    finite = stability_from_draws(
        np.full(50, 0.01), learning_rate=1.0, momentum=0.0, momentum_convention="heavy_ball", k_ref=1
    )
    assert "critical_k_ref_note" not in finite.values and "(inf:" not in finite.summary


def test_phase_diagram_json_gives_the_saved_fits_warnings_once_not_an_empty_list_beside_them(tmp_path, capsys):
    # `phase-diagram models/tiny.nc -o p.png --json` gave the fit's "too confident" warning at
    # the top level and "values": {"posterior_warnings": []} beside it (the check was given the
    # model the verb had loaded): a reader of values saw no warning. `stability --posterior
    # --json` gives them once, at the top level
    import json
    from pathlib import Path

    from bayes_grpo.cli import main

    path = str(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    figure = tmp_path / "phase.png"
    assert main(["phase-diagram", path, "-o", str(figure), "--n-lr", "4", "--k-ref-max", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert any("too confident" in w for w in out["posterior_warnings"])
    assert "posterior_warnings" not in out["values"], out["values"]


def test_a_spectral_radius_not_computed_in_posterior_mode_says_why():
    # `stability --posterior models/tiny.nc --lr 1e-3 ... --k-ref 200 --json` wrote
    # "spectral_radius_median": null with no word of why (beyond K_ref 128 the roots of every
    # draw are not computed; a fractional K_ref has no exact criterion)
    from bayes_grpo.checks.stability import AUTO_BISECTION_MAX_LAG, stability_from_draws

    def values(k_ref):
        return stability_from_draws(
            np.full(20, 1e-4), learning_rate=1e-3, momentum=0.9, momentum_convention="heavy_ball", k_ref=k_ref
        ).values

    far = values(AUTO_BISECTION_MAX_LAG + 72)
    assert np.isnan(far["spectral_radius_median"])
    assert f"computed up to K_ref {AUTO_BISECTION_MAX_LAG} only" in far["spectral_radius_note"]
    assert "whole number of lag steps" in values(2.5)["spectral_radius_note"]
    near = values(2)
    assert np.isfinite(near["spectral_radius_median"]) and "spectral_radius_note" not in near


def test_a_new_llm_of_a_one_llm_fit_is_said_to_rest_on_the_priors_spread_between_llms(capsys):
    # `stability --posterior models/tiny.nc --model qwen ...` answered zeta 3.58 [1.56, 8.2] and
    # critical K_ref 761 [140, 4006] (own LLM: [3.27, 3.88], [635, 894]) and `phase-diagram
    # --model qwen` a threshold lr 0.98 [0.194, 5.12], saying only "answered for a new LLM from
    # the population level": the width is the prior's spread of log K between LLMs, which a fit
    # of one LLM does not identify, as `predict --model qwen` says
    from pathlib import Path

    from bayes_grpo.checks.stability import phase_diagram, stability_from_posterior
    from bayes_grpo.cli import main

    path = Path(__file__).resolve().parents[1] / "models" / "bandit.nc"
    setting = dict(learning_rate=0.1, momentum=0.5, momentum_convention="heavy_ball")
    note = r"the fit has one LLM, so how much the curvature K varies between LLMs is not identified.*half-normal, scale 1"
    with pytest.warns(UserWarning, match=note):
        stability_from_posterior(path, k_ref=2, model="newllm", **setting)
    with pytest.warns(UserWarning, match=note):
        phase_diagram(path, momentum=0.5, momentum_convention="heavy_ball", model="newllm", k_refs=[0, 1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stability_from_posterior(path, k_ref=2, **setting)  # the fit's own LLM: no such note
    assert not any("the fit has one LLM" in str(w.message) for w in caught)
    argv = ["stability", "--posterior", str(path), "--lr", "0.1", "--momentum", "0.5", "--convention", "heavy_ball", "--k-ref", "2", "--model", "newllm"]
    assert main(argv) == 0
    assert "bayes-grpo stability: warning: the fit has one LLM" in capsys.readouterr().err


def test_a_new_llms_phase_diagram_marks_no_fitted_llms_runs_and_judges_none():
    # `phase-diagram models/tiny.nc --model qwen` drew qwen's diagram (the population level) with
    # tiny-gpt2's 8 runs marked on it and "0 of 8 observed runs sit where P(unstable) >= 0.5",
    # passed: runs of another LLM, of another curvature, judged by this one's
    from types import SimpleNamespace

    from bayes_grpo.checks.stability import phase_diagram
    from bayes_grpo.runset import make_runset

    steps = np.arange(20)
    llms = {"a": "llm 1.5B", "b": "llm 1.5B", "c": "llm 7B"}
    ds = make_runset(
        {r: pd.DataFrame({"reward": np.linspace(0.2, 0.6, 20)}, index=steps) for r in llms},
        {
            r: {"model": m, "learning_rate": 1e-3, "k_ref": 1, "group_size": 8, "momentum": 0.5, "momentum_convention": "heavy_ball"}
            for r, m in llms.items()
        },
    )
    fitted = _StiffnessPosterior(50.0)
    fitted.runset = ds
    fitted.data = SimpleNamespace(models=["llm 1.5B", "llm 7B"])
    setting = dict(momentum=0.5, momentum_convention="heavy_ball", k_refs=[0, 1, 2])
    with pytest.warns(UserWarning, match="not in the fit"):
        res = phase_diagram(fitted, model="qwen", **setting)
    assert "observed runs sit where" not in res.summary, res.summary
    assert res.passed is None and res.values["n_observed_other_llm"] == 3
    assert "The 3 fitted runs are of other LLMs (llm 1.5B: 2, llm 7B: 1)" in res.summary, res.summary
    for ax in res.figures["phase diagram"].axes:
        assert not any(c.get_offsets().size for c in ax.collections if c.get_label() == "observed runs")
    # the population level of a fit of several LLMs (no --model) is no fitted LLM either
    res = phase_diagram(fitted, **setting)
    assert res.passed is None and res.values["n_observed_other_llm"] == 3, res.summary
    # a fitted LLM's diagram still marks and judges its own runs
    res = phase_diagram(fitted, model="llm 1.5B", **setting)
    assert "0 of 2 observed runs sit where" in res.summary and res.values["n_observed_other_llm"] == 0


def test_the_default_learning_rates_reach_the_threshold_at_the_largest_k_ref_of_the_grid():
    # `phase-diagram models/tiny.nc --k-ref-max 200 --model qwen2`: the learning rates spanned two
    # decades about the threshold at K_ref = 1 (0.033-2.9), so the exact 0.5 contour left the
    # diagram through its left edge near K_ref 40 and rows 40-200 were unstable end to end
    K = _draws(1.0, n=300)
    res = phase_diagram_from_draws(K, momentum=0.9, momentum_convention="ema", k_refs=np.arange(0, 201))
    lrs, table = res.values["learning_rates"], res.table
    assert lrs.min() < table.loc[200, "threshold_lr_lo"] and lrs.max() > table.loc[1, "threshold_lr_hi"]
    p = res.values["p_unstable_exact"]  # (learning_rate, k_ref)
    assert p.shape == (lrs.size, 201) and (p[0, :] < 0.5).all() and (p[-1, 1:] > 0.5).all()
    # the default grid of K_ref 0-16 keeps its learning rates
    res16 = phase_diagram_from_draws(K, momentum=0.9, momentum_convention="ema")
    centre = res16.table.loc[1, "threshold_lr_median"]
    assert res16.values["learning_rates"].min() == pytest.approx(centre / 30, rel=0.05)


def test_a_setting_outside_the_fitted_runs_range_is_warned_of_as_predict_warns(capsys):
    # `stability --posterior models/tiny.nc --lr 0.001 --momentum 0.9 --convention ema --k-ref 16`
    # (its runs fitted at K_ref 1-2) answered without a word, where `predict` of that setting warns
    # "extrapolation: K_ref = 16 is outside the fitted runs' range [1, 2]" and of its lag-gain product
    import json
    from pathlib import Path

    from bayes_grpo.checks.stability import stability_from_posterior
    from bayes_grpo.cli import main

    path = str(Path(__file__).resolve().parents[1] / "models" / "tiny.nc")
    setting = dict(learning_rate=1e-3, momentum=0.9, momentum_convention="ema")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = stability_from_posterior(path, k_ref=16, **setting)
    outside = res.values["extrapolation_warnings"]
    assert outside[0] == "extrapolation: K_ref = 16 is outside the fitted runs' range [1, 2]", outside
    assert outside[1].startswith("extrapolation: lag-gain product a K_ref = "), outside
    assert len(outside) == 2  # no band, so no line of a law-discrepancy term
    assert [str(w.message) for w in caught if str(w.message).startswith("extrapolation")] == outside
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inside = stability_from_posterior(path, k_ref=2, **setting)  # a fitted setting: nothing to say
    assert inside.values["extrapolation_warnings"] == []
    assert not [w for w in caught if "extrapolation" in str(w.message)]
    capsys.readouterr()
    args = ["stability", "--posterior", path, "--lr", "0.001", "--momentum", "0.9", "--convention", "ema", "--k-ref", "16"]
    assert main(args) == 0
    assert "bayes-grpo stability: warning: extrapolation: K_ref = 16 is outside the fitted runs' range [1, 2]" in capsys.readouterr().err
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["values"]["extrapolation_warnings"] == outside


def test_a_loaded_phenomenological_fit_refused_by_stability_is_named_by_its_source_path():
    # a fit loaded with GRPODynamicsModel.load keeps its file as source_path, but
    # stability_from_posterior(model) / phase_diagram(model) named the file only when given
    # the path: "stability of a setting needs a mechanistic fit ..." of which file?
    from pathlib import Path

    from bayes_grpo.checks.stability import phase_diagram, stability_from_posterior

    class LoadedPhenomenologicalFit:
        parameterisation = "phenomenological"
        runset = None
        source_path = Path("models/phen.nc")

        def coefficient_draws(self, **kwargs):
            raise AssertionError("refused before its draws are asked for")

    setting = dict(momentum=0.9, momentum_convention="ema", k_ref=1)
    refused = r"^models/phen\.nc: stability of a setting needs a mechanistic fit; this one is phenomenological"
    with pytest.raises(ValueError, match=refused):
        stability_from_posterior(LoadedPhenomenologicalFit(), learning_rate=1e-6, **setting)
    with pytest.raises(ValueError, match=refused):
        phase_diagram(LoadedPhenomenologicalFit(), momentum=0.9, momentum_convention="ema")
    unsaved = LoadedPhenomenologicalFit()
    unsaved.source_path = None  # fitted here, never saved: nothing to name
    with pytest.raises(ValueError, match=r"^stability of a setting needs a mechanistic fit"):
        stability_from_posterior(unsaved, learning_rate=1e-6, **setting)
