"""Convergence diagnostics of a fit: R-hat, bulk/tail ESS, divergences, tree depth, E-BFMI.

Every fit is checked; problems are reported with advice in the :class:`CheckResult`
(and printed by the CLI), never hidden.
"""

from __future__ import annotations

import arviz as az
import numpy as np
import pandas as pd

from bayes_grpo.checks.base import CheckResult, counted

#: Thresholds (Vehtari et al. 2021; Betancourt 2017).
RHAT_MAX: float = 1.01
ESS_MIN_PER_CHAIN: float = 100.0
EBFMI_MIN: float = 0.3
#: A chain whose median log density is this many nats below the best chain's is stuck where the
#: model's density is far lower (mixing chains differ by ~sqrt(number of parameters) nats).
STUCK_LOG_DENSITY_GAP: float = 1000.0


def _stat(sample_stats, *names):
    for name in names:
        if sample_stats is not None and name in sample_stats:
            return sample_stats[name]
    return None


def _rhat(posterior):
    """``az.rhat`` of a posterior dataset; NaN, silently, for an element constant over draws.

    A variable that is constant only in some elements is still checked (``_checked_vars``
    skips wholly constant ones): the mass ``M_eff = (1 + mu)/2`` of a run with ``k_ref = 0``
    next to runs with a lag, for example. Its within-chain variance is 0, and arviz's ratio
    warned ``invalid value encountered in scalar divide`` into the output of ``fit``; the NaN
    it gives is skipped by the maxima taken here.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return az.rhat(posterior)


def _checked_vars(idata: az.InferenceData, var_names: list[str] | None) -> list[str]:
    post = idata.posterior
    if var_names is not None:
        unknown = [v for v in var_names if v not in post]
        if unknown or not var_names:
            # a misspelt name was dropped, and a check of nothing read "Converged: R-hat <= nan"
            raise ValueError(f"var_names {list(var_names)}: no posterior variable {unknown or ''}; the posterior's: {sorted(map(str, post.data_vars))}")
        return list(var_names)
    out = []
    for name, da in post.data_vars.items():
        extra = [d for d in da.dims if d not in ("chain", "draw")]
        if "obs" in extra:
            continue
        values = da.values
        # constants (fixed alpha) have no R-hat; relative only: a variable of tiny values (the
        # noise D of rewards on a 0-0.001 scale, ~1e-9) is no constant and is checked. One with
        # non-finite draws is checked too (its finite elements), and reported by _nonfinite
        if np.isfinite(values).all() and np.allclose(values, values.flat[0], rtol=1e-9, atol=0.0):
            continue
        out.append(str(name))
    return out


def _nonfinite(posterior, names: list[str]) -> dict[str, tuple[int, int]]:
    """``{name: (non-finite draws, all values)}`` of the checked variables that have any.

    A NaN or infinite draw means the sampler reached parameters where the model is undefined
    (an overflow); R-hat and ESS of those elements are NaN and drop out of the worst figures,
    so the check must say so rather than pass on the rest.
    """
    out = {}
    for name in names:
        values = np.asarray(posterior[name].values, dtype=float)
        bad = int((~np.isfinite(values)).sum())
        if bad:
            out[name] = (bad, int(values.size))
    return out


#: Per-run variables of the model: their R-hat says whether the chains agree on a run.
RUN_VARIABLES: tuple[str, ...] = ("plateau_run", "initial_reward", "a", "zeta", "sigma")


def run_r_hat(posterior) -> pd.Series:
    """Largest R-hat over the per-run variables (:data:`RUN_VARIABLES`) of each run.

    Index: the ``run`` coordinate; NaN for every run with fewer than 2 chains or without
    per-run variables. Tells which runs' estimates rest on chains that disagree (e.g. one run
    whose posterior has an oscillatory and an overdamped mode), when the fit-wide R-hat only
    says that some variable does.
    """
    if "run" not in posterior.dims:
        return pd.Series(dtype=float)
    runs = [str(r) for r in posterior["run"].values]
    names = [v for v in RUN_VARIABLES if v in posterior and "run" in posterior[v].dims]
    if posterior.sizes["chain"] < 2 or not names:
        return pd.Series(np.nan, index=pd.Index(runs, name="run"), dtype=float)
    rhat = _rhat(posterior[names])
    worst = np.nanmax(np.stack([rhat[v].transpose("run", ...).values.reshape(len(runs), -1).max(axis=1) for v in names]), axis=0)
    return pd.Series(worst, index=pd.Index(runs, name="run"), dtype=float)


def _stuck_chains(sample_stats) -> dict | None:
    """Chains whose median log density is :data:`STUCK_LOG_DENSITY_GAP` nats or more below the
    best chain's: ``{"chains": {chain: median}, "best_chain": chain, "best": median}``, or None.

    R-hat and ESS see such a chain only as one that disagrees ("increase tune/draws"); a fit of
    TRL runs of one LLM by Adam (lr 4e-3) and SGD (lr 0.3) had a chain at log density -3e14
    (step size 4e-10, the others at +833) that 100 more draws would not have moved.
    """
    lp = _stat(sample_stats, "lp", "logp")
    if lp is None or "chain" not in lp.dims or lp.sizes["chain"] < 2:
        return None
    with np.errstate(invalid="ignore"):
        med = np.nanmedian(np.asarray(lp.transpose("chain", ...).values, dtype=float).reshape(lp.sizes["chain"], -1), axis=1)
    if not np.isfinite(med).any():
        return None
    labels = lp["chain"].values if "chain" in lp.coords else np.arange(med.size)
    best = int(np.nanargmax(med))
    low = [i for i in range(med.size) if med[i] < med[best] - STUCK_LOG_DENSITY_GAP]
    if not low:
        return None
    return {"chains": {labels[i].item(): float(med[i]) for i in low}, "best_chain": labels[best].item(), "best": float(med[best])}


def convergence_check(
    idata: az.InferenceData,
    *,
    var_names: list[str] | None = None,
    max_treedepth: int = 10,
    prior_only: dict[str, str] | None = None,
) -> CheckResult:
    """Check the sampler's convergence.

    Parameters
    ----------
    idata
        InferenceData with ``posterior`` and ``sample_stats`` (PyMC or nutpie names).
    var_names
        Variables to check; default: every posterior variable that is not constant.
    max_treedepth
        The sampler's maximum tree depth (PyMC and nutpie default 10).
    prior_only
        ``{variable: why}`` of the variables (or elements of them) no data of the fit inform
        (``GRPODynamicsModel.prior_only_variables``): when one of them fails R-hat or ESS, the
        advice says so and what it means (still a failure: its draws are few).

    Returns
    -------
    CheckResult
        ``passed`` True when all thresholds hold; ``table`` one row per variable (worst
        element): ``r_hat``, ``ess_bulk``, ``ess_tail``; ``values`` the worst figures, the
        counts, ``advice`` (a list of sentences), ``failed`` (the failed criteria, one short
        phrase each, e.g. ``"tail ESS 150 < 200"``) and ``remedies`` (what a refit needs for
        them, one short phrase each, e.g. ``"more --tune/--draws"``, none of that for a stuck
        chain, which more draws do not move: the load warning of a saved fit says these).
    """
    post = idata.posterior
    n_chains = post.sizes["chain"]
    n_draws = post.sizes["draw"]
    names = _checked_vars(idata, var_names)
    rows = []
    for name in names:
        sub = post[[name]]
        rhat = float(_rhat(sub)[name].max()) if n_chains > 1 else float("nan")
        ess_b = float(az.ess(sub, method="bulk")[name].min())
        ess_t = float(az.ess(sub, method="tail")[name].min())
        rows.append({"variable": name, "r_hat": rhat, "ess_bulk": ess_b, "ess_tail": ess_t})
    table = pd.DataFrame(rows).set_index("variable") if rows else pd.DataFrame(columns=["r_hat", "ess_bulk", "ess_tail"])
    ss = getattr(idata, "sample_stats", None)
    div = _stat(ss, "diverging")
    n_div = int(np.asarray(div).sum()) if div is not None else 0
    depth = _stat(ss, "tree_depth", "depth")
    maxed = _stat(ss, "reached_max_treedepth", "maxdepth_reached")
    if maxed is not None:
        n_max = int(np.asarray(maxed).sum())
    elif depth is not None:
        n_max = int((np.asarray(depth) >= max_treedepth).sum())
    else:
        n_max = 0
    energy = _stat(ss, "energy")
    bfmi = np.atleast_1d(az.bfmi(ss)) if energy is not None else np.array([np.nan])
    ess_min = ESS_MIN_PER_CHAIN * n_chains
    worst_rhat = float(table["r_hat"].max()) if len(table) else float("nan")
    worst_bulk = float(table["ess_bulk"].min()) if len(table) else float("nan")
    worst_tail = float(table["ess_tail"].min()) if len(table) else float("nan")

    advice: list[str] = []
    failed: list[str] = []  # the criteria that failed, one short phrase each (for one-line notes)
    remedies: list[str] = []  # what a refit needs for them, one short phrase each ("refit with ...")
    if n_chains < 2:
        advice.append("R-hat needs at least 2 chains; run more chains to assess convergence.")
        failed.append("fewer than 2 chains")
        remedies.append("2 or more --chains")
    if np.isfinite(worst_rhat) and worst_rhat > RHAT_MAX:
        failed.append(f"R-hat {worst_rhat:.3f} > {RHAT_MAX}")
        bad = table.index[table["r_hat"] > RHAT_MAX].tolist()
        advice.append(f"R-hat {worst_rhat:.3f} > {RHAT_MAX} for {bad}: chains disagree; increase tune/draws or check multimodality (e.g. under- vs overdamped solutions).")
        per_run = run_r_hat(post)
        runs_bad = per_run[per_run > RHAT_MAX]
        if len(runs_bad) and len(runs_bad) < len(per_run):
            listed = ", ".join(f"{r} ({v:.3f})" for r, v in runs_bad.sort_values(ascending=False).items())
            advice.append(f"Per run, the chains disagree only on {len(runs_bad)} of {len(per_run)} runs: {listed} (the other runs' per-run variables have R-hat <= {RHAT_MAX}).")
    if np.isfinite(worst_bulk) and worst_bulk < ess_min:
        bad = table.index[table["ess_bulk"] < ess_min].tolist()
        advice.append(f"bulk ESS {worst_bulk:.0f} < {ess_min:.0f} for {bad}: increase draws.")
        failed.append(f"bulk ESS {worst_bulk:.0f} < {ess_min:.0f}")
    if np.isfinite(worst_tail) and worst_tail < ess_min:
        advice.append(f"tail ESS {worst_tail:.0f} < {ess_min:.0f}: interval ends are unreliable; increase draws.")
        failed.append(f"tail ESS {worst_tail:.0f} < {ess_min:.0f}")
    if any(f.startswith(("R-hat", "bulk ESS", "tail ESS")) for f in failed):
        remedies.append("more --tune/--draws")
    slow = [v for v in table.index if (table.loc[v, "r_hat"] > RHAT_MAX) or (table.loc[v, "ess_bulk"] < ess_min) or (table.loc[v, "ess_tail"] < ess_min)] if len(table) else []
    uninformed = [v for v in slow if v in (prior_only or {})]
    if uninformed:
        listed = ", ".join(f"{v} ({prior_only[v]})" for v in uninformed)
        advice.append(
            f"Of these, no data of this fit inform {listed}: drawn from their prior alone, their R-hat "
            "and ESS say only that too few draws were taken to trust them, not that the chains "
            "disagree about the data; "
            + (
                "every variable the data inform passes R-hat and ESS, and the fitted curves do not "
                "depend on these."
                if len(uninformed) == len(slow)
                else "variables the data inform fail as well: the fit needs more draws either way."
            )
        )
    if n_div:
        failed.append(counted(n_div, "divergent transition"))
        remedies.append("a higher --target-accept")
        advice.append(f"{counted(n_div, 'divergent transition')}: raise target_accept (e.g. 0.95-0.99) or simplify the model (fewer levels, phenomenological form); results may be biased.")
    if n_max:
        failed.append(f"{counted(n_max, 'transition')} at the maximum tree depth {max_treedepth}")
        remedies.append("a higher --max-treedepth")
        advice.append(f"{counted(n_max, 'transition')} {'hits' if n_max == 1 else 'hit'} the maximum tree depth {max_treedepth}: posterior is poorly scaled or strongly correlated; raise max_treedepth or reparameterise.")
    nonfinite = _nonfinite(post, names)
    if nonfinite:
        listed = ", ".join(f"{n} ({bad} of {size} values)" for n, (bad, size) in nonfinite.items())
        failed.append(f"non-finite draws of {', '.join(nonfinite)}")
        remedies.append("priors scaled to the data")
        advice.append(f"Non-finite draws of {listed}: the sampler reached parameters where the model overflows or is undefined, and R-hat / ESS leave those elements out; check the priors' scales against the data, or reparameterise.")
    stuck = _stuck_chains(ss)
    if stuck:
        listed = "; ".join(f"{c}: {lp:.3g}" for c, lp in stuck["chains"].items())
        which = f"{counted(len(stuck['chains']), 'chain')} ({', '.join(map(str, stuck['chains']))})"
        failed.append(f"{which} stuck at a far lower log density")
        # the chain's R-hat and ESS failures are its own: more tune/draws would not move it
        remedies[:] = [r for r in remedies if r != "more --tune/--draws"]
        remedies.append("another --seed, or with runs whose steps differ by decades as separate LLMs (more --tune/--draws will not help a stuck chain)")
        advice.append(
            f"{which} stuck where the log density is far below that of chain {stuck['best_chain']} "
            f"(median log density per chain: {stuck['best_chain']}: {stuck['best']:.3g}; {listed}): a "
            "sampler does not leave such a region, "
            "so more tune/draws will not help. It starts there when the law "
            "of some run explodes at the starting point, e.g. runs whose steps differ by decades under one "
            "LLM (Adam and SGD runs: see the fit's notes); fit such runs as separate LLMs, or refit with "
            "another --seed."
        )
    low_bfmi = [float(b) for b in bfmi if np.isfinite(b) and b < EBFMI_MIN]
    if low_bfmi:
        failed.append(f"E-BFMI {min(low_bfmi):.2f} < {EBFMI_MIN}")
        remedies.append("stronger priors on the scale parameters")
        advice.append(f"E-BFMI {min(low_bfmi):.2f} < {EBFMI_MIN} in {counted(len(low_bfmi), 'chain')}: heavy tails / funnels; consider stronger priors on scale parameters.")
    passed = (n_chains >= 2) and not advice
    if passed:
        # without the sampler's statistics no divergence was counted: "no divergences" was
        # said of a posterior whose divergences were never recorded
        divergences = "no divergences" if div is not None else "divergences, tree depth and E-BFMI not checked (no sampler statistics)"
        summary = f"Converged: R-hat <= {worst_rhat:.3f}, bulk ESS >= {worst_bulk:.0f}, tail ESS >= {worst_tail:.0f}, {divergences} ({n_chains} chains x {n_draws} draws)."
    else:
        summary = "Convergence problems: " + " ".join(advice)
    values = {
        "max_r_hat": worst_rhat,
        "min_ess_bulk": worst_bulk,
        "min_ess_tail": worst_tail,
        "divergences": n_div if div is not None else None,  # None: not recorded
        "max_treedepth_hits": n_max,
        "min_bfmi": float(np.nanmin(bfmi)) if np.isfinite(bfmi).any() else float("nan"),
        "chains": int(n_chains),
        "draws": int(n_draws),
        "nonfinite_draws": {n: bad for n, (bad, _) in nonfinite.items()},
        "stuck_chains": {str(c): lp for c, lp in stuck["chains"].items()} if stuck else {},
        "advice": advice,
        "failed": failed,
        "remedies": remedies,
    }
    return CheckResult(name="convergence", passed=passed, summary=summary, table=table, values=values)


__all__ = ["convergence_check", "run_r_hat", "RHAT_MAX", "RUN_VARIABLES", "ESS_MIN_PER_CHAIN", "EBFMI_MIN"]
