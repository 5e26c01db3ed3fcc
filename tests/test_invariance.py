"""G-invariance check plumbing, on a toy model whose Bayes factor is known in closed form.

The toy builder stands in for ``GRPODynamicsModel`` (same constructor and
``build_model`` contract): reward = mu + group_offset[G] + N(0, 1) noise, with
``mu ~ N(0, 1)`` and, under H1, ``group_offset ~ N(0, group_offset_sigma)``. The exact
Bayes factor is a ratio of Gaussian marginal likelihoods.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pymc as pm
import pytest
from scipy import stats

from bayes_grpo.checks import invariance
from bayes_grpo.runset import make_runset


def _runset(shift: float, seed: int = 0, n_steps: int = 6):
    rng = np.random.default_rng(seed)
    curves, meta = {}, {}
    for i, g in enumerate([4, 4, 16, 16]):
        y = 0.2 + (shift if g == 16 else 0.0) + rng.normal(0, 1, n_steps)
        curves[f"r{i}"] = pd.DataFrame({"reward": y}, index=np.arange(n_steps))
        meta[f"r{i}"] = {"model": "toy", "group_size": g}
    return make_runset(curves, meta)


class ToyBuilder:
    def __init__(
        self,
        model_config=None,
        parameterisation="mechanistic",
        likelihood="iid",
        invariance="shared",
    ):
        self.model_config = {"group_offset_sigma": 0.5} | dict(model_config or {})
        self.invariance = invariance

    def build_model(self, ds):
        y = ds["reward"].values
        g_idx = np.repeat((ds["group_size"].values == 16).astype(int)[:, None], y.shape[1], axis=1)
        with pm.Model() as m:
            mu = pm.Normal("mu", 0, 1)
            mean = mu
            if self.invariance == "by_group":
                off = pm.Normal(
                    "group_offset_plateau", 0, self.model_config["group_offset_sigma"], shape=2
                )
                mean = mu + off[g_idx.ravel()]
            pm.Normal("y", mean, 1, observed=y.ravel())
        return m


def _exact_log_bf01(ds, s):
    y = ds["reward"].values.ravel()
    g = np.repeat((ds["group_size"].values == 16).astype(int), ds.sizes["step"])
    Z = np.eye(2)[g]
    base = np.eye(y.size) + np.ones((y.size, y.size))
    return stats.multivariate_normal(np.zeros(y.size), base).logpdf(y) - stats.multivariate_normal(
        np.zeros(y.size), base + s**2 * Z @ Z.T
    ).logpdf(y)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(
        invariance,
        "_make_model",
        lambda inv, model_config, parameterisation, likelihood, reward_bounds=None: ToyBuilder(
            model_config, invariance=inv
        ),
    )


@pytest.mark.parametrize("shift,expect", [(0.0, True), (2.0, False)])
def test_bayes_factor_of_g_invariance_matches_the_exact_value_at_every_prior_width(
    toy, shift, expect
):
    ds = _runset(shift)
    res = invariance.invariance_check(ds, draws=500, tune=300, chains=2, random_seed=3)
    assert res.name == "g_invariance"
    table = res.table
    assert list(table.index) == [0.5, 1.0, 2.0]
    for scale, row in table.iterrows():
        exact = _exact_log_bf01(ds, 0.5 * scale)
        assert row["log_bf01_bridge"] == pytest.approx(exact, abs=0.15)
        assert row["log_bf01_bridge_mc_error"] < 0.1
        if row["sd_in_support"]:
            assert row["log_bf01_sd"] == pytest.approx(exact, abs=0.3)
        assert row["n_offsets"] == 2
        assert np.isnan(row["log_bf01_smc"])  # SMC only on request
    if (
        shift == 0.0
    ):  # no effect: wider offset priors favour H0 more (Lindley), visible in the table
        assert table["log_bf01_bridge"].iloc[-1] > table["log_bf01_bridge"].iloc[0]
    exact1 = _exact_log_bf01(ds, 0.5)
    if abs(exact1) > np.log(3) + 0.3:
        assert res.passed is expect
    d = res.to_dict()
    assert {
        "log_bf01_bridge",
        "log_bf01_sd",
        "log_bf01_smc",
        "methods_agree",
        "verdict",
        "alpha_median",
    } <= set(d["values"])


def test_a_prior_scale_gets_the_same_h1_fit_wherever_it_stands_in_the_list(toy):
    # the H1 seed was random_seed + 1 + the scale's index: `--prior-scales 1` and
    # `--prior-scales 0.5 1` gave scale 1 different draws and different Bayes factors
    ds = _runset(1.0, seed=2)
    kw = dict(draws=100, tune=100, chains=1, random_seed=0, smc_draws=50, smc_chains=1)
    alone, fits_alone = invariance.invariance_bayes_factor(ds, prior_scales=(1.0,), **kw)
    second, fits_second = invariance.invariance_bayes_factor(ds, prior_scales=(0.5, 1.0), **kw)
    np.testing.assert_array_equal(
        fits_alone.h1[1.0].posterior.draws, fits_second.h1[1.0].posterior.draws
    )
    for column in ("log_bf01_bridge", "log_bf01_sd", "log_bf01_smc"):
        assert alone.loc[1.0, column] == second.loc[1.0, column], column


def test_the_verdict_is_read_at_the_same_prior_scale_whatever_the_order_of_the_scales(toy):
    # without 1 among them, 0.5 and 2 are as close to it and the first listed was the
    # reference: `--prior-scales 0.5 2` and `--prior-scales 2 0.5` judged the same two fits at
    # different widths (and the result did not say which)
    ds = _runset(0.6, seed=2)
    kw = dict(draws=100, tune=100, chains=1, random_seed=0)
    a = invariance.invariance_check(ds, prior_scales=(0.5, 2.0), **kw)
    b = invariance.invariance_check(ds, prior_scales=(2.0, 0.5), **kw)
    assert a.values["prior_scale"] == b.values["prior_scale"] == 0.5
    assert a.values["log_bf01_bridge"] == b.values["log_bf01_bridge"] == a.table.loc[0.5, "log_bf01_bridge"]
    assert a.summary == b.summary and "prior scale 0.5)" in a.summary
    assert invariance.reference_prior_scale([0.5, 1.0, 2.0]) == 1.0
    assert invariance.reference_prior_scale([3.0, 0.4]) == 0.4  # |log 0.4| < |log 3|


def test_a_bayes_factor_beyond_the_floats_is_given_by_its_log_not_a_clipped_number():
    # bf01 was exp(clip(log BF, -700, 700)): a log BF01 of -1000 read bf01 = 9.9e-305
    assert invariance._exp(-2.0) == pytest.approx(np.exp(-2.0))
    assert invariance._exp(-1000.0) is None and invariance._exp(1000.0) is None
    assert np.isnan(invariance._exp(float("nan")))
    ref = pd.Series({"log_bf01_bridge": -1000.0, "log_bf01_sd": -3.0, "log_bf01_smc": float("nan")})
    note = invariance._bf01_note(ref)["bf01_note"]
    assert note.startswith("bf01_bridge: |log BF01| > 700") and "log_bf01_* is the figure" in note
    assert invariance._bf01_note(ref.replace(-1000.0, -5.0)) == {}


def test_importance_savage_dickey_and_smc_third_figure_match_the_exact_value(toy):
    ds = _runset(2.0, seed=1)
    res = invariance.invariance_check(
        ds,
        prior_scales=(1.0,),
        draws=500,
        tune=300,
        sd_method="importance",
        smc_draws=300,
        smc_chains=2,
        random_seed=5,
    )
    row = res.table.loc[1.0]
    exact = _exact_log_bf01(ds, 0.5)
    assert exact < -5  # a clear G-dependence: 0 lies far outside the offsets' posterior
    assert not row["sd_in_support"]
    # the importance-weighted density needs no draws near 0 (exact for a Gaussian posterior)
    assert row["log_bf01_sd"] == pytest.approx(exact, abs=0.15)
    assert row["log_bf01_bridge"] == pytest.approx(exact, abs=0.15)
    assert res.values["methods_agree"] is True
    assert row["log_bf01_smc"] == pytest.approx(exact, abs=0.5)
    assert res.values["methods"] == ["bridge_sampling", "savage_dickey_importance", "smc"]
    assert res.passed is False and "SMC" in res.summary


def test_an_smc_chain_that_failed_is_counted_where_the_error_is_missing(toy, monkeypatch):
    # --smc-chains 2 with one chain's evidence not finite printed "(no Monte Carlo error: one
    # chain)", as if one chain had been asked for
    from bayes_grpo.checks.bayes_factor import combine_chain_evidence

    real = invariance.smc_evidence

    def one_chain_fails(*args, **kwargs):
        ev = real(*args, **kwargs)
        per_chain = np.array([ev.per_chain[0], np.nan])
        log_ml, err = combine_chain_evidence(per_chain)
        return type(ev)(log_ml=log_ml, mc_error=err, per_chain=per_chain, idata=ev.idata)

    monkeypatch.setattr(invariance, "smc_evidence", one_chain_fails)
    res = invariance.invariance_check(
        _runset(0.0), prior_scales=(1.0,), draws=40, tune=40, chains=1, smc_draws=50, smc_chains=2
    )
    smc = res.values["log_bf01_smc"]
    assert np.isfinite(smc) and np.isnan(res.values["log_bf01_smc_mc_error"])
    assert f"SMC evidence (third figure): {smc:.2f} (no Monte Carlo error: 1 of 2 SMC chains finite)." in res.summary


def test_one_smc_chain_says_its_error_is_missing_instead_of_nan(toy):
    # --smc-chains 1 (allowed) printed "SMC evidence (third figure): 0.70 ± nan."
    res = invariance.invariance_check(
        _runset(0.0), prior_scales=(1.0,), draws=40, tune=40, chains=1, smc_draws=50, smc_chains=1
    )
    smc = res.values["log_bf01_smc"]
    assert np.isfinite(smc) and np.isnan(res.values["log_bf01_smc_mc_error"])
    assert f"SMC evidence (third figure): {smc:.2f} (no Monte Carlo error: one chain)." in res.summary
    assert "nan" not in res.summary


def test_invariance_is_not_assessable_with_a_single_group_size():
    ds = _runset(0.0)
    ds = ds.assign_coords(group_size=("run", np.full(ds.sizes["run"], 8.0)))
    res = invariance.invariance_check(ds)
    assert res.passed is None and "Not assessable" in res.summary
    # in words, not Python's dict ("({'toy': [8]})")
    assert "no model was run at two or more group sizes (toy: G 8)." in res.summary


def test_the_bayes_factor_refuses_a_single_group_size_naming_it_in_words():
    # invariance_bayes_factor's refusal printed Python's dict: "group sizes per model: {'toy': [8]}"
    ds = _runset(0.0).assign_coords(group_size=("run", np.full(4, 8.0)))
    with pytest.raises(ValueError, match=r"group sizes per model: toy: G 8$"):
        invariance.invariance_bayes_factor(ds)


def test_a_run_set_at_one_group_size_has_a_verdict_in_its_values_as_an_assessed_one():
    # values.verdict, the field an assessed result and the demo read, was missing (a KeyError
    # for a --json reader) when no LLM was at two G
    ds = _runset(0.0).assign_coords(group_size=("run", np.full(4, 8.0)))
    values = invariance.invariance_check(ds).to_dict()["values"]
    assert values["verdict"].startswith("not assessable")
    assert values["group_sizes"] == {"toy": [8]}


def test_runs_of_unknown_group_size_and_model_are_named_when_not_assessable():
    # CSV logs without a manifest: "Not assessable: no model was run at two or more group
    # sizes ({'': []})."
    ds = _runset(0.0)
    n = ds.sizes["run"]
    ds = ds.assign_coords(group_size=("run", np.full(n, np.nan)), model=("run", np.full(n, "")))
    res = invariance.invariance_check(ds)
    assert res.passed is None and "{'': []}" not in res.summary
    assert "(unknown-model: no run of known G)" in res.summary
    assert f"Group size unknown for {n} runs ({str(ds['run'].values[0])}" in res.summary
    assert res.values["runs_with_unknown_group_size"] == [str(r) for r in ds["run"].values]


def test_verdict_words():
    assert invariance.invariance_verdict(3.0, 2.5, True)[0] is True
    assert invariance.invariance_verdict(-3.0, -2.0, False)[0] is False
    assert invariance.invariance_verdict(0.2, 0.1, True)[0] is None
    passed, words = invariance.invariance_verdict(3.0, -3.0, True)
    assert passed is None and "disagree" in words


def test_a_joint_bayes_factor_within_twice_its_monte_carlo_error_of_the_threshold_gives_no_verdict():
    # the joint verdict read the bridge estimate alone: log BF01 -3.2 ± 1.5 said "depends on G",
    # where an LLM's own Savage-Dickey figure of that error gave no verdict
    passed, words = invariance.invariance_verdict(-3.2, -3.0, True, 1.5)
    assert passed is None and words.startswith("inconclusive: the Bayes factor leans to H1 (G-dependence)")
    assert "Monte Carlo error is too large" in words
    passed, words = invariance.invariance_verdict(3.2, 3.0, True, 1.5)
    assert passed is None and "leans to H0 (invariance)" in words
    # an error that cannot carry it back keeps the verdict, and so does an unknown one
    assert invariance.invariance_verdict(-3.2, -3.0, True, 0.5)[0] is False
    assert invariance.invariance_verdict(-3.2, -3.0, True)[0] is False
    assert invariance.invariance_verdict(0.2, 0.1, True, 5.0) == invariance.invariance_verdict(0.2, 0.1, True)


def test_invariance_cli_prints_both_bayes_factors_and_a_verdict(toy, tmp_path, capsys):
    import json

    from bayes_grpo.cli import main
    from bayes_grpo.runset import save_runset

    path = save_runset(_runset(0.0, seed=4), tmp_path / "runs.nc")
    args = [
        "invariance",
        str(path),
        "--draws",
        "300",
        "--tune",
        "300",
        "--prior-scales",
        "1",
    ]
    assert main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["name"] == "g_invariance"
    assert {"log_bf01_bridge", "log_bf01_sd", "verdict"} <= set(out["values"])
    assert len(out["table"]) == 1
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "log BF01" in text and "Savage" in text and "bridge" in text
    assert main(["invariance", str(tmp_path / "missing.nc")]) == 2


def test_the_cli_prints_no_smc_columns_when_no_smc_was_run(tmp_path, capsys, monkeypatch):
    # without --smc-draws the table printed log_bf01_smc NaN and smc_chains_finite_h0 0, as if
    # every SMC chain had failed
    from bayes_grpo.checks.base import CheckResult
    from bayes_grpo.cli import main
    from bayes_grpo.runset import save_runset

    row = {"prior_scale": 1.0, "log_bf01_bridge": 2.0, "log_bf01_sd": 2.1, "log_bf01_smc": np.nan}
    row |= {"log_bf01_smc_mc_error": np.nan, "smc_chains_finite_h0": 0, "smc_chains_finite_h1": 0}
    table = pd.DataFrame([row]).set_index("prior_scale")
    result = CheckResult("g_invariance", None, "Inconclusive.", table=table)
    monkeypatch.setattr(invariance, "invariance_check", lambda *a, **k: result)
    path = save_runset(_runset(0.0), tmp_path / "runs.nc")
    assert main(["invariance", str(path)]) == 0
    text = capsys.readouterr().out
    assert "log_bf01_bridge" in text and "log_bf01_sd" in text and "smc" not in text
    # --json's table kept them (smc_chains_finite_h0 0 beside a text without them)
    assert main(["invariance", str(path), "--json"]) == 0
    (row_json,) = json.loads(capsys.readouterr().out)["table"]
    assert "log_bf01_sd" in row_json and not [k for k in row_json if "smc" in k], row_json
    table["log_bf01_smc"] = 1.9
    assert main(["invariance", str(path), "--smc-draws", "50"]) == 0
    assert "log_bf01_smc" in capsys.readouterr().out


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"prior_scales": [0.0]}, "prior scales must be positive"),
        ({"prior_scales": [1.0, -1.0]}, "prior scales must be positive"),
        # --prior-scales 1 1: two H1 fits, then a pandas error on the duplicated table row
        ({"prior_scales": [1.0, 1]}, "prior scales must be distinct"),
        ({"model_config": {"group_offset_sigma": 0.0}}, "group_offset_sigma .* must be > 0"),
        ({"smc_draws": -5}, "SMC needs smc_draws >= 0"),
        ({"smc_draws": 1}, r"SMC needs .*at least 2 particles"),  # failed in smc_evidence after H0's fit
    ],
)
def test_impossible_test_settings_are_refused_before_any_sampling(kwargs, message, monkeypatch):
    # --prior-scales 0, --offset-sigma -1 or --smc-draws -5 failed only after H0 was sampled
    monkeypatch.setattr(invariance, "_bridge", lambda *a, **k: pytest.fail("sampled before checking"))
    with pytest.raises(ValueError, match=message):
        invariance.invariance_bayes_factor(_runset(0.0), **kwargs)


@pytest.mark.parametrize("option, value", [("--prior-scales", "0"), ("--prior-scales", "nan"), ("--offset-sigma", "-1")])
def test_an_impossible_prior_scale_or_offset_sd_is_refused_naming_its_option(option, value, tmp_path, capsys):
    # the command line passed them to the check above, whose message ("prior scales must be
    # positive", "group_offset_sigma ... must be > 0") named no option (noticed by cli8)
    from bayes_grpo.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["invariance", str(tmp_path / "runs.nc"), option, value])
    assert stop.value.code == 2
    assert f"argument {option}: must be " in capsys.readouterr().err


def test_too_few_draws_for_the_bridge_proposal_of_h1_are_refused_before_any_sampling(toy, monkeypatch):
    # the toy's H1 has 3 parameters; 2 chains x 1 draw in the first halves gave a singular proposal
    # covariance, found by H1's bridge sampling after H0 was sampled: "marginal likelihood of H1
    # (...): When `allow_singular is False`, the input matrix must be symmetric positive definite"
    monkeypatch.setattr(invariance, "_bridge", lambda *a, **k: pytest.fail("sampled before checking"))
    with pytest.raises(ValueError, match=r"2 chains x 1 draw = 2 draws for the 3 parameters of H1 are too few.*--draws"):
        invariance.invariance_bayes_factor(_runset(0.0), draws=3, chains=2)


def test_draws_too_few_for_a_converging_bridge_are_refused_before_sampling_naming_the_minimum(toy, monkeypatch):
    # 'invariance --draws 100' on a 47-parameter H1 (2 chains: 100 draws, 2.1 per parameter, in
    # the first halves) passed the check (more draws than parameters), sampled for 17 minutes,
    # then bridge sampling did not converge. The check is bridge sampling's own rule now:
    # at least 4 draws per parameter (the toy's H1 has 3: 12), refused before any sampling
    monkeypatch.setattr(invariance, "_bridge", lambda *a, **k: pytest.fail("sampled before checking"))
    with pytest.raises(
        ValueError,
        match=r"1 chain x 10 draws = 10 draws for the 3 parameters of H1 are too few \(it needs at "
        r"least 12, 4 per parameter\): raise draws to at least 24 with 1 chain, or.*--draws",
    ):
        invariance.invariance_bayes_factor(_runset(0.0), draws=20, chains=1)
    with pytest.raises(ValueError, match=r"raise draws to at least 20 with 2 chains, or raise chains"):
        invariance.invariance_bayes_factor(_runset(0.0), draws=10, chains=2)


def test_prior_scales_given_as_an_iterator_are_all_fitted(toy):
    # the up-front check used the iterator up: no H1 fit, then a KeyError on the empty table
    table, fits = invariance.invariance_bayes_factor(
        _runset(0.0), prior_scales=iter([1.0, 2.0]), draws=40, tune=40, chains=1
    )
    assert list(table.index) == [1.0, 2.0] and set(fits.h1) == {1.0, 2.0}


def test_the_cli_takes_the_hyperparameter_defaults_its_error_message_suggests():
    # a run set without momentum made `invariance` say "(CLI: --default momentum=VALUE)", an
    # option only `fit` had
    from bayes_grpo.cli import build_parser
    from bayes_grpo.cli._common import with_hyperparameter_defaults

    args = build_parser().parse_args(["invariance", "runs.nc", "--default", "momentum=0.5", "--offset-sigma", "0.3"])
    assert args.defaults == [("momentum", 0.5)]
    assert with_hyperparameter_defaults({"group_offset_sigma": 0.3}, args.defaults) == {
        "group_offset_sigma": 0.3,
        "hyperparameter_defaults": {"momentum": 0.5},
    }


@pytest.fixture
def toy_invariance(monkeypatch):
    """invariance_check with the exact toy model (ToyGroupBuilder) in place of the PyMC fit."""
    monkeypatch.setattr(
        invariance,
        "_make_model",
        lambda inv, model_config, parameterisation, likelihood, reward_bounds=None: ToyGroupBuilder(model_config, invariance=inv),
    )


def _two_llm_runset(seed: int = 0, n_steps: int = 10):
    """LLM "a" invariant, LLM "b" shifted by 2 at G=16, "c" only at G=8, "d" with unknown G."""
    rng = np.random.default_rng(seed)
    curves, meta = {}, {}
    spec = [("a", 4), ("a", 4), ("a", 16), ("a", 16), ("b", 4), ("b", 4), ("b", 16), ("b", 16)]
    spec += [("c", 8), ("c", 8), ("d", None), ("d", None)]
    for i, (m, g) in enumerate(spec):
        y = 0.2 + (2.0 if (m, g) == ("b", 16) else 0.0) + rng.normal(0, 1, n_steps)
        curves[f"r{i}"] = pd.DataFrame({"reward": y}, index=np.arange(n_steps))
        meta[f"r{i}"] = {"model": m} | ({"group_size": g} if g else {})
    return make_runset(curves, meta)


def _toy_groups(ds):
    """Per run its LLM and (model, G) label as the fit names them, and the labels with H1 offsets
    (the real model's rule, ``prepare.has_group_offsets``: LLMs at two or more known G)."""
    from bayes_grpo.model.prepare import UNKNOWN_MODEL, group_label, has_group_offsets

    models = [str(m) or UNKNOWN_MODEL for m in ds["model"].values]  # as prepare_data names them
    gs = ds["group_size"].values.astype(float)
    labels = [group_label(m, g) for m, g in zip(models, gs)]
    groups, names = list(dict.fromkeys(labels)), list(dict.fromkeys(models))
    keep = has_group_offsets(
        np.array([names.index(models[labels.index(g)]) for g in groups]), np.array([gs[labels.index(g)] for g in groups])
    )
    return models, labels, [g for g, k in zip(groups, keep) if k]


class ToyGroupBuilder(ToyBuilder):
    """reward = mu[model] + group_offset[(model, G)] + N(0, 1), offsets labelled like the real
    model's, for the groups of LLMs at two or more known G only (as the real model)."""

    def build_model(self, ds):
        models, labels, offset_groups = _toy_groups(ds)
        names = list(dict.fromkeys(models))
        n = ds.sizes["step"]
        m_idx = np.repeat([names.index(m) for m in models], n)
        g_idx = np.repeat([offset_groups.index(lab) if lab in offset_groups else len(offset_groups) for lab in labels], n)
        with pm.Model(coords={"group": offset_groups, "llm": names}) as model:
            mean = pm.Normal("mu", 0, 1, dims="llm")[m_idx]
            if self.invariance == "by_group":
                sigma = self.model_config["group_offset_sigma"]
                off = pm.Normal("group_offset_plateau", 0, sigma, dims="group")
                mean = mean + pm.math.concatenate([off, np.zeros(1)])[g_idx]
            pm.Normal("y", mean, 1, observed=ds["reward"].values.ravel())
        return model


def test_runs_of_unknown_g_are_tested_at_the_default_g_the_fits_give_them(toy_invariance):
    # with --default group_size=16, the fits put an LLM's runs of unknown G at G 16 (offsets of
    # their own under H1), but the test read the run set itself: "not testable: runs at G=4 and
    # of unknown G" and no Bayes factor, or those runs named as "of unknown G" in the summary
    rng = np.random.default_rng(1)
    curves = {f"r{i}": pd.DataFrame({"reward": 0.2 + (2.0 if i >= 2 else 0.0) + rng.normal(0, 1, 10)}) for i in range(4)}
    meta = {f"r{i}": {"model": "toy"} | ({"group_size": 4} if i < 2 else {}) for i in range(4)}
    ds = make_runset(curves, meta)
    without = invariance.invariance_check(ds, prior_scales=(1.0,), draws=100, tune=100, chains=1)
    assert without.passed is None and without.summary.startswith("Not assessable")
    config = {"hyperparameter_defaults": {"group_size": 16}}
    res = invariance.invariance_check(ds, model_config=config, prior_scales=(1.0,), draws=200, tune=200, chains=2)
    assert res.values["group_sizes"] == {"toy": [4, 16]}
    assert res.values["runs_given_default_group_size"] == ["r2", "r3"]
    assert "runs_with_unknown_group_size" not in res.values
    assert "Runs of unknown G (r2, r3) are tested at the default G=16" in res.summary
    assert res.passed is False  # the shift of 2 at the defaulted G, as the fits see it
    assert np.isnan(ds["group_size"].values[2:]).all()  # the user's run set is not changed


def _exact_log_bf01_of_llm(ds, s, llm=None):
    """log p(y | offsets of `llm` at 0) - log p(y | H1) for the toy: Gaussian marginals (the
    joint BF01, every offset at 0, when `llm` is None)."""
    models, labels, offset_groups = _toy_groups(ds)
    n = ds.sizes["step"]
    models, labels = np.repeat(models, n), np.repeat(labels, n)
    m_ind = (models[:, None] == np.unique(models)[None, :]).astype(float)
    g_ind = (labels[:, None] == np.asarray(offset_groups)[None, :]).astype(float)
    base = np.eye(models.size) + m_ind @ m_ind.T
    free = g_ind[:, [llm is not None and not lab.startswith(llm + "|") for lab in offset_groups]]
    y = ds["reward"].values.ravel()
    h0 = stats.multivariate_normal(np.zeros(y.size), base + s**2 * free @ free.T).logpdf(y)
    return h0 - stats.multivariate_normal(np.zeros(y.size), base + s**2 * g_ind @ g_ind.T).logpdf(y)


def test_with_several_llms_each_testable_llm_gets_its_own_bayes_factor_and_the_others_are_named(toy_invariance):
    # two LLMs at G=4 and 16 (one invariant, one shifted), one at a single G, one with unknown G:
    # the verdict was one joint figure over all LLMs, with no word of which LLM depends on G
    ds = _two_llm_runset()
    res = invariance.invariance_check(ds, prior_scales=(1.0,), draws=500, tune=300, random_seed=2)
    by_model = res.values["by_model"]
    assert list(by_model) == ["a", "b", "c", "d"]
    # 0 inside the bulk of a's offsets: the Gaussian density there is accurate; for b only the sign
    assert by_model["a"]["sd_in_support"]
    assert by_model["a"]["log_bf01_sd"] == pytest.approx(_exact_log_bf01_of_llm(ds, 0.5, "a"), abs=0.3)
    assert _exact_log_bf01_of_llm(ds, 0.5, "b") < -5 and by_model["b"]["log_bf01_sd"] < -5
    assert by_model["a"]["n_offsets"] == by_model["b"]["n_offsets"] == 2
    assert by_model["a"]["passed"] is not False and by_model["b"]["passed"] is False
    assert by_model["c"] == {"group_sizes": [8], "testable": False, "verdict": "not testable: runs only at G=8 (no offsets in H1)"}
    assert by_model["d"]["verdict"] == "not testable: group size unknown (no offsets in H1)"
    assert res.summary.startswith("The LLMs at two or more G jointly (a, b): the mean trajectory depends on G")
    assert "a (G=4, 16): log BF01 = " in res.summary and "b (G=4, 16): log BF01 = " in res.summary
    assert "c: not testable: runs only at G=8" in res.summary
    assert "d: not testable: group size unknown" in res.summary
    # b's shift at G=16 is a difference between its G, not a shift H1 shares across them
    assert res.values["shared_offset_shifts"] == [] and "move all G of an LLM alike" not in res.summary


def test_a_per_llm_bayes_factor_within_twice_its_monte_carlo_error_of_the_threshold_gives_no_verdict():
    # llm-inv of a simulated invariant pair read "log BF01 = -2.03 ± 3.87, depends on G"
    from types import SimpleNamespace

    def sd(log_bf, err):
        return SimpleNamespace(log_bf01=log_bf, mc_error=err, in_support=False, dim=8)

    rows = invariance._per_model_results(
        {"x": [4, 16], "y": [4, 16], "z": [4, 16]},
        {"x": sd(-2.03, 3.87), "y": sd(-40.0, 5.0), "z": sd(0.5, 0.1)},
    )
    assert rows["x"]["passed"] is None and rows["x"]["verdict"] == "inconclusive (Monte Carlo error too large)"
    assert rows["y"]["passed"] is False and rows["y"]["verdict"] == "depends on G"
    assert rows["z"]["passed"] is None and rows["z"]["verdict"] == "inconclusive"



def test_an_llm_at_one_known_g_with_runs_of_unknown_g_is_not_said_to_run_only_at_that_g(toy_invariance):
    # "c: not testable: runs only at G=8" was said of an LLM with a run of unknown G besides
    ds = _two_llm_runset(seed=3)
    ds = ds.assign_coords(model=("run", [*ds["model"].values[:11], "c"]))  # r11: c, G unknown
    res = invariance.invariance_check(ds, prior_scales=(1.0,), draws=100, tune=100, chains=1)
    assert res.values["by_model"]["c"]["verdict"] == "not testable: runs at G=8 and of unknown G (no offsets in H1)"
    assert "c: not testable: runs at G=8 and of unknown G" in res.summary
    assert "d: not testable: group size unknown" in res.summary


def test_one_chain_says_the_savage_dickey_error_is_missing_instead_of_nan():
    # `invariance runs.nc --chains 1` printed "... and 7.21 ± nan (Savage–Dickey, gaussian)" and,
    # per LLM, "m1 (G=4, 16): log BF01 = 6.33 ± nan": the error is the spread across chains
    row = {"group_sizes": [4, 16], "log_bf01_sd": 6.33, "log_bf01_sd_mc_error": float("nan")}
    row |= {"sd_in_support": True, "verdict": "invariant in G"}
    text = invariance._per_model_text({"m1": row, "m2": {"verdict": "not testable: runs only at G=8"}})
    assert "nan" not in text and "m1 (G=4, 16): log BF01 = 6.33 (no Monte Carlo error: one chain)" in text
    assert invariance._pm(0.123) == " ± 0.12" and "nan" not in invariance._pm(float("nan"))


def test_a_kde_savage_dickey_on_more_than_two_offsets_is_refused_before_sampling(toy_invariance, monkeypatch):
    # `invariance runs.nc --sd-method kde` ("kde (1-2 offsets only)" in --help) sampled H0 and
    # H1 and then took a KDE of 8 offsets (the mechanistic model's 4 per group) from 200 draws
    monkeypatch.setattr(invariance, "_bridge", lambda *a, **k: pytest.fail("sampled before refusing"))
    with pytest.raises(ValueError, match="'kde' estimates the density of 1 or 2 offsets; this H1 has 4"):
        invariance.invariance_bayes_factor(_two_llm_runset(), prior_scales=(1.0,), sd_method="kde")


def test_an_llm_at_one_g_has_no_h1_offsets_and_leaves_the_joint_bayes_factor_where_it_was(toy_invariance):
    # two LLMs at G 4 and 16, plus "c" at G 8 only and "d" of unknown G: H1 gave c and d offsets
    # too, which only widened the prior of their own trajectories and moved the joint log BF01
    # by an Occam factor with nothing tested (exact, this toy: +0.20 at offset sd 0.5, +1.50 at sd 2;
    # real model, simulated runs, bridge sampling: -3.89 against -4.71 without c at sd 0.5)
    from bayes_grpo.model import GRPODynamicsModel

    ds = _two_llm_runset(seed=3)
    tested = ds.isel(run=slice(0, 8))
    # the real model: offsets for the groups of a and b only, whatever else the run set holds
    real = ds.assign_coords(
        learning_rate=("run", [0.01] * 12), momentum=("run", [0.0] * 12),
        momentum_convention=("run", ["heavy_ball"] * 12), k_ref=("run", [1.0] * 12),
    )  # fmt: skip
    for parameterisation in ("mechanistic", "phenomenological"):
        h1 = GRPODynamicsModel(invariance="by_group", parameterisation=parameterisation).build_model(real)
        assert h1.coords["group"] == ("a|G=4", "a|G=16", "b|G=4", "b|G=16")
        positions = invariance.offsets_by_model(h1, invariance.offset_value_names(h1))
        assert set(positions) == {"a", "b"}
    with pytest.raises(ValueError, match=r"needs an LLM run at two or more known group sizes.*\{'c': \[8\], 'd': \[\]\}"):
        GRPODynamicsModel(invariance="by_group").build_model(real.isel(run=slice(8, 12)))
    for s in (0.5, 2.0):
        assert _exact_log_bf01_of_llm(ds, s) == pytest.approx(_exact_log_bf01_of_llm(tested, s), abs=1e-9)
    kw = dict(prior_scales=(1.0, 4.0), draws=500, tune=300, random_seed=4)
    res, alone = invariance.invariance_check(ds, **kw), invariance.invariance_check(tested, **kw)
    for scale, s in ((1.0, 0.5), (4.0, 2.0)):
        row, row_alone = res.table.loc[scale], alone.table.loc[scale]
        assert row["n_offsets"] == row_alone["n_offsets"] == 4
        err = 2 * np.hypot(row["log_bf01_bridge_mc_error"], row_alone["log_bf01_bridge_mc_error"]) + 0.05
        assert row["log_bf01_bridge"] == pytest.approx(row_alone["log_bf01_bridge"], abs=err)
        assert row["log_bf01_bridge"] == pytest.approx(_exact_log_bf01_of_llm(ds, s), abs=0.15)
    assert "c: not testable: runs only at G=8 (no offsets in H1)" in res.summary
    assert "d: not testable: group size unknown (no offsets in H1)" in res.summary
    assert "Runs of unknown G (r10, r11) of LLMs at fewer than two known G are not in the test" in res.summary
    assert "are in the test as one group per LLM" not in res.summary


def test_runs_of_unknown_g_beside_known_ones_are_named_as_part_of_the_test(toy_invariance):
    # an LLM at G=4 and 16 plus two runs of unknown G: the H1 fit gives those runs offsets of
    # their own ("a|G=?"), so they weigh in the Bayes factor, but the result listed G=[4, 16]
    # only and never said they were in the comparison
    ds = _two_llm_runset()
    ds = ds.isel(run=[0, 1, 2, 3, 10, 11]).assign_coords(model=("run", ["a"] * 6))
    res = invariance.invariance_check(ds, prior_scales=(1.0,), draws=100, tune=100, chains=1)
    assert res.values["group_sizes"] == {"a": [4, 16]} and res.values["n_offsets"] == 3
    assert res.values["runs_with_unknown_group_size"] == ["r10", "r11"]
    assert "Runs of unknown G (r10, r11) are in the test as one group per LLM (G=?)" in res.summary
    both_known = invariance.invariance_check(ds.isel(run=[0, 1, 2, 3]), prior_scales=(1.0,), draws=100, tune=100, chains=1)
    assert "runs_with_unknown_group_size" not in both_known.values and "unknown G" not in both_known.summary


def test_an_llm_without_a_name_gets_its_own_bayes_factor_under_the_fits_name(toy_invariance):
    # runs without a model beside LLM "a", both at G=4 and 16: the fit labels their offsets
    # "unknown-model|G=4", the check looked them up under "", so that LLM read "not assessable:
    # no Savage–Dickey density for its offsets" and the summary "All LLMs jointly (a, ): ..."
    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.model.prepare import UNKNOWN_MODEL

    ds = _two_llm_runset().isel(run=slice(0, 8))
    ds = ds.assign_coords(model=("run", ["a"] * 4 + [""] * 4))
    assert invariance.group_sizes_by_model(ds) == {"a": [4, 16], UNKNOWN_MODEL: [4, 16]}
    real = ds.assign_coords(
        learning_rate=("run", [0.01] * 8), momentum=("run", [0.0] * 8),
        momentum_convention=("run", ["heavy_ball"] * 8), k_ref=("run", [1.0] * 8),
    )
    h1 = GRPODynamicsModel(invariance="by_group").build_model(real)
    positions = invariance.offsets_by_model(h1, invariance.offset_value_names(h1))
    assert set(positions) == set(invariance.group_sizes_by_model(real))
    res = invariance.invariance_check(ds, prior_scales=(1.0,), draws=100, tune=100, chains=1)
    assert res.summary.startswith(f"All LLMs jointly (a, {UNKNOWN_MODEL}): ")
    assert "log_bf01_sd" in res.values["by_model"][UNKNOWN_MODEL]


@pytest.mark.parametrize("flag, value", [("--seed", "-1"), ("--smc-draws", "-5"), ("--smc-chains", "0")])
def test_the_cli_refuses_a_setting_that_means_nothing_naming_its_flag(flag, value, capsys):
    from bayes_grpo.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["invariance", "runs.nc", flag, value])
    assert f"argument {flag}" in capsys.readouterr().err


def test_a_shift_of_h1s_offsets_shared_by_every_g_is_named_as_a_misfit_of_the_law():
    # H1 gives every (LLM, G) group its own offsets, the first G's included. On runs with one
    # trajectory at every G whose momentum was logged wrong (0.9 logged as 0) the mechanistic
    # H1's damping offsets sat at -3.69 and -3.64 (sd <= 0.02) at G = 4 and 16, and the test said
    # "depends on G (decisive)", log BF01 = -863, with no word that H1 had fitted the law's
    # damping, not a difference between G (QA helper's run; phenomenological: +10.9, invariant)
    import xarray as xr

    rng = np.random.default_rng(0)
    n = 400
    groups = ["a|G=4", "a|G=16", "b|G=4", "b|G=16", "c|G=8"]

    def offsets(means, sds):
        return np.stack([m + s * rng.standard_normal(n) for m, s in zip(means, sds)], axis=-1)[None]

    common = rng.normal(0.3, 0.5, n)  # b's plateau: a shift H0's plateau absorbs, near its prior
    plateau = np.concatenate(
        [offsets([0.0, 0.0], [0.1, 0.1])[0], (common[:, None] + 0.05 * rng.standard_normal((n, 2))), offsets([0.1], [0.5])[0]],
        axis=-1,
    )[None]
    post = xr.Dataset(
        {
            # a: the shared shift; b: a real G-dependence (G=16 only); c: one G, nothing to share
            "group_offset_log_damping": (("chain", "draw", "group"), offsets([-3.69, -3.64, 0.0, 0.6, 2.0], [0.02, 0.02, 0.05, 0.05, 0.02])),
            "group_offset_log_damping_z": (("chain", "draw", "group"), offsets([-7, -7, 0, 1.2, 4], [0.04] * 5)),
            "group_offset_plateau": (("chain", "draw", "group"), plateau),
        },
        coords={"chain": [0], "draw": np.arange(n), "group": groups},
    )
    shifts = invariance.shared_offset_shifts(post)
    assert [(s["variable"], s["model"]) for s in shifts] == [("group_offset_log_damping", "a")]
    assert shifts[0]["shift"] == pytest.approx(-3.665, abs=0.01) and shifts[0]["max_difference"] < 0.05
    text = invariance._shared_shift_text(shifts)
    assert "group_offset_log_damping of a: -3.67 ± " in text and "weighs the law as well as G-invariance" in text
    # named with its command: `report --invariance` prints it too, and has no --parameterisation
    assert "test with `bayes-grpo invariance --parameterisation phenomenological`." in text
    assert invariance._shared_shift_text([]) == ""


def test_evidence_of_g_dependence_from_one_run_per_g_under_the_iid_likelihood_is_flagged(toy_invariance):
    # one run at G=4 and one at G=16, invariant by construction but with the SDE's wander, read
    # "decisive evidence for G-dependence" (log BF01 -5.2) with the i.i.d. likelihood and no
    # warning; the state-space likelihood gave +1.9. With one run per G the data cannot tell a
    # run's own departure from its curve from an effect of G
    rng = np.random.default_rng(0)
    curves = {f"r{g}": pd.DataFrame({"reward": 0.2 + (2.0 if g == 16 else 0.0) + rng.normal(0, 1, 10)}) for g in (4, 16)}
    one_each = make_runset(curves, {f"r{g}": {"model": "toy", "group_size": g} for g in (4, 16)})
    res = invariance.invariance_check(one_each, prior_scales=(1.0,), draws=100, tune=100, chains=1)
    assert res.passed is False
    assert res.values["single_run_groups"] == {"toy": [4.0, 16.0]}
    assert "one run at a group size (G=4, 16)" in res.summary
    assert "likelihood='state_space'" in res.summary
    # the command that takes the option: the report (`report --invariance`) prints this summary
    # too, and has no --likelihood of its own
    assert "(`bayes-grpo invariance --likelihood state_space`)" in res.summary
    # two runs per G: no such warning
    two_each = invariance.invariance_check(_runset(shift=2.0, n_steps=10), prior_scales=(1.0,), draws=100, tune=100, chains=1)
    assert two_each.passed is False and "single_run_groups" not in two_each.values
    assert "one run at a group size" not in two_each.summary


def test_the_single_run_warning_says_when_the_only_run_at_a_g_is_flat(toy_invariance):
    # an LLM's only run at G=16 without a visible trend: the verdict of G-dependence there leans
    # on a run the law cannot describe, and the single-run warning did not say it was flat
    rng = np.random.default_rng(1)
    steps = np.arange(40)
    rise = np.linspace(0.0, 3.0, 40)
    curves = {
        "a4": pd.DataFrame({"reward": rise + rng.normal(0, 0.3, 40)}, index=steps),
        "b4": pd.DataFrame({"reward": rise + rng.normal(0, 0.3, 40)}, index=steps),
        "flat16": pd.DataFrame({"reward": 4.0 + rng.normal(0, 0.3, 40)}, index=steps),
    }
    meta = {"a4": {"group_size": 4}, "b4": {"group_size": 4}, "flat16": {"group_size": 16}}
    ds = make_runset(curves, {r: {"model": "toy"} | m for r, m in meta.items()})
    assert invariance.single_runs_without_trend(ds, {"toy": [16.0]}) == {"toy": [(16.0, "flat16")]}
    res = invariance.invariance_check(ds, prior_scales=(1.0,), draws=100, tune=100, chains=1)
    assert res.passed is False and res.values["single_run_groups"] == {"toy": [16.0]}
    assert res.values["single_runs_without_trend"] == {"toy": [(16.0, "flat16")]}
    assert "The only run at its G has no visible trend (flat16 (G=16))" in res.summary, res.summary
    # a rising single run is not called flat
    risen = ds.copy(deep=True)
    risen["reward"].loc[{"run": "flat16"}] = rise + 4.0 + rng.normal(0, 0.3, 40)
    assert invariance.single_runs_without_trend(risen, {"toy": [16.0]}) == {}


def test_an_iid_verdict_of_g_dependence_with_autocorrelated_residuals_is_not_determined(toy_invariance, monkeypatch, tmp_path, capsys):
    # the i.i.d. test said "depends on G" (passed False, values.verdict, the report's badge) and
    # put "the residuals are autocorrelated ... overstates the evidence" only at the end of the
    # summary; on G-invariant sets with AR(1) residuals the i.i.d. Bayes factor is decisive for
    # G-dependence in 11% of the sets at lag-1 r 0.6 and 43% at 0.9 (0% at r 0): no verdict there
    import json

    from bayes_grpo.cli import main
    from bayes_grpo.runset import save_runset

    monkeypatch.setattr(invariance, "residual_lag1_by_llm", lambda *a, **k: {"toy": (0.8, 40)})
    ds = _runset(shift=2.0, n_steps=10)
    res = invariance.invariance_check(ds, prior_scales=(1.0,), draws=100, tune=100, chains=1)
    assert res.passed is None
    assert res.values["verdict"].startswith("not determined: the i.i.d. Bayes factors favour G-dependence (")
    assert res.values["bayes_factor_verdict"].startswith("the mean trajectory depends on G (")
    assert res.summary.startswith("Not determined:") and "the residuals are autocorrelated (lag-1 r = 0.80" in res.summary
    assert res.values["alpha_from"] == "H0"
    from bayes_grpo.report.sections import render_check

    assert render_check(res).badge == "not determined"
    # --json and the text say the same
    path = save_runset(ds, tmp_path / "runs.nc")
    assert main(["invariance", str(path), "--draws", "100", "--tune", "100", "--chains", "1", "--prior-scales", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["passed"] is None and out["values"]["verdict"].startswith("not determined")
    # evidence of invariance is kept (the bias is against it), and white residuals keep the verdict
    same = invariance.invariance_check(_runset(shift=0.0, n_steps=10), prior_scales=(1.0,), draws=100, tune=100, chains=1)
    assert "bayes_factor_verdict" not in same.values and not same.values["verdict"].startswith("not determined")
    monkeypatch.setattr(invariance, "residual_lag1_by_llm", lambda *a, **k: {"toy": (0.0, 40)})
    white = invariance.invariance_check(ds, prior_scales=(1.0,), draws=100, tune=100, chains=1)
    assert white.passed is False and "bayes_factor_verdict" not in white.values


def _lag1_by_hypothesis(h0: dict, h1: dict):
    """A stand-in for residual_lag1_by_llm that gives ``h1`` for a posterior with H1 offsets."""
    return lambda posterior, *a, **k: {m: (r, 40) for m, r in (h1 if any("group_offset" in str(v) for v in posterior.data_vars) else h0).items()}


def test_a_real_effect_of_g_left_in_h0s_residuals_does_not_make_its_verdict_not_determined(toy_invariance, monkeypatch):
    # the wander check read the residuals under H0 only: under a real effect of G, H0's shared
    # trajectory leaves it in the residuals as long stretches off the curve, so a G-dependent set
    # with white noise was "not determined" (stiffness x3 at G 16, 2 runs per G: lag-1 0.40
    # under H0, band ±0.10; -0.02 under H1). The evidence favours H1: its residuals tell a wander
    monkeypatch.setattr(invariance, "residual_lag1_by_llm", _lag1_by_hypothesis({"toy": 0.8}, {"toy": 0.0}))
    res = invariance.invariance_check(_runset(shift=2.0, n_steps=10), prior_scales=(1.0,), draws=100, tune=100, chains=1)
    assert res.passed is False and res.values["verdict"].startswith("the mean trajectory depends on G")
    assert res.values["residual_lag1_from"] == "H1" and res.values["residual_lag1_autocorrelation"] == 0.0
    assert res.values["residual_lag1_by_hypothesis"] == {"H0": {"toy": 0.8}, "H1": {"toy": 0.0}}
    assert "bayes_factor_verdict" not in res.values and "autocorrelated" not in res.summary
    # residuals that wander under H1 as well still leave it not determined
    monkeypatch.setattr(invariance, "residual_lag1_by_llm", _lag1_by_hypothesis({"toy": 0.8}, {"toy": 0.7}))
    res = invariance.invariance_check(_runset(shift=2.0, n_steps=10), prior_scales=(1.0,), draws=100, tune=100, chains=1)
    assert res.passed is None and res.values["verdict"].startswith("not determined")
    assert "lag-1 r = 0.70" in res.summary and "residuals under H1" in res.summary
    # no evidence of G-dependence: the residuals under H0
    monkeypatch.setattr(invariance, "residual_lag1_by_llm", _lag1_by_hypothesis({"toy": 0.8}, {"toy": 0.0}))
    same = invariance.invariance_check(_runset(shift=0.0, n_steps=10), prior_scales=(1.0,), draws=100, tune=100, chains=1)
    assert same.passed is not False and same.values["residual_lag1_from"] == "H0" and "residuals under H0" in same.summary


def test_an_llms_own_verdict_of_g_dependence_is_judged_on_its_residuals_under_h1(toy_invariance, monkeypatch):
    monkeypatch.setattr(invariance, "residual_lag1_by_llm", _lag1_by_hypothesis({"a": 0.0, "b": 0.8}, {"a": 0.0, "b": 0.0}))
    res = invariance.invariance_check(_two_llm_runset(), prior_scales=(1.0,), draws=200, tune=200, chains=2)
    assert res.values["by_model"]["b"]["passed"] is False and res.values["by_model"]["b"]["verdict"] == "depends on G"


def test_an_llm_whose_iid_residuals_wander_gets_no_per_llm_verdict_of_g_dependence(toy_invariance, monkeypatch):
    monkeypatch.setattr(invariance, "residual_lag1_by_llm", lambda *a, **k: {"a": (0.0, 40), "b": (0.8, 40)})
    res = invariance.invariance_check(_two_llm_runset(), prior_scales=(1.0,), draws=200, tune=200, chains=2)
    by_model = res.values["by_model"]
    assert by_model["b"]["passed"] is None and by_model["b"]["verdict"].startswith("not determined")
    assert by_model["a"]["verdict"] != by_model["b"]["verdict"]


def test_invariance_shows_its_sampling_progress_as_fit_does_and_hides_it_with_no_progress_or_json(
    toy, tmp_path, capfd, caplog
):
    # `invariance` had no --no-progress (fit, compare and forecast have one), and PyMC's lines
    # ("Initializing NUTS ...", "Sequential sampling ...", "Sampling 2 chains ... took 62
    # seconds") came on stderr for each of its fits, under --json too
    import logging

    from bayes_grpo.cli import main
    from bayes_grpo.runset import save_runset

    path = save_runset(_runset(0.0, seed=4), tmp_path / "runs.nc")
    argv = ["invariance", str(path), "--draws", "40", "--tune", "20", "--prior-scales", "1", "2"]
    caplog.set_level(logging.INFO, logger="pymc")

    def pymc_lines(err: str) -> list[str]:
        said = [r.getMessage() for r in caplog.records if r.name.startswith("pymc")]
        said += [line for line in err.splitlines() if "NUTS" in line and "bayes-grpo" not in line]
        caplog.clear()
        return said

    assert main(argv) == 0
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("bayes-grpo invariance: ")]
    assert lines == [
        "bayes-grpo invariance: H0 (one trajectory for every G): NUTS fit 1 of 3",
        "bayes-grpo invariance: H1 (offsets by G, prior scale 1): NUTS fit 2 of 3",
        "bayes-grpo invariance: H1 (offsets by G, prior scale 2): NUTS fit 3 of 3",
    ], err
    assert pymc_lines(err), err  # the fits' own lines with their progress
    for flag in ("--no-progress", "--json"):
        assert main([*argv, flag]) == 0
        err = capfd.readouterr().err
        assert "bayes-grpo invariance" not in err, (flag, err)
        assert pymc_lines(err) == [], (flag, err)


def test_a_bridge_sampling_failure_that_more_draws_cure_names_the_draws_option(toy, tmp_path, monkeypatch, capsys):
    # past the check before sampling (4 draws per parameter), bridge sampling near that minimum
    # ('invariance three.nc --draws 70') can still fail; its "sample more draws" named no option
    import functools

    from bayes_grpo.checks import bayes_factor
    from bayes_grpo.cli import main
    from bayes_grpo.runset import save_runset

    # an iteration that cannot converge (tolerance 0 in 3 iterations), as one of too few draws
    monkeypatch.setattr(
        bayes_factor, "bridge_sampling", functools.partial(bayes_factor.bridge_sampling, tol=0.0, max_iter=3)
    )
    path = save_runset(_runset(0.0), tmp_path / "runs.nc")
    argv = ["invariance", str(path), "--draws", "30", "--tune", "20", "--prior-scales", "1", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "marginal likelihood of H0 (one trajectory for every G): bridge sampling did not converge in 3 iterations" in err, err
    assert "(this fit: 2 chains x 30 draws; raise draws or chains, CLI: --draws, --chains)" in err, err


@pytest.mark.parametrize("parameterisation", ["mechanistic", "phenomenological"])
def test_h1_with_centred_offsets_is_the_same_model_as_h1_with_offsets_from_their_z(parameterisation):
    # NUTS samples H1 with centred offsets (each group's value ~ Normal(LLM level, offset sd)):
    # as 'level + sd * z' the level and its groups' offsets formed a ridge (posterior
    # correlations to -0.998, 504 leapfrog steps per iteration on the demo's runs). The bridge
    # and Savage-Dickey read those draws as the non-centred model's, which is right only if the
    # two are one distribution: the densities differ by the constant -n log(sd) of v = level + sd z
    from bayes_grpo.model import GRPODynamicsModel

    ds = _two_llm_runset(seed=3)
    real = ds.assign_coords(
        learning_rate=("run", [0.01] * 12), momentum=("run", [0.0] * 12),
        momentum_convention=("run", ["heavy_ball"] * 12), k_ref=("run", [1.0] * 12),
    )  # fmt: skip
    sd = 0.7
    h1 = GRPODynamicsModel(invariance="by_group", parameterisation=parameterisation, model_config={"group_offset_sigma": sd})
    plain = h1.build_model(real)
    centred = invariance._centred_offsets_model(h1)
    z_names = invariance.offset_value_names(plain)
    moved = [n for n in z_names if n not in {v.name for v in centred.value_vars}]
    # every offset with an LLM level is centred (the mechanistic damping has none)
    assert len(moved) == (3 if parameterisation == "mechanistic" else 4)
    n_centred = sum(np.size(plain.initial_point()[n]) for n in moved)
    z_of = centred.compile_fn(
        centred.replace_rvs_by_values([centred[n] for n in z_names]), inputs=centred.value_vars, on_unused_input="ignore"
    )
    logp_c, logp_plain = centred.compile_logp(), plain.compile_logp()
    rng = np.random.default_rng(0)
    gaps = []
    plain_names = {v.name for v in plain.value_vars}
    for _ in range(4):
        point = {k: v + rng.normal(0, 0.3, np.shape(v)) for k, v in centred.initial_point().items()}
        mapped = {k: v for k, v in point.items() if k in plain_names}
        mapped |= dict(zip(z_names, z_of(point), strict=True))
        assert set(mapped) == plain_names
        gaps.append(logp_c(point) - logp_plain(mapped))
    assert np.isfinite(gaps).all()
    np.testing.assert_allclose(gaps, -n_centred * np.log(sd), rtol=0, atol=1e-6)


def _runset_with_settings(settings_by_g: dict[int, dict], n_steps: int = 6):
    """Two runs at each of G 4 and 16 of LLM "toy", each G with the given settings."""
    rng = np.random.default_rng(0)
    curves, meta = {}, {}
    for i, g in enumerate([4, 4, 16, 16]):
        curves[f"r{i}"] = pd.DataFrame({"reward": 0.2 + rng.normal(0, 1, n_steps)}, index=np.arange(n_steps))
        meta[f"r{i}"] = {"model": "toy", "group_size": g, "learning_rate": 1e-3, "momentum": 0.0} | settings_by_g[g]
    return make_runset(curves, meta)


@pytest.mark.parametrize(
    "parameterisation, settings, named",
    [
        # the phenomenological law has one damping and frequency per LLM whatever the lag
        ("phenomenological", {4: {"k_ref": 1}, 16: {"k_ref": 4}}, "k_ref (LLM 'toy': k_ref G=4: 1, G=16: 4)"),
        ("phenomenological", {4: {"learning_rate": 1e-3}, 16: {"learning_rate": 3e-3}}, "learning_rate"),
        # the KL weight moves the plateau, which neither law follows run by run
        ("mechanistic", {4: {"beta": 0.04}, 16: {"beta": 0.1}}, "beta (LLM 'toy': beta G=4: 0.04, G=16: 0.1)"),
    ],
)
def test_runs_of_one_llm_whose_g_groups_differ_in_a_setting_the_law_does_not_follow_are_refused_before_sampling(
    parameterisation, settings, named, monkeypatch
):
    # G 4 at K_ref 1 and G 16 at K_ref 4 were fitted with one shared trajectory under H0, and
    # the lag's effect on it was read as an effect of G
    from bayes_grpo.runset import RunSetError

    monkeypatch.setattr(invariance, "_bridge", lambda *a, **k: pytest.fail("sampled before refusing"))
    ds = _runset_with_settings(settings)
    with pytest.raises(RunSetError, match=re.escape(named)):
        invariance.invariance_check(ds, parameterisation=parameterisation, draws=100, tune=100, chains=2)
    with pytest.raises(RunSetError, match="differ in G only"):
        invariance.invariance_bayes_factor(ds, parameterisation=parameterisation, draws=100, tune=100, chains=2)


def test_g_groups_at_the_same_settings_or_a_setting_the_mechanistic_law_follows_are_not_refused():
    same = _runset_with_settings({4: {"k_ref": 1}, 16: {"k_ref": 1}})
    assert invariance.settings_differing_by_g(same, ["toy"]) == {}
    invariance.refuse_settings_confounded_with_g(same, ["toy"], "phenomenological")
    lag = _runset_with_settings({4: {"k_ref": 1}, 16: {"k_ref": 4}})
    assert invariance.settings_differing_by_g(lag, ["toy"]) == {"toy": {"k_ref": {"4": ["1"], "16": ["4"]}}}
    invariance.refuse_settings_confounded_with_g(lag, ["toy"], "mechanistic")  # the law follows K_ref
    # a setting unknown at one G and given by the defaults the fits take is compared at that value
    unknown = _runset_with_settings({4: {"beta": 0.1}, 16: {}})
    invariance.refuse_settings_confounded_with_g(unknown, ["toy"], "mechanistic")
    with pytest.raises(ValueError, match="beta"):
        invariance.refuse_settings_confounded_with_g(
            unknown, ["toy"], "mechanistic", {"hyperparameter_defaults": {"beta": 0.04}}
        )


def test_g_groups_that_also_differ_in_a_setting_the_mechanistic_law_follows_are_warned_of(toy):
    # G 4 at K_ref 1 and G 16 at K_ref 4 under the mechanistic form: tested (the law follows
    # K_ref), but a misfit of the law's K_ref dependence read as an effect of G, and nothing said so
    ds = _runset_with_settings({4: {"k_ref": 1}, 16: {"k_ref": 4}})
    res = invariance.invariance_check(ds, prior_scales=(1.0,), draws=400, tune=300, chains=2)
    assert res.values["settings_followed_differing_by_g"] == {"toy": {"k_ref": {"4": ["1"], "16": ["4"]}}}
    assert (
        "Warning: the runs at different G also differ in k_ref (LLM 'toy': k_ref G=4: 1, G=16: 4), "
        "which the mechanistic law follows run by run"
    ) in res.summary
    assert "a misfit of the law's dependence on it reads as an effect of G" in res.summary
    same = invariance.invariance_check(
        _runset_with_settings({4: {"k_ref": 2}, 16: {"k_ref": 2}}), prior_scales=(1.0,), draws=400, tune=300, chains=2
    )
    assert "settings_followed_differing_by_g" not in same.values and "also differ" not in same.summary


def test_leave_one_g_out_refuses_g_groups_that_differ_in_a_setting_the_law_does_not_follow_before_fitting(monkeypatch):
    # the fit on G 4 (K_ref 1) predicted G 16 (K_ref 4) at G 4's damping and frequency
    # (phenomenological form), and the lag's effect read as a failure of G-invariance
    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.runset import RunSetError

    monkeypatch.setattr(GRPODynamicsModel, "fit", lambda *a, **k: pytest.fail("fitted before refusing"))
    ds = _runset_with_settings({4: {"k_ref": 1}, 16: {"k_ref": 4}})
    with pytest.raises(RunSetError, match=re.escape("k_ref (LLM 'toy': k_ref G=4: 1, G=16: 4)")):
        invariance.leave_one_g_out(ds, parameterisation="phenomenological", draws=20, tune=20, chains=1)


def test_a_verdict_that_a_wider_prior_of_the_sensitivity_table_reverses_says_so(toy):
    # a shift of 1 at G 16: exact log BF01 -4.1 at offset sd 1 (the reference row, "depends on
    # G") and +4.1 at sd 100 (decisive for invariance); the summary gave the verdict alone
    ds = _runset(1.0, seed=0, n_steps=8)
    res = invariance.invariance_check(ds, prior_scales=(2.0, 200.0), draws=400, tune=300, chains=2)
    assert res.passed is False and res.values["prior_scale"] == 2.0
    assert list(res.values["verdict_reverses_at_prior_scales"]) == [200.0]
    assert res.values["verdict_reverses_at_prior_scales"][200.0] > np.log(3)
    assert "Warning: at prior scale 200 (log BF01 = +" in res.summary
    assert "decisive for H0 (invariance) instead" in res.summary
    same = invariance.invariance_check(ds, prior_scales=(1.0, 2.0), draws=400, tune=300, chains=2)
    assert "verdict_reverses_at_prior_scales" not in same.values and "instead" not in same.summary


def test_momentum_conventions_of_runs_without_momentum_are_no_difference_between_g():
    # at momentum 0 "ema" and "heavy_ball" are the same step: G 4 logged as one and G 16 as the
    # other was refused under the phenomenological form as differing in momentum_convention
    zero = _runset_with_settings({4: {"momentum_convention": "ema"}, 16: {"momentum_convention": "heavy_ball"}})
    assert invariance.settings_differing_by_g(zero, ["toy"]) == {}
    invariance.refuse_settings_confounded_with_g(zero, ["toy"], "phenomenological")
    moving = _runset_with_settings(
        {4: {"momentum": 0.9, "momentum_convention": "ema"}, 16: {"momentum": 0.9, "momentum_convention": "heavy_ball"}}
    )
    with pytest.raises(ValueError, match="momentum_convention"):
        invariance.refuse_settings_confounded_with_g(moving, ["toy"], "phenomenological")


def test_a_fits_hyperparameter_defaults_of_none_are_no_default_to_the_settings_comparison():
    # a saved fit's config holds {"momentum": None, ...} for "no default" (report --invariance
    # passes it): float(None) failed before any test
    config = {"hyperparameter_defaults": {"learning_rate": None, "momentum": None, "momentum_convention": None, "k_ref": None}}
    ds = _runset_with_settings({4: {"k_ref": 1}, 16: {"k_ref": 4}})
    assert invariance.settings_differing_by_g(ds, ["toy"], config) == {"toy": {"k_ref": {"4": ["1"], "16": ["4"]}}}


def test_a_setting_that_differs_between_g_only_in_float_roundoff_is_the_same_setting():
    # G 4 at learning rate 1e-3 and G 16 at 1e-3 read back with a roundoff error were refused
    # as "learning_rate G=4: 0.001, G=16: 0.001"
    ds = _runset_with_settings({4: {"learning_rate": 1e-3}, 16: {"learning_rate": 0.1 * 0.01 * (1 + 1e-13)}})
    assert ds["learning_rate"].values[0] != ds["learning_rate"].values[3]
    assert invariance.settings_differing_by_g(ds, ["toy"]) == {}
