"""Calibration: do 90% credible intervals cover the true p*, eta K, zeta and D in 80-98% of datasets?

Two sources of data with known truth (``--source``):

``sde`` (default)
    Simulates ``--n`` datasets from the SDE (``simulate_sde_runset``) with truth drawn at
    random per dataset (curvature K, plateau, initial reward, noise intensity D, measurement
    noise), fits each with :class:`~bayes_grpo.model.GRPODynamicsModel` (mechanistic; with
    the state-space likelihood ``D`` is the SDE's noise intensity; with ``--likelihood iid``
    the data carry measurement noise only and ``D`` is the residual variance times ``G``).
    Each dataset: one LLM, G in {4, 16} x two learning rates (4 runs), Adam-like momentum
    (EMA, beta1 = 0.9), ``k_ref`` 1, ``--steps`` steps, measurement sd ``msd / sqrt(G)``
    (``msd G^(-x/2)`` with ``--measurement-g-exponent x``; the state-space model has one
    measurement sd per LLM, so ``x = 0`` is the design it assumes).

``bandit``
    The exact softmax-bandit GRPO (``simulate_bandit``: two arms, ``loo`` advantage, exact KL
    anchor, heavy-ball momentum, on-policy ``K_ref = 0``), truth from the exact mean field
    (``bandit_truth``: ``p*``, the Jacobian stiffness ``K`` at ``p*`` so ``a = eta K``, the
    oscillator's ``zeta``, and ``D = eta^2 G (p*(1-p*))^2 Var[g_hat]``). The truth is the
    *linearisation at p**; the bandit's restoring force is not linear in the reward (the
    secant stiffness of a transient from ``p_ref = 0.5`` is ~30% above the tangent), so the
    runs are placed where the linearisation holds: they start at ``p_init = p* +- delta``
    (a converged policy, perturbed; delta in [0.025, 0.04], sign at random; beta in
    [1.2, 2.5], i.e. p* <= 0.81, where the force is least curved), and each row
    records the noise-free secant-to-tangent ratio ``u(p_init) / ((p* - p_init) K)`` of its
    start. Per dataset, drawn at random: ``beta`` (hence ``p*`` and ``K``), the learning rate
    (through the target gain ``a``), two momenta, ``G`` (one per dataset) and the start.
    Runs: 2 momenta x 2 seeds, ``--steps`` steps, ``--prompts`` prompts per step. With the
    state-space likelihood the true ``D`` is the bandit's state-noise intensity; with
    ``--likelihood iid`` it is ``G`` times the residual variance around the mean curve at
    ``p*`` (the logged reward's sampling variance ``p*(1-p*)/(B G)`` plus the state's
    stationary variance, averaged over the two momenta). One ``G`` and one learning rate per dataset because the model's
    ``D`` and measurement sd are per LLM, while the bandit's ``D`` depends on ``G`` and scales
    with ``eta^2``, and its measurement sd scales with ``G^(-1/2)``; with one ``G`` the noise
    exponent ``alpha`` is not identified, so it is fixed at its theoretical value 1.

Coverage is counted on the first run of each dataset for the per-run targets (``eta K``,
``zeta``: one independent check per dataset) and on the LLM for ``p*`` and ``D``; the rows
also hold the coverage over every run. Convergence figures (max R-hat, min bulk and tail
ESS, divergences) are recorded per fit.

Rows are appended to ``--out`` (JSONL) as each fit ends; a rerun with the same settings
skips the datasets already there (their simulations are replayed so the random stream, and
hence every later dataset, is unchanged); each row records its runs' logged step count and the
model version, and a row that differs from what this command would make, or records neither,
is refused (:func:`resume_mismatch`). ``--json`` writes the summary.

Usage::

    .venv/bin/python benchmarks/calibrate_recovery.py --n 20 [--source sde|bandit]
        [--likelihood state_space|iid] [--draws 500 --tune 500 --chains 2 --sampler pymc|nutpie]
        [--out rows.jsonl] [--json summary.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import numpy as np

from bayes_grpo.dynamics.simulate import runset_truth, simulate_sde_runset
from bayes_grpo.model import GRPODynamicsModel
from bayes_grpo.model.convergence import convergence_check

#: Strict convergence rule reported per fit (the library's thresholds: R-hat, ESS per chain).
RHAT_STRICT = 1.01
ESS_PER_CHAIN = 100.0


def draw_truth(rng: np.random.Generator) -> dict:
    """Random SDE truth for one dataset (a = eta_eff K in [2e-3, 2e-2] at lr 1e-3)."""
    return {
        "stiffness": float(np.exp(rng.uniform(np.log(20.0), np.log(200.0)))),
        "plateau": float(rng.uniform(0.5, 0.9)),
        "initial_reward": float(rng.uniform(0.05, 0.3)),
        "noise_d": float(np.exp(rng.uniform(np.log(1e-6), np.log(1e-5)))),
        "model_size": 1e9,
    }


def make_sde(args, rng: np.random.Generator):
    """One SDE dataset and its targets' truth (consumes the same draws as before this option)."""
    spec = draw_truth(rng)
    msd = float(rng.uniform(0.02, 0.06))
    if args.likelihood == "iid":
        # The iid model's D is the residual variance times G^alpha: simulate measurement
        # noise only (sd msd / sqrt(G)), so its true D is msd^2.
        spec["noise_d"] = 1e-14
    ds = simulate_sde_runset(
        models={"m": spec},
        group_sizes=(4, 16),
        learning_rates=(1e-3, 2e-3),
        momentum=0.9,
        convention="ema",
        n_seeds=1,
        n_steps=args.steps,
        measurement_sd=msd,
        measurement_g_exponent=args.measurement_g_exponent,
        random_seed=int(rng.integers(1 << 31)),
    )
    truth = runset_truth(ds)
    runs = {r: {"eta_K": truth["runs"][r]["a"], "zeta": truth["runs"][r]["zeta"]} for r in map(str, ds.run.values)}
    true_d = truth["models"]["m"]["noise_d"] if args.likelihood == "state_space" else msd**2
    model_truth = {"p_star": truth["models"]["m"]["plateau"], "D": true_d}
    info = {"measurement_sd_G1": msd, "stiffness": spec["stiffness"]}
    return ds, "m", model_truth, runs, info


def secant_ratio(p0: float, fp) -> float:
    """Noise-free secant over tangent stiffness at the start: ``u(p0) / ((p* - p0) K)``."""
    import torch

    from bayes_grpo.bandit.mean_field import expected_update

    theta = torch.tensor(math.log(p0 / (1 - p0)), dtype=torch.float64)
    kw = {k: getattr(fp, k) for k in ("group_size", "beta", "p_ref", "advantage", "n_prompts", "anchor")}
    with torch.no_grad():
        g = float(expected_update(theta, **kw))
    return p0 * (1 - p0) * g / ((fp.plateau - p0) * fp.stiffness)


def make_bandit(args, rng: np.random.Generator):
    """One bandit dataset near its fixed point, with the exact mean-field truth."""
    from bayes_grpo.bandit import simulate_bandit
    from bayes_grpo.bandit.experiments import runset_truth as bandit_runset_truth
    from bayes_grpo.bandit.mean_field import fixed_point

    beta = float(rng.uniform(1.2, 2.5))
    group_size = int(rng.choice([4, 8, 16]))
    gain_target = float(np.exp(rng.uniform(np.log(0.02), np.log(0.08))))
    momenta = (float(rng.choice([0.0, 0.3])), float(rng.choice([0.5, 0.7])))
    delta = float(rng.uniform(0.025, 0.04)) * float(rng.choice([-1.0, 1.0]))
    sim_seed = int(rng.integers(1 << 31))
    fp = fixed_point(group_size=group_size, beta=beta, p_ref=0.5, advantage="loo", n_prompts=args.prompts, anchor="kl")
    lr = gain_target / fp.stiffness
    p0 = fp.plateau + delta
    ds = simulate_bandit(
        k_ref=0,
        group_size=group_size,
        learning_rate=lr,
        momentum=list(momenta),
        beta=beta,
        seeds=2,
        steps=args.steps,
        n_prompts=args.prompts,
        p_ref=0.5,
        p_init=p0,
        advantage="loo",
        anchor="kl",
        seed=sim_seed,
    )
    truth = bandit_runset_truth(ds)
    runs = {r: {"eta_K": truth[r]["a"], "zeta": truth[r]["zeta"]} for r in map(str, ds.run.values)}
    first = truth[str(ds.run.values[0])]
    stat_var = float(np.mean([truth[r]["stationary_var"] for r in map(str, ds.run.values)]))
    if args.likelihood == "state_space":
        true_d = first["noise_d"]
    else:
        # The iid model's D is G^alpha times the residual variance around the mean curve
        # (alpha fixed at 1): the logged reward's sampling variance plus the state's
        # stationary variance (averaged over the dataset's two momenta: 1-10% of the total).
        true_d = group_size * (first["measurement_sd"] ** 2 + stat_var)
    model_truth = {"p_star": first["plateau"], "D": true_d}
    info = {
        "beta": beta,
        "group_size": group_size,
        "learning_rate": lr,
        "momenta": list(momenta),
        "p_init": p0,
        "delta": delta,
        "stiffness": fp.stiffness,
        "measurement_sd": first["measurement_sd"],
        "stationary_sd": [math.sqrt(truth[r]["stationary_var"]) for r in map(str, ds.run.values)],
        "secant_over_tangent": secant_ratio(p0, fp),
        "state_noise_d": first["noise_d"],
        "n_prompts": args.prompts,
    }
    return ds, str(ds.model.values[0]), model_truth, runs, info


def interval(draws: np.ndarray, value: float) -> dict:
    lo, hi = np.quantile(np.ravel(draws), [0.05, 0.95])
    return {"truth": float(value), "lo": float(lo), "hi": float(hi), "covered": bool(lo <= value <= hi)}


def sample_nutpie_reusing(model: GRPODynamicsModel, ds, args, i: int, cache: dict):
    """NUTS with nutpie, compiling the log density once per design and swapping the data in.

    Every data-derived number of the model (rewards, hyperparameters, prior centres) lives in
    a ``pm.Data`` container of fixed shape, so datasets of one design share one log-density
    graph: the first dataset's compiled model is reused with ``with_data`` (the log density
    with swapped data equals the freshly built model's to the last digit; checked on three
    points of both designs). The deterministics are then evaluated on the draws with this
    dataset's model, as ``GRPODynamicsModel.fit(sampler="nutpie")`` does.
    """
    import nutpie
    import pymc as pm

    pm_model = model.build_model(ds)
    values = {v.name: v.get_value() for v in pm_model.data_vars}
    if "compiled" not in cache:
        free = [rv.name for rv in pm_model.free_RVs]
        cache["compiled"] = nutpie.compile_pymc_model(pm_model, freeze_model=False, var_names=free)
    known = cache["compiled"].shared_data  # the containers the log density reads
    compiled = cache["compiled"].with_data(**{k: v for k, v in values.items() if k in known})
    idata = nutpie.sample(
        compiled, draws=args.draws, tune=args.tune, chains=args.chains, cores=1, seed=i,
        progress_bar=False, target_accept=0.9,
    )
    posterior = idata.posterior.assign_coords(
        {dim: np.asarray(pm_model.coords[dim]) for dim in idata.posterior.dims if dim in pm_model.coords}
    )
    posterior = pm.compute_deterministics(posterior, model=pm_model, merge_dataset=True, progressbar=False)
    idata.posterior = posterior.assign_attrs(idata.posterior.attrs)
    return idata


def fit_one(i: int, args, ds, llm: str, model_truth: dict, runs: dict, info: dict, cache: dict) -> dict:
    model_config = {"alpha": {"fixed": 1.0}} if args.source == "bandit" else None
    model = GRPODynamicsModel(likelihood=args.likelihood, model_config=model_config)
    t0 = time.perf_counter()
    if args.sampler == "nutpie":
        idata = sample_nutpie_reusing(model, ds, args, i, cache)
        conv = convergence_check(idata)
    else:
        model.fit(
            ds, draws=args.draws, tune=args.tune, chains=args.chains, sampler=args.sampler,
            random_seed=i, progressbar=False, cores=1,
        )
        idata = model.idata
        conv = model.convergence()
    wall = time.perf_counter() - t0
    post = idata.posterior
    run0 = next(iter(runs))
    row: dict = {"dataset": i, "seconds": wall, "info": info}
    row["p_star"] = interval(post["plateau"].sel(model=llm).values, model_truth["p_star"])
    row["eta_K"] = interval(post["a"].sel(run=run0).values, runs[run0]["eta_K"])
    row["zeta"] = interval(post["zeta"].sel(run=run0).values, runs[run0]["zeta"])
    row["D"] = interval(post["noise_d"].sel(model=llm).values, model_truth["D"])
    row["all_runs"] = {
        name: [interval(post[var].sel(run=r).values, t[name])["covered"] for r, t in runs.items()]
        for name, var in (("eta_K", "a"), ("zeta", "zeta"))
    }
    v = conv.values
    chains = int(v["chains"])
    row["convergence"] = {
        "passed": bool(conv.passed),
        "max_r_hat": v["max_r_hat"],
        "min_ess_bulk": v["min_ess_bulk"],
        "min_ess_tail": v["min_ess_tail"],
        "divergences": v["divergences"],
        "max_treedepth_hits": v["max_treedepth_hits"],
        "chains": chains,
        "draws": int(v["draws"]),
        "r_hat_ok": bool(v["max_r_hat"] <= RHAT_STRICT),
        "ess_ok": bool(min(v["min_ess_bulk"], v["min_ess_tail"]) >= ESS_PER_CHAIN * chains),
        "worst": conv.table.sort_values("r_hat", ascending=False).head(3)["r_hat"].round(4).to_dict(),
    }
    return row


TARGETS = ("p_star", "eta_K", "zeta", "D")


def summarise(rows: list[dict]) -> dict:
    out: dict = {"n": len(rows)}
    out["coverage"] = {n: float(np.mean([r[n]["covered"] for r in rows])) for n in TARGETS}
    out["coverage_all_runs"] = {
        n: float(np.mean([c for r in rows for c in r["all_runs"][n]])) for n in ("eta_K", "zeta")
    }
    out["median_interval_ratio_hi_over_lo"] = {
        n: float(np.median([r[n]["hi"] / r[n]["lo"] for r in rows if r[n]["lo"] > 0])) for n in ("eta_K", "D")
    }
    conv = [r["convergence"] for r in rows]
    out["convergence"] = {
        "passed_share": float(np.mean([c["passed"] for c in conv])),
        "r_hat_ok_share": float(np.mean([c["r_hat_ok"] for c in conv])),
        "ess_ok_share": float(np.mean([c["ess_ok"] for c in conv])),
        "max_r_hat_median": float(np.median([c["max_r_hat"] for c in conv])),
        "max_r_hat_max": float(np.max([c["max_r_hat"] for c in conv])),
        "min_ess_bulk_median": float(np.median([c["min_ess_bulk"] for c in conv])),
        "divergences_total": int(np.sum([c["divergences"] for c in conv])),
        "fits_with_divergences": int(np.sum([c["divergences"] > 0 for c in conv])),
    }
    out["seconds_median"] = float(np.median([r["seconds"] for r in rows]))
    return out


def resume_mismatch(row: dict, info: dict) -> str | None:
    """Why a finished ``row`` of ``--out`` is not one this command makes for its dataset, or None.

    The settings alone (compared before) did not tell: ``--steps 300`` simulated 301 logged
    steps per run before ``simulate_sde_runset``'s ``n_steps`` counted logged steps (300 since),
    and a row of an older model version is of another model; a resumed run summarised such
    rows with its own without a word. A row that records neither is refused too.
    """
    done = row.get("info", {})
    for key, what in (("logged_steps", "logged steps per run"), ("model_version", "model version")):
        if key not in done:
            return f"dataset {row['dataset']} does not record its {what}, so whether it is of this command is unknown"
        if done[key] != info[key]:
            return f"dataset {row['dataset']} has {what} {done[key]!r}, this command gives {info[key]!r}"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--source", default="sde", choices=("sde", "bandit"))
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default: sde 300, bandit 150)")
    parser.add_argument("--prompts", type=int, default=64, help="bandit: prompts (groups) per step")
    parser.add_argument("--likelihood", default="state_space", choices=("state_space", "iid"))
    parser.add_argument(
        "--measurement-g-exponent", type=float, default=1.0,
        help="sde: measurement sd msd * G^(-x/2) (1: sampling noise of a mean of G rewards; "
        "0: one measurement sd per LLM, as the state-space model assumes)",
    )
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--sampler", default="pymc", choices=("pymc", "nutpie"))
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", default=None, help="JSONL of per-dataset rows (appended; resumes)")
    parser.add_argument("--json", default=None, help="summary (settings, rows, coverage)")
    args = parser.parse_args()
    if args.steps is None:
        args.steps = 150 if args.source == "bandit" else 300
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "json", "n")}
    if args.measurement_g_exponent == 1.0:
        del settings["measurement_g_exponent"]  # recorded when not the default (older rows lack it)
    done: dict[int, dict] = {}
    if args.out and os.path.exists(args.out):
        with open(args.out) as fh:
            for line in fh:
                rec = json.loads(line)
                if rec.get("settings") != settings:
                    raise SystemExit(f"{args.out}: holds rows of other settings {rec.get('settings')}; use another --out")
                done[rec["row"]["dataset"]] = rec["row"]
    rng = np.random.default_rng(args.seed)
    make = make_bandit if args.source == "bandit" else make_sde
    rows = []
    cache: dict = {}
    for i in range(args.n):
        ds, llm, model_truth, runs, info = make(args, rng)  # replayed for finished datasets
        info = info | {"logged_steps": int(ds.sizes["step"]), "model_version": GRPODynamicsModel.version}
        if i in done:
            why = resume_mismatch(done[i], info)
            if why:
                raise SystemExit(f"{args.out}: holds rows this command would not make ({why}); use another --out")
            rows.append(done[i])
            continue
        row = fit_one(i, args, ds, llm, model_truth, runs, info, cache)
        rows.append(row)
        print(json.dumps({k: row[k] for k in ("dataset", "seconds", *TARGETS)} | {"conv": row["convergence"]}), flush=True)
        if args.out:
            with open(args.out, "a") as fh:
                fh.write(json.dumps({"settings": settings, "row": row}) + "\n")
    summary = summarise(rows)
    print("summary:", json.dumps(summary, indent=1))
    if args.json:
        from bayes_grpo._io import write_text_atomic

        write_text_atomic(args.json, json.dumps({"settings": settings, "summary": summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
