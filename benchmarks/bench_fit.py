"""Benchmark: fit 12 runs x 1000 steps (4 chains x 1000 draws) and compare with an ODE-integrating model.

Measures, on simulated data with known truth (``simulate_sde_runset``):

1. the closed-form hierarchical model (mechanistic, iid): wall time including model
   building and compilation, max R-hat, min bulk/tail ESS over every posterior variable,
   divergences;
2. two straightforward PyMC models with the same priors whose mean trajectory is obtained by
   integrating the ODE ``M e'' + C e' + K e = 0`` numerically, as one would write them
   without the closed form: ``pymc.ode.DifferentialEquation`` (one solve per run), and RK4
   over each unit step in a ``pytensor.scan``;
3. the speed ratio: time per gradient evaluation of the log density (compiled the same way,
   timed on the same point; ``--numba-gradient`` adds the numba backend), the projected
   whole-fit ratio (each baseline's compile time plus the closed-form fit's gradient count at
   the baseline's cost per gradient, against the measured closed-form wall time), and, when
   ``--ode-draws`` > 0, time per effective sample of a short RK4-model run.

Usage::

    .venv/bin/python benchmarks/bench_fit.py [--sampler nutpie|pymc] [--draws 1000] [--target-accept 0.95]
        [--pm-ode-repeats 3] [--numba-gradient] [--ode-draws 0] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from bayes_grpo._io import write_text_atomic
from bayes_grpo.dynamics.simulate import simulate_sde_runset

MODELS = {
    "llm-a": {"stiffness": 60.0, "plateau": 0.8, "initial_reward": 0.2, "noise_d": 1e-10, "model_size": 1.5e9},
    "llm-b": {"stiffness": 120.0, "plateau": 0.6, "initial_reward": 0.1, "noise_d": 1e-10, "model_size": 7e9},
}


def make_data(seed: int = 1):
    """12 runs (2 LLMs x G in {4, 16} x 3 seeds) x 1000 steps (logged at 0 .. 999), Adam-like
    momentum. The same rewards, bit for bit, as ``n_steps=999`` gave before ``n_steps`` counted
    logged steps (0 .. 999 then too), so the figures measured on it still hold."""
    return simulate_sde_runset(
        models=MODELS,
        group_sizes=(4, 16),
        learning_rates=(1e-3,),
        momentum=0.9,
        convention="ema",
        n_seeds=3,
        n_steps=1000,
        measurement_sd=0.1,
        measurement_g_exponent=1.0,
        random_seed=seed,
    )


def ode_model(ds, config=None, integrator: str = "rk4-scan"):
    """The same priors as the mechanistic iid model, mean trajectory by numerical integration.

    ``integrator="rk4-scan"``: classical RK4 over each unit step in one ``pytensor.scan``,
    vectorised over runs (the fastest straightforward choice: one RK4 step per optimizer step,
    no sub-steps). ``integrator="pm.ode"``: ``pymc.ode.DifferentialEquation`` (scipy ``odeint``
    with forward sensitivities), one solve per run, as PyMC's documentation shows.
    """
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

        if integrator == "rk4-scan":
            # The coefficients enter as non-sequences (a scan must not close over random variables).
            (es, _), _ = pytensor.scan(rk4, outputs_info=[r0 - p, pt.zeros_like(r0)], non_sequences=[mass, damp, k_eff], n_steps=n_steps)
            e_all = pt.concatenate([(r0 - p)[None, :], es], axis=0).T  # (run, step 0..n_steps)
        elif integrator == "pm.ode":
            from pymc.ode import DifferentialEquation

            def rhs(y, t, theta):
                return [y[1], -(theta[1] * y[1] + theta[2] * y[0]) / theta[0]]

            solver = DifferentialEquation(func=rhs, times=np.arange(1.0, n_steps + 1.0), n_states=2, n_theta=3, t0=0)
            e0 = r0 - p
            mass_r, damp_r, k_r = (pt.broadcast_to(x, e0.shape) for x in (mass, damp, k_eff))
            rows = []
            for i in range(len(data.run_ids)):
                sol = solver(y0=pt.stack([e0[i], pt.constant(0.0)]), theta=pt.stack([mass_r[i], damp_r[i], k_r[i]]))
                rows.append(pt.concatenate([e0[i][None], sol[:, 0]]))
            e_all = pt.stack(rows)  # (run, step 0..n_steps)
        else:
            raise ValueError(f"unknown integrator {integrator!r}")
        idx = data.obs_step_idx  # grid steps are 0..n_steps here
        mu = (p[:, None] + e_all)[data.obs_run, data.steps[idx].astype(int)]
        y = data.obs_y
        pm.Normal("y", mu=mu, sigma=sigma[data.obs_run], observed=y)
    return model


def time_gradient(model, repeats: int = 50, mode: str | None = None) -> tuple[float, float]:
    """(compile seconds, seconds per gradient evaluation) at the initial point.

    ``mode``: PyTensor compile mode (None: the default C backend; ``"NUMBA"``: the numba
    backend, as nutpie uses).
    """
    t0 = time.perf_counter()
    fn = model.compile_dlogp(mode=mode)
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
    parser.add_argument("--target-accept", type=float, default=0.95, help="NUTS target acceptance of the closed-form fit")
    parser.add_argument("--pm-ode-repeats", type=int, default=3, help="gradient evaluations timed for the pm.ode baseline (0: skip it)")
    parser.add_argument("--numba-gradient", action="store_true", help="also time both gradients with the numba backend (about 2 min of compilation)")
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
        model.fit(ds, draws=args.draws, tune=args.tune, chains=args.chains, sampler=args.sampler, random_seed=1, progressbar=False, target_accept=args.target_accept)
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
            "tune": args.tune,
            "target_accept": args.target_accept,
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
    if args.pm_ode_repeats > 0:
        pm_ode = ode_model(ds, integrator="pm.ode")
        pm_ode_compile, pm_ode_grad = time_gradient(pm_ode, repeats=args.pm_ode_repeats)
        out["per_gradient"] |= {"pm_ode_s": pm_ode_grad, "ratio_pm_ode_over_closed_form": pm_ode_grad / cf_grad, "pm_ode_compile_s": pm_ode_compile}
    if args.numba_gradient:
        cf_nc, cf_ng = time_gradient(cf_model, mode="NUMBA")
        ode_nc, ode_ng = time_gradient(ode, mode="NUMBA")
        out["per_gradient"] |= {"numba_closed_form_s": cf_ng, "numba_ode_s": ode_ng, "numba_ratio_ode_over_closed_form": ode_ng / cf_ng, "numba_closed_form_compile_s": cf_nc, "numba_ode_compile_s": ode_nc}
    print(json.dumps(out["per_gradient"], indent=1), flush=True)
    if "closed_form" in out and out["closed_form"]["gradient_evaluations_post_warmup"]:
        # Whole-fit ratio: what each ODE model would need for the same fit (same data, priors,
        # posterior geometry, chains, draws and tuning), from its measured compile time and cost per
        # gradient, against the closed-form fit's measured wall time. The gradient count is the
        # closed-form fit's post-warm-up count scaled to tune + draws (warm-up usually takes
        # longer trajectories, so this under-counts: the ratios are lower bounds).
        cf = out["closed_form"]
        n_grad = cf["gradient_evaluations_post_warmup"] * (args.tune + args.draws) / args.draws
        cores = min(args.chains, os.cpu_count() or 1)
        whole = {"gradient_evaluations_assumed": n_grad, "cores": cores}
        for name, comp, grad in (("rk4_scan", ode_compile, ode_grad), ("pm_ode", out["per_gradient"].get("pm_ode_compile_s"), out["per_gradient"].get("pm_ode_s"))):
            if grad is None:
                continue
            projected = comp + n_grad * grad / cores
            whole[f"{name}_projected_wall_s"] = projected
            whole[f"ratio_{name}_over_closed_form_fit"] = projected / cf["wall_s_including_build_and_compile"]
        out["whole_fit"] = whole
        print(json.dumps(whole, indent=1), flush=True)
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
        write_text_atomic(args.json, json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
