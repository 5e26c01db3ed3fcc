"""Benchmark: fit 12 runs x 1000 steps (4 chains x 1000 draws) and compare with an ODE-integrating model.

Measures, on simulated data with known truth (``simulate_sde_runset``):

1. the closed-form hierarchical model (mechanistic, iid): wall time including model
   building and compilation, max R-hat, min bulk/tail ESS over every posterior variable,
   divergences;
2. a straightforward PyMC model with the same priors whose mean trajectory is obtained by
   integrating the ODE ``M e'' + C e' + K e = 0`` numerically (RK4 over each unit step, in a
   ``pytensor.scan``), as one would write it without the closed form;
3. the speed ratio, reported two ways: time per gradient evaluation of the log density
   (both compiled the same way, timed on the same point), and, when ``--ode-draws`` > 0,
   time per effective sample (min bulk ESS) of a short ODE-model run.

Usage::

    .venv/bin/python benchmarks/bench_fit.py [--sampler nutpie|pymc] [--draws 1000] [--ode-draws 0] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from bayes_grpo.dynamics.simulate import simulate_sde_runset

MODELS = {
    "llm-a": {"stiffness": 60.0, "plateau": 0.8, "initial_reward": 0.2, "noise_d": 1e-10, "model_size": 1.5e9},
    "llm-b": {"stiffness": 120.0, "plateau": 0.6, "initial_reward": 0.1, "noise_d": 1e-10, "model_size": 7e9},
}


def make_data(seed: int = 1):
    """12 runs (2 LLMs x G in {4, 16} x 3 seeds) x 1000 steps, Adam-like momentum."""
    return simulate_sde_runset(
        models=MODELS,
        group_sizes=(4, 16),
        learning_rates=(1e-3,),
        momentum=0.9,
        convention="ema",
        n_seeds=3,
        n_steps=999,
        measurement_sd=0.1,
        measurement_g_exponent=1.0,
        random_seed=seed,
    )


def ode_model(ds, config=None):
    """The same priors as the mechanistic iid model, mean trajectory by RK4 integration."""
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt

    from bayes_grpo.dynamics.coefficients import oscillator_coefficients
    from bayes_grpo.model.builder import prior_centres
    from bayes_grpo.model.config import DEFAULT_MODEL_CONFIG, merge_config
    from bayes_grpo.model.prepare import prepare_data

    cfg = merge_config(DEFAULT_MODEL_CONFIG, config)
    data = prepare_data(ds, cfg, "mechanistic")
    c = prior_centres(data, cfg, "mechanistic")
    mi = data.model_idx
    n_steps = int(data.steps.max())
    with pm.Model(coords={"run": data.run_ids, "model": data.models}) as model:
        plateau_m = data.late + cfg["plateau"]["sigma"] * pm.Normal("plateau_z", 0, 1, dims="model")
        r0_m = data.early + cfg["initial_reward"]["sigma"] * pm.Normal("initial_reward_z", 0, 1, dims="model")
        tau = pm.HalfNormal("initial_reward_run_sd", cfg["initial_reward"]["run_sigma"])
        r0 = r0_m[mi] + tau * pm.Normal("initial_reward_run_z", 0, 1, dims="run")
        p = plateau_m[mi]
        delta = pm.Normal("log_stiffness_delta", 0, 1)
        sd = pm.HalfNormal("log_stiffness_sd", max(cfg["log_stiffness"]["between_models_sigma"], 2 * c["log_k_spread"]))
        log_k = c["log_k_centre"] + cfg["log_stiffness"]["mean_sigma"] * delta + sd * pm.Normal("log_stiffness_z", 0, 1, dims="model")
        if c["use_size"]:
            log_k = log_k + pm.Normal("size_exponent", 0, 1) * c["x_size"]
        a = data.eta_eff * pt.exp(log_k[mi])
        mass, damp, k_eff = oscillator_coefficients(a, data.momentum, data.k_ref)
        alpha = pm.Normal("alpha", cfg["alpha"]["mu"], cfg["alpha"]["sigma"])
        sigma_ref = data.noise_guess * pt.exp(cfg["noise"]["log_sigma"] * pm.Normal("noise_z", 0, 1, dims="model"))
        g = np.where(np.isfinite(data.group_size), data.group_size, 1.0)
        sigma = sigma_ref[mi] * pt.sqrt((g / c["g_ref"][mi]) ** (-alpha))

        def rk4(e, v, m_, c_, k_):
            def f(e, v):
                return v, -(c_ * v + k_ * e) / m_

            k1e, k1v = f(e, v)
            k2e, k2v = f(e + 0.5 * k1e, v + 0.5 * k1v)
            k3e, k3v = f(e + 0.5 * k2e, v + 0.5 * k2v)
            k4e, k4v = f(e + k3e, v + k3v)
            return e + (k1e + 2 * k2e + 2 * k3e + k4e) / 6.0, v + (k1v + 2 * k2v + 2 * k3v + k4v) / 6.0

        # The coefficients enter as non-sequences (a scan must not close over random variables).
        (es, _), _ = pytensor.scan(rk4, outputs_info=[r0 - p, pt.zeros_like(r0)], non_sequences=[mass, damp, k_eff], n_steps=n_steps)
        e_all = pt.concatenate([(r0 - p)[None, :], es], axis=0).T  # (run, step 0..n_steps)
        idx = data.obs_step_idx  # grid steps are 0..n_steps here
        mu = (p[:, None] + e_all)[data.obs_run, data.steps[idx].astype(int)]
        y = data.obs_y
        pm.Normal("y", mu=mu, sigma=sigma[data.obs_run], observed=y)
    return model


def time_gradient(model, repeats: int = 50) -> tuple[float, float]:
    """(compile seconds, seconds per gradient evaluation) at the initial point."""
    t0 = time.perf_counter()
    fn = model.compile_dlogp()
    point = model.initial_point()
    fn(point)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn(point)
    return compile_s, (time.perf_counter() - t0) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sampler", default="nutpie", choices=("nutpie", "pymc"))
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--ode-draws", type=int, default=0, help="also sample the ODE model (2 chains) for ESS/s")
    parser.add_argument("--skip-fit", action="store_true", help="only the per-gradient comparison")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    from bayes_grpo.model import GRPODynamicsModel

    ds = make_data()
    out: dict = {"runs": int(ds.sizes["run"]), "steps": int(ds.sizes["step"]), "cpu_count": os.cpu_count(), "sampler": args.sampler}
    if not args.skip_fit:
        model = GRPODynamicsModel()
        t0 = time.perf_counter()
        model.fit(ds, draws=args.draws, tune=args.tune, chains=args.chains, sampler=args.sampler, random_seed=1, progressbar=False)
        wall = time.perf_counter() - t0
        conv = model.convergence()
        post = model.idata.posterior
        ss = model.idata.sample_stats
        n_grad = int(np.asarray(ss["n_steps"]).sum()) if "n_steps" in ss else None
        out["closed_form"] = {
            "wall_s_including_build_and_compile": wall,
            "max_r_hat": conv.values["max_r_hat"],
            "min_ess_bulk": conv.values["min_ess_bulk"],
            "min_ess_tail": conv.values["min_ess_tail"],
            "divergences": conv.values["divergences"],
            "passed": conv.passed,
            "gradient_evaluations_post_warmup": n_grad,
            "variables_checked": len(conv.table),
            "draws": int(post.sizes["draw"]),
            "chains": int(post.sizes["chain"]),
        }
        print(json.dumps(out["closed_form"], indent=1), flush=True)
    cf_model = GRPODynamicsModel().build_model(ds)
    cf_compile, cf_grad = time_gradient(cf_model)
    ode = ode_model(ds)
    ode_compile, ode_grad = time_gradient(ode, repeats=10)
    out["per_gradient"] = {
        "closed_form_s": cf_grad,
        "ode_s": ode_grad,
        "ratio_ode_over_closed_form": ode_grad / cf_grad,
        "closed_form_compile_s": cf_compile,
        "ode_compile_s": ode_compile,
    }
    print(json.dumps(out["per_gradient"], indent=1), flush=True)
    if args.ode_draws > 0:
        import arviz as az
        import pymc as pm

        t0 = time.perf_counter()
        with ode:
            idata = pm.sample(draws=args.ode_draws, tune=args.ode_draws, chains=2, cores=1, random_seed=1, progressbar=False, compute_convergence_checks=False)
        wall = time.perf_counter() - t0
        ess = float(min(az.ess(idata.posterior)[v].min() for v in idata.posterior.data_vars))
        out["ode_sampling"] = {"wall_s": wall, "min_ess_bulk": ess, "s_per_effective_sample": wall / max(ess, 1e-9), "draws": args.ode_draws, "chains": 2}
        if "closed_form" in out:
            cf = out["closed_form"]
            out["ode_sampling"]["ratio_per_effective_sample"] = (wall / ess) / (cf["wall_s_including_build_and_compile"] / cf["min_ess_bulk"])
        print(json.dumps(out["ode_sampling"], indent=1), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
