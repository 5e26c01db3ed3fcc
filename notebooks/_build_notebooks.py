"""Write the example notebooks of ``notebooks/`` from the cell sources below.

The notebooks are kept in git with outputs stripped; this script is their single source.
Edit the cells here and run

    .venv/bin/python notebooks/_build_notebooks.py           # (re)write every notebook
    .venv/bin/python notebooks/_build_notebooks.py --check   # exit 1 if a notebook is stale

Every notebook reads ``BAYES_GRPO_FAST`` ("1": small sampler settings and small data, as in
CI, ``tests/test_notebooks.py``) and writes its files only to ``BAYES_GRPO_NB_OUT`` when set,
otherwise to a fresh temporary folder. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from bayes_grpo._io import write_text_atomic

HERE = Path(__file__).resolve().parent

#: First code cell of every notebook: fast switch, output folder, data folder.
SETUP = '''\
import os
import tempfile
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

%matplotlib inline

# BAYES_GRPO_FAST=1 (set by the test suite) switches to small sampler settings and small data.
FAST = os.environ.get("BAYES_GRPO_FAST", "0") == "1"
# Files go to BAYES_GRPO_NB_OUT when set, else to a fresh temporary folder.
OUT = Path(os.environ.get("BAYES_GRPO_NB_OUT") or tempfile.mkdtemp(prefix="bayes_grpo_nb_"))
OUT.mkdir(parents=True, exist_ok=True)
warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", category=UserWarning, module="pymc")
pd.set_option("display.width", 160, "display.max_columns", 30)
plt.rcParams["figure.max_open_warning"] = 0  # check results keep their figures for later display


def show(fig):
    """Show a figure in the notebook and close it (works whatever matplotlib backend is active)."""
    display(fig)
    plt.close(fig)


print(f"fast mode: {FAST}; outputs in {OUT}")'''

#: Finds the repository's shipped example runs (``data/tiny``) from the notebook's folder.
FIND_DATA = """\
ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "data" / "tiny").is_dir())
DATA = ROOT / "data" / "tiny"
print("example runs:", DATA)"""


def md(text: str):
    return nbformat.v4.new_markdown_cell(text.strip("\n"))


def code(text: str):
    return nbformat.v4.new_code_cell(text.strip("\n"))


# ----------------------------------------------------------------------------- 01 quickstart

QUICKSTART = [
    md("""
# 01 · Quickstart: from TRL logs to a report

GRPO's mean training reward `p(t)` follows, to a good approximation, a **stochastically forced
damped oscillator** (Predictable GRPO, arXiv 2606.30789):

$$M_\\mathrm{eff}\\,e'' + C_\\mathrm{eff}\\,e' + K_\\mathrm{eff}\\,e = \\sqrt{D/G}\\,\\xi(t),\\qquad e = p - p^*,$$

with `K_eff = a = eta K` (learning rate times the curvature of the reward landscape at the
plateau `p*`), `M_eff = (1 + mu)/2 + a L^2/2` and `C_eff = (1 - mu) - a L` for momentum `mu`
and off-policy lag `L = K_ref`. From `e(0) = R0 - p*`, `e'(0) = 0` the mean curve has three
phases: a slow start, a rapid rise, a plateau.

This notebook takes the shipped example logs (TRL `trainer_state.json` run folders of a tiny
GPT-2 trained with TRL's `GRPOTrainer` on CPU, see `data/README.md`) through the whole flow:

1. **ingest** the logs into one run set (`bayes_grpo.runset.ingest.load_runs`);
2. **fit** the hierarchical Bayesian model (`bayes_grpo.model.GRPODynamicsModel`);
3. read the **per-run summary** (plateau, `M_eff`, `C_eff`, `K_eff`, damping ratio `zeta`,
   noise `D`, `R^2`) and the **convergence** check;
4. write a self-contained **HTML report** (`bayes_grpo.report.write_report`).

The command-line equivalent is `bayes-grpo ingest data/tiny -o runs.nc`,
`bayes-grpo fit runs.nc -o my_fit.nc`, `bayes-grpo report my_fit.nc -o report.html`.
"""),
    code(SETUP),
    code(FIND_DATA),
    md("""
## 1. Ingest

`load_runs` finds every log under the given folders, reads TRL's per-step metrics, maps them to
canonical names (`reward`, `reward_std`, `frac_reward_zero_std`, `entropy`, `grad_norm`, ...) and
reads each run's hyperparameters (here from the runner's `bayes_grpo_run.json` next to the log).
The result is an `xarray.Dataset` with dims `(run, step)`; the hyperparameters are coordinates.
"""),
    code("""
from bayes_grpo.runset.ingest import load_runs, runset_summary

runs = load_runs([DATA])
print(runs.sizes)
runset_summary(runs)[["model", "group_size", "learning_rate", "momentum", "momentum_convention",
                      "k_ref", "n_steps", "reward_first", "reward_last"]]
"""),
    md("""
We fit the runs of the `g_fixed_completions` group (G = 4 x 32 prompts and G = 16 x 8 prompts,
three seeds each, the same number of completions per step; `data/README.md` explains the groups)
together with the learning-rate and `K_ref` ladders, leaving out runs that never learn
(mean reward over the last 10% of the run below 0.3: a curve without a rise carries no
information about the oscillator). Of these 12 runs that is the one at learning rate `4e-3`, so
11 are fitted; the `G = 4 x 8 prompts` runs, which stall too, are of the `g_fixed_prompts` group
and not among them (notebook 05 diagnoses why both fail). The demo and `models/tiny.nc` also
leave out the three runs `diagnose` flags as unstable and fit 8. In fast mode only the six
`g_fixed_completions` runs are fitted (all six learn), on every third logged step.
"""),
    code("""
import json

groups = json.loads((DATA / "index.json").read_text())["groups"]
chosen = groups["g_fixed_completions"] if FAST else sorted(
    set(groups["g_fixed_completions"]) | set(groups["lr_ladder"]) | set(groups["k_ref_ladder"])
)


def late_mean(y):
    # mean reward over the last 10% of a run's logged steps (runs differ in length)
    y = y[np.isfinite(y)]
    return float(np.mean(y[-max(3, len(y) // 10):]))


chosen = [r for r in chosen if late_mean(runs.reward.sel(run=r).values) > 0.3]  # runs that learn
runset = runs.sel(run=chosen)
if FAST:
    runset = runset.isel(step=slice(None, None, 3))
print(f"{runset.sizes['run']} runs x {runset.sizes['step']} logged steps")

fig, ax = plt.subplots(figsize=(8, 4))
for r in runset.run.values:
    g = int(runset.group_size.sel(run=r))
    ax.plot(runset.step, runset.reward.sel(run=r), lw=0.8, color="C0" if g == 4 else "C1",
            label=f"G = {g}")
by_label = dict(zip(*ax.get_legend_handles_labels()[::-1]))
ax.legend(by_label.values(), by_label.keys())
ax.set(xlabel="optimizer step", ylabel="mean training reward", title="example GRPO runs")
show(fig)
"""),
    md("""
## 2. Fit the hierarchical model

The default model is *mechanistic*: each LLM has a curvature `K`, and every run's
`(M_eff, C_eff, K_eff)` follows from `K` and that run's learning rate, momentum (Adam's
`beta1`, EMA convention) and `K_ref`, so the fit can later predict new hyperparameters.
The plateau `p*` is per LLM (every run of an LLM shares it), the initial reward per LLM with
run-level offsets, so runs at the same hyperparameters share their `p*`, `a`, `M_eff`, `C_eff`,
`K_eff` and `zeta` and differ only in their initial reward (and, across `G`, their noise); the noise is
`sigma^2 = D / G^alpha`. The example rewards are success rates: `reward_bounds=(0, 1)` keeps
`p*` and the initial reward inside `[0, 1]` (how `models/tiny.nc` is fitted); this fit is
unbounded, and its `p*` can land above 1 and its curves start below 0 (section 3). Sampling is NUTS (PyMC); pass `sampler="nutpie"` for nutpie.
"""),
    code("""
from bayes_grpo.model import GRPODynamicsModel

sampling = (dict(draws=150, tune=150, chains=2) if FAST else dict(draws=1000, tune=1000, chains=4))
model = GRPODynamicsModel(parameterisation="mechanistic", likelihood="iid")
idata = model.fit(runset, **sampling, random_seed=0, progressbar=not FAST)
print(f"sampled in {model.fit_seconds:.0f} s")
idata
"""),
    md("""
## 3. Summary and convergence

`run_summary()` gives, per run, posterior medians of the plateau `p*`, the gain `a`, the
oscillator coefficients and `zeta` (with its 90% interval), the noise, and three `R^2`: raw,
the **noise ceiling** (the best `R^2` any smooth curve could reach given the step-to-step noise)
and the `R^2` against a smoothed curve. A raw `R^2` close to the noise ceiling means the law
explains all the structure there is.
"""),
    code("""
summary = model.run_summary()
summary[["group_size", "learning_rate", "p_star", "a", "M_eff", "C_eff", "K_eff", "zeta",
         "zeta_lo", "zeta_hi", "r2_raw", "r2_noise_ceiling", "r2_smoothed"]].round(4)
"""),
    code("""
mean = model.mean_trajectories()
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
for ax, g in zip(axes, sorted(set(runset.group_size.values.tolist()))):
    for i, r in enumerate(runset.run.values[runset.group_size.values == g]):
        ax.plot(runset.step, runset.reward.sel(run=r), ".", ms=2, color=f"C{i}", alpha=0.5)
        ax.plot(mean.step, mean.sel(run=r), color=f"C{i}", lw=1.5)
    ax.set(title=f"G = {g:g}: data (dots) and posterior-mean trajectory", xlabel="optimizer step")
axes[0].set_ylabel("reward")
show(fig)
"""),
    code("""
conv = model.convergence()
print("converged:", conv.passed)
print(conv.summary)
conv.table
"""),
    md("""
How to read it: `r2_raw` close to `r2_noise_ceiling` means the law captures all the structure the
noise lets any smooth curve capture; a large gap means it misses some. `p_star` is the plateau
the fitted curve approaches: when it lies outside the observed reward range, the fit prefers a
slow rise that has not bent over within the data, and the plateau is an extrapolation. Check the
plot, the interval of `zeta` and the convergence check before trusting a number.
"""),
    md("""
With the fast settings (150 draws) R-hat and ESS may fall short; the check then says what to
change (more draws or tuning). Save the fit; `GRPODynamicsModel.load` rebuilds it without
refitting and refuses a file written under another configuration. Like the command line, the
writers refuse to replace an existing file unless told `overwrite=True` (here: so that a rerun of
the notebook into the same `BAYES_GRPO_NB_OUT` replaces its own files).
"""),
    code("""
path = model.save(OUT / "tiny_fit.nc", overwrite=True)  # a rerun replaces its own file
reloaded = GRPODynamicsModel.load(path)
print(path.name, f"{path.stat().st_size / 1e6:.1f} MB;", "same summary after reload:",
      np.allclose(reloaded.run_summary()["zeta"], summary["zeta"]))
"""),
    md("""
## 4. Report

`write_report` renders one HTML file (images embedded, no network) from the fitted model and
any check results; sections whose inputs are absent say so. Here we add the failure-mode
diagnostics of the fitted runs (notebook 05 explains them).
"""),
    code("""
from bayes_grpo.diagnostics import diagnose, verdict_matrix
from bayes_grpo.report import write_report

diagnostics = diagnose(runset, posterior=model)
display(verdict_matrix(diagnostics))
report = write_report(OUT / "report.html", model=model, diagnostics=diagnostics,
                      title="Example GRPO runs", subtitle="notebook 01_quickstart", overwrite=True)
print(f"report written: {report} ({report.stat().st_size / 1e3:.0f} kB)")
"""),
]

# ----------------------------------------------------------------------------- 02 invariance

INVARIANCE = [
    md("""
# 02 · Group-size invariance with Bayes factors

The reduced-order model says that the group size `G` enters only through the noise
temperature `D/G`: within one LLM the **mean trajectory** (plateau, initial reward, stiffness,
damping) is the same for every `G`, and only the fluctuations shrink as `1/G`. This is a
falsifiable prediction, tested here as a Bayesian model comparison:

* `H0`: `GRPODynamicsModel(invariance="shared")`, one trajectory per LLM for every `G`;
* `H1`: `GRPODynamicsModel(invariance="by_group")`, the same plus per-`(LLM, G)` offsets of
  plateau, initial reward, log stiffness and log damping with `Normal(0, group_offset_sigma)` priors.

`H0` is `H1` with every offset at zero, so the Bayes factor `BF01` can be computed by two
**independent methods** that must agree: bridge sampling of the two marginal likelihoods
(from NUTS draws of `H0` and `H1`), and the Savage–Dickey density ratio of the offsets at zero
(from the NUTS draws of `H1`). SMC evidence can be added as a third figure (`smc_draws > 0`);
with a few hundred particles it overstates `log BF01` by several nats on these models. A Bayes factor for a point null depends on
the alternative's prior width, so the check also reports it at 0.5x, 1x and 2x that width
(fast mode: 1x only). The noise exponent `alpha` in `sigma^2 = D / G^alpha` (theory 1) is read
from the posterior of the hypothesis the evidence favours.

We use simulated runs with known truth, at `G = 4` and `G = 16`: one set where the truth is
invariant, one where the plateau at `G = 16` is shifted.
"""),
    code(SETUP),
    code("""
from bayes_grpo.dynamics.simulate import simulate_sde_runset, truth_frame

llm = {"sim": {"stiffness": 40.0, "plateau": 0.7, "initial_reward": 0.2, "noise_d": 4e-6}}
sim = dict(
    models=llm, group_sizes=(4, 16), learning_rates=(1e-3,), momentum=0.9, convention="ema",
    k_refs=(1,), n_seeds=2 if FAST else 4, n_steps=150 if FAST else 300, log_every=3 if FAST else 1,
    measurement_sd=0.02, measurement_g_exponent=1.0,
)
invariant = simulate_sde_runset(**sim, random_seed=1)
shifted = simulate_sde_runset(**sim, group_effects={16: {"plateau": 0.08}}, random_seed=2)
truth_frame(shifted)[["group_size", "plateau", "initial_reward", "a", "zeta", "stationary_var"]]
"""),
    code("""
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
for ax, (name, ds) in zip(axes, [("invariant truth", invariant), ("plateau shifted at G = 16", shifted)]):
    for r in ds.run.values:
        g = int(ds.group_size.sel(run=r))
        ax.plot(ds.step, ds.reward.sel(run=r), lw=0.7, alpha=0.7, color="C0" if g == 4 else "C1")
        ax.plot(ds.step, ds.true_mean_reward.sel(run=r), lw=1.5, color="C0" if g == 4 else "C1")
    ax.set(title=name, xlabel="optimizer step")
axes[0].set_ylabel("reward (blue: G = 4, orange: G = 16)")
show(fig)
"""),
    md("""
## The check

`invariance_check` fits `H0` and `H1` (at each prior width) by NUTS, computes each marginal
likelihood by bridge sampling (with its Monte Carlo error) and the Savage–Dickey ratio from the
`H1` posterior of the offsets. The verdict needs `|log BF01| > log 3` by bridge sampling and no
contradiction from Savage–Dickey; with the i.i.d. likelihood (the default) a verdict of
`G`-dependence also needs residuals that are not autocorrelated, else it is "not determined".
"""),
    code("""
from bayes_grpo.checks.invariance import invariance_check

settings = dict(
    prior_scales=(1.0,) if FAST else (0.5, 1.0, 2.0),
    draws=200 if FAST else 1000,
    tune=200 if FAST else 1000,
)
res_invariant = invariance_check(invariant, random_seed=0, **settings)
print(res_invariant.summary)
res_invariant.table
"""),
    code("""
res_shifted = invariance_check(shifted, random_seed=1, **settings)
print(res_shifted.summary)
res_shifted.table
"""),
    md("""
On the shifted set the i.i.d. Bayes factors favour `G`-dependence decisively, yet the verdict is
"not determined": these SDE runs wander about their mean curve, so their residuals are
autocorrelated, and on `G`-invariant run sets with such residuals the i.i.d. Bayes factor calls
`G`-dependence far more often than its threshold promises. A run's wander then reads as an effect
of `G`. The check says so and names the remedy, `likelihood="state_space"`, which models the
wander (at a higher cost); on the invariant set the same warning only says the evidence for `H0`
is overstated.
"""),
    md("""
## Both methods side by side

Positive `log BF01` favours invariance (`H0`), negative favours a `G`-dependent trajectory. The
bars show the two methods at the reference prior width, bridge sampling with its Monte Carlo
error, on a symmetric log scale (a few nats and hundreds in one plot); the dashed lines mark
`|log BF| = log 3`, the evidence the verdict asks for.
Savage–Dickey needs the offsets' posterior density at zero. The check marks it "extrapolated"
when zero lies outside the region its draws cover; with eight offsets at once that can happen
without a violation (on the invariant set it can be marked so and still agree with bridge
sampling). When the offsets' posterior sits far from zero (a clear violation, the shifted set),
the extrapolated value is far off and only its sign is informative: there the table says the
methods do not agree (they differ in size, not in direction), which the verdict allows: it asks
of Savage–Dickey only that it not favour the other hypothesis.
"""),
    code("""
rows = []
for name, res in [("invariant truth", res_invariant), ("plateau shifted", res_shifted)]:
    v = res.values
    rows.append({"run set": name, "log BF01 (bridge)": v["log_bf01_bridge"], "+-": v["log_bf01_bridge_mc_error"],
                 "log BF01 (Savage-Dickey)": v["log_bf01_sd"], "methods agree": v["methods_agree"],
                 "alpha": f"{v['alpha_median']:.2f} [{v['alpha_lo']:.2f}, {v['alpha_hi']:.2f}]",
                 "verdict": {True: "invariant", False: "depends on G", None: "no verdict"}[res.passed]})
table = pd.DataFrame(rows).set_index("run set")
display(table)

fig, ax = plt.subplots(figsize=(7, 3.5))
x = np.arange(len(table))
ax.bar(x - 0.2, table["log BF01 (bridge)"], 0.4, yerr=table["+-"], label="bridge sampling")
ax.bar(x + 0.2, table["log BF01 (Savage-Dickey)"], 0.4, label="Savage-Dickey")
for y in (np.log(3), -np.log(3)):
    ax.axhline(y, color="grey", ls="--", lw=0.8)
ax.axhline(0, color="k", lw=0.8)
# symmetric log scale: linear within +-log 3, logarithmic beyond, so that a log BF of a few nats
# and one of hundreds both show, with the threshold lines apart
ax.set_yscale("symlog", linthresh=np.log(3))
ax.set_xticks(x, table.index)
ax.set_ylabel("log BF01  (> 0: invariant in G;\\nlinear within +-log 3, log beyond)")
ax.legend()
show(fig)
"""),
    md("""
## The noise exponent

The residual variance scales as `G^-alpha`; the simulation uses `alpha = 1` (measurement noise
with `measurement_g_exponent=1`, process noise `D / G`). The check reads `alpha` from the
hypothesis the verdict favours: `H1` when it says `G`-dependence (`H0`'s shared trajectory would
leave the difference in the residuals of one `G` and bias `alpha`), `H0` otherwise. On the
invariant set the interval covers 1. On the shifted set the verdict is "not determined", so
`alpha` is `H0`'s, with the plateau shift left in the `G = 16` residuals: it reads about 2.3, far
from 1 (the cell below prints it with its interval), and its interval is too narrow besides (the i.i.d. likelihood takes the process noise's slow wander
for independent residuals). Read it as "the noise falls with `G`"; for an interval to
trust, use `likelihood="state_space"`, which models the wander.
"""),
    code("""
for name, res in [("invariant truth", res_invariant), ("plateau shifted", res_shifted)]:
    v = res.values
    print(f"{name:16s} alpha = {v['alpha_median']:.2f}  90% interval [{v['alpha_lo']:.2f}, {v['alpha_hi']:.2f}]"
          f"  posterior under {v.get('alpha_from', 'H0')} (theory 1)")
print("G-invariance verdicts:", res_invariant.passed, res_shifted.passed)
"""),
    md("""
On real logs, run the same check on a run set with at least two group sizes per LLM
(`bayes-grpo invariance runs.nc`). The shipped `g_fixed_prompts` runs (`data/README.md`) are a
real violation: at `G = 4` the tiny task stalls because almost every group of 4 has zero reward
spread, so the *mean* update depends on `G`, not only its noise.
"""),
]


# ----------------------------------------------------------------------------- 03 bandit stability

BANDIT = [
    md("""
# 03 · The stability boundary on the softmax bandit

The linearised GRPO update with heavy-ball momentum `mu` and a gradient that lags by
`L = K_ref` steps is

$$e_{n+1} - e_n = \\mu (e_n - e_{n-1}) - a\\, e_{n-L},\\qquad a = \\eta K .$$

Two predictions of where it stops converging:

* **closed form** (the paper's): stable iff `C_eff = (1 - mu) - a L > 0`, i.e. `eta K K_ref < 1 - mu`;
* **exact** (the discrete recursion): stable iff every root of `z^(L-1)(z-1)(z-mu) + a` lies
  inside the unit circle. The closed form is exact at `L = 1` and conservative beyond.

A GRPO softmax bandit is an exact reduction of the model (`bayes_grpo.bandit`): we **measure its
stiffness `K` independently** (no curve fitting), **sweep `K_ref`** with many seeds in one batched
simulation, find where runs stop converging, and compare with both predictions.
"""),
    code(SETUP),
    md("""
## 1. Measure the stiffness `K`

Two independent routes: the Jacobian of the exact expected update at the fixed point `p*`
(autograd through a finite sum over the binomial distribution of successes; no simulation), and
a relaxation experiment (simulate from `p* +- 0.02` without lag or momentum and read `a` off
the decay of the seed-mean error).
"""),
    code("""
from bayes_grpo.bandit.experiments import measure_stiffness

bandit = dict(group_size=8, beta=1.0, p_ref=0.5, n_prompts=16)   # KL anchor -> interior p* < 1
jacobian = measure_stiffness(**bandit, method="jacobian")
relaxation = measure_stiffness(**bandit, method="relaxation", seeds=64 if FAST else 512)
K = jacobian.stiffness
print(f"p* = {jacobian.plateau:.4f}")
print(f"K (Jacobian)   = {jacobian.stiffness:.4f}")
print(f"K (relaxation) = {relaxation.stiffness:.4f} +- {relaxation.standard_error:.4f}")
"""),
    md("""
## 2. Predicted thresholds

For the setting `eta = 0.3`, heavy-ball `mu = 0.5`, the gain is `a = eta K`. The critical
`K_ref` is the first integer lag at which each criterion says "unstable".
"""),
    code("""
from bayes_grpo.dynamics.stability import closed_form_threshold, critical_k_ref, exact_threshold

eta, mu = 0.3, 0.5
a = eta * K
exact_k = int(critical_k_ref(a, mu, method="exact"))
closed_k = int(critical_k_ref(a, mu, method="closed_form"))
print(f"a = eta K = {a:.4f}; closed form (1 - mu)/a = {(1 - mu) / a:.2f}")
print(f"first unstable K_ref: exact {exact_k}, closed form {closed_k}")
lags = np.arange(1, 2 * exact_k + 1)
pd.DataFrame({"K_ref": lags, "a* closed form": closed_form_threshold(mu, lags),
              "a* exact": exact_threshold(mu, lags)}).set_index("K_ref").T.round(4)
"""),
    md("""
## 3. Sweep `K_ref`

One batched torch program runs every `(K_ref, seed)` pair (on a GPU unchanged with
`device="cuda"`). No PPO clipping here, so an unstable run's oscillation grows until the
bounded reward saturates it. A run has *not converged* when its deviation from `p*` over the
last 10% of steps is large and growing or saturated (`bayes_grpo.bandit.experiments.convergence_status`).
"""),
    code("""
from bayes_grpo.bandit.experiments import phase_diagram_figure, sweep_k_ref, threshold_check

k_refs = range(max(0, exact_k - 5), exact_k + 5) if FAST else range(0, 2 * exact_k + 2)
sweep = sweep_k_ref(k_refs, seeds=8 if FAST else 32, steps=1500 if FAST else 3000,
                    learning_rate=eta, momentum=mu, clip_eps=float("inf"), seed=7, progress=False,
                    **bandit)
threshold = threshold_check(sweep)
print(threshold.summary)
threshold.table.round(4)
"""),
    code("""
fig = phase_diagram_figure(sweep, threshold=threshold)
show(fig)
v = threshold.values
print(f"empirical threshold K_ref = {v['empirical_threshold_k_ref']:g}; exact {v['exact_threshold_k_ref']:g}; "
      f"closed form {v['closed_form_threshold_k_ref']:g}; within one lag of exact: {threshold.passed}")
"""),
    md("""
## 4. Phase diagram over learning rate and `K_ref`

`phase_diagram_from_draws` turns draws of `K` into posterior probabilities of instability (both
criteria) and of the oscillatory regime on a `(learning rate, K_ref)` grid. Here the draws
express the uncertainty of the relaxation measurement, `K ~ Normal(K_relax, se)`; with a fitted
posterior the same picture comes from `bayes_grpo.checks.stability.phase_diagram(model, ...)`.
The crosses are the settings of the sweep above.
"""),
    code("""
from bayes_grpo.checks.stability import phase_diagram_from_draws

rng = np.random.default_rng(0)
k_draws = rng.normal(relaxation.stiffness, relaxation.standard_error, size=2000)
swept = pd.DataFrame({"learning_rate": eta, "k_ref": list(k_refs)})
phase = phase_diagram_from_draws(k_draws, momentum=mu, momentum_convention="heavy_ball",
                                 learning_rates=np.geomspace(0.01, 4.0, 40), k_refs=np.arange(0, 25),
                                 observed=swept, label="softmax bandit, K measured by relaxation")
print(phase.summary)
show(phase.figures["phase diagram"])
phase.table.loc[[1, 2, 4, 8, 16]].round(4)
"""),
]


# ----------------------------------------------------------------------------- 04 predict and forecast

PREDICT = [
    md("""
# 04 · Predicting new hyperparameters and forecasting a run in progress

Two questions a practitioner asks before and during training:

1. **What will a run with these new hyperparameters look like?** The mechanistic model ties
   every run's oscillator to the LLM's curvature `K` and the run's own learning rate, momentum
   and `K_ref`: `a = eta_eff K`, `M_eff = (1 + mu)/2 + a L^2/2`, `C_eff = (1 - mu) - a L`,
   `K_eff = a`. A posterior of `K` fitted on some settings therefore gives a posterior predictive
   trajectory, with bands, for a setting never run (`bayes_grpo.predict.predict.predict_run`),
   and whether that setting is stable by both criteria.
2. **Where is this run going?** From the first steps of a run in progress and a prior from the
   fitted population (`prior_from_posterior`), `forecast_run` gives the rest of the curve with
   bands, the time to 90/95/99% of the rise and a step at which further gains become negligible.

We use simulated runs with known truth so that every prediction can be checked.
"""),
    code(SETUP),
    md("""
## 1. Fit on two learning rates

One LLM with curvature `K = 10`, Adam-style momentum `beta1 = 0.9` (EMA convention), `G = 8`,
learning rates `1e-3` and `2e-3`. Two runs are held out as the truth to score against: one at
the new learning rate `4e-3` and one at `5e-4`. With these numbers the fitted settings are
overdamped (`zeta` about 1.6 and 1.1) while `4e-3` is underdamped (`zeta` about 0.8): the
prediction extrapolates into a regime the fit never saw. The run at `5e-4` rises slowly (time
constant `C_eff / K_eff` of about 200 steps); it is the "run in progress" of section 3.
"""),
    code("""
from bayes_grpo.dynamics.simulate import simulate_sde_runset, truth_frame

llm = {"sim": {"stiffness": 10.0, "plateau": 0.75, "initial_reward": 0.15, "noise_d": 2e-6}}
common = dict(models=llm, group_sizes=(8,), momentum=0.9, convention="ema", k_refs=(1,),
              n_steps=300, log_every=3 if FAST else 1, measurement_sd=0.02)
train = simulate_sde_runset(**common, learning_rates=(1e-3, 2e-3), n_seeds=2 if FAST else 3, random_seed=0)
held_out = simulate_sde_runset(**common, learning_rates=(5e-4, 4e-3), n_seeds=1, random_seed=99)
pd.concat([truth_frame(train), truth_frame(held_out)])[["learning_rate", "a", "M_eff", "C_eff", "K_eff", "zeta", "regime"]]
"""),
    code("""
from bayes_grpo.model import GRPODynamicsModel

sampling = dict(draws=150, tune=150, chains=2) if FAST else dict(draws=1000, tune=1000, chains=4)
model = GRPODynamicsModel(parameterisation="mechanistic")
model.fit(train, **sampling, random_seed=1, progressbar=not FAST)
print(model.convergence().summary)
k_post = model.idata.posterior["log_stiffness"].values.ravel()
print(f"posterior K: median {np.exp(np.median(k_post)):.2f}, 90% interval "
      f"[{np.exp(np.quantile(k_post, 0.05)):.2f}, {np.exp(np.quantile(k_post, 0.95)):.2f}] (truth 10)")
"""),
    md("""
Compare the interval of `K` with the truth. The runs were simulated from the SDE, whose
fluctuations around the mean curve are autocorrelated; the fast `iid` likelihood treats them as
independent noise, so its intervals can be too narrow (with the full settings here the 90%
interval of `K` can miss 10). `GRPODynamicsModel(likelihood="state_space")` uses the exact
Kalman-filter likelihood of the SDE instead, at a higher cost.
"""),
    md("""
## 2. Predict the new setting

`predict_run` pushes every posterior draw through the law at the new setting (the exact
discrete recursion of the lagged update, where it is defined as here; `law="continuous"` takes
the closed-form second-order expansion): bands for the **mean trajectory** (parameter
uncertainty plus the law's misfit on the fit's own runs, `discrepancy=False` to leave it out)
and for the **logged reward** (mean plus noise), the regime probabilities, the stability of the
setting, and milestones.
"""),
    code("""
from bayes_grpo.predict.forecast import coverage, forecast_band
from bayes_grpo.predict.predict import plot_prediction, predict_run

new = dict(learning_rate=4e-3, momentum=0.9, momentum_convention="ema", k_ref=1, group_size=8)
pred = predict_run(model, **new, steps=300)
t = held_out.step.values.astype(float)
run = str(held_out.run.values[held_out.learning_rate.values == 4e-3][0])
y = held_out.reward.sel(run=run).values
true_mean = held_out.true_mean_reward.sel(run=run).values
lo, hi = forecast_band(pred, t, kind="obs")
print(f"regime: {pred.attrs['regime']} (probability {pred.attrs['regime_prob']:.2f}); "
      f"P(unstable) closed form {pred.attrs['prob_unstable_closed_form']:.3f}, exact {pred.attrs['prob_unstable_exact']:.3f}")
print(f"held-out run inside the 90% band of the logged reward: {coverage(y, lo, hi):.0%} of its steps")
fig = plot_prediction(pred, observed=(t, y), truth=(t, true_mean), title="prediction at learning rate 4e-3 (never fitted)")
show(fig)
"""),
    md("""
The same call answers "is this setting safe?", by both criteria. At `K_ref = 30` the
closed-form damping `C_eff = (1 - mu) - a L` is negative, but the exact discrete recursion is
still stable: the closed form is conservative beyond `L = 1` (notebook 03). At `K_ref = 50`
both say unstable.
"""),
    code("""
for lag in (30, 50):
    risky = predict_run(model, **(new | {"k_ref": lag}), steps=300)
    print(f"K_ref = {lag}: P(unstable) closed form {risky.attrs['prob_unstable_closed_form']:.2f}, "
          f"exact {risky.attrs['prob_unstable_exact']:.2f}")
"""),
    md("""
## 3. Forecast a run in progress

Now pretend the held-out run at learning rate `5e-4` is still training and we have seen its
first 25% of steps, most of them in the slow start. The prior for this run comes from the fitted
posterior at its hyperparameters; the run's own steps update it (Laplace approximation plus
Pareto-smoothed importance sampling: the Pareto `k` says when not to trust the result; where it
stays above 0.7, a Metropolis ensemble started from the weighted draws may refine them, and the
line below then names that sampler instead of a `k`). For comparison, the same forecast with a
weak prior that only knows the data's scale.

The stop step is the first step after which the expected remaining gain stays below 1% of the
rise (`stop_threshold` sets another gain). This run rises slowly (time constant about 200
steps): by the truth it still has about a fifth of its rise to gain at step 300, the end of the
horizon, so a forecast that reads it well gives no stop step within the horizon (a longer
horizon would find one).
"""),
    code("""
from bayes_grpo.predict import forecast_run, prior_from_posterior

slow = new | {"learning_rate": 5e-4}
run = str(held_out.run.values[held_out.learning_rate.values == 5e-4][0])
y = held_out.reward.sel(run=run).values
true_mean = held_out.true_mean_reward.sel(run=run).values
seen = t <= 75


def stop_text(fc):
    stop = fc.attrs["stop_step"]  # NaN: the gain does not fall below the threshold within the horizon
    return f"{stop:g}" if np.isfinite(stop) else "none within the horizon"


def pareto_text(fc):
    k = fc.attrs["pareto_k"]  # NaN: importance sampling fell short and a Metropolis ensemble drew instead
    return f"Pareto k {k:.2f}" if np.isfinite(k) else f"Pareto k n/a (sampler: {fc.attrs['sampler']})"


prior = prior_from_posterior(model, **slow)
horizon = np.arange(0, 301)
with_prior = forecast_run(t[seen], y[seen], horizon, prior=prior)
weak = forecast_run(t[seen], y[seen], horizon)

fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
for ax, (name, fc) in zip(axes, [("prior from the fitted posterior", with_prior), ("weak prior", weak)]):
    plot_prediction(fc, observed=(t, y), truth=(t, true_mean), title=f"forecast from step 75: {name}", ax=ax)
    lo, hi = forecast_band(fc, t[~seen], kind="obs")
    print(f"{name:32s} coverage of the unseen steps {coverage(y[~seen], lo, hi):.0%}, "
          f"mean band width {np.mean(hi - lo):.3f}, {pareto_text(fc)}, "
          f"stop step {stop_text(fc)}")
show(fig)
"""),
    md("""
`RunForecaster` keeps a forecast up to date as steps arrive (each update refits on all steps seen
so far, warm-started; with the default state-space likelihood a fraction of a second to a few
seconds of CPU, growing with the steps seen; `likelihood="iid"` is several times faster):
"""),
    code("""
from bayes_grpo.predict import RunForecaster

forecaster = RunForecaster(prior, horizon_steps=horizon)
for upto in (30, 60, 120, 240):
    part = t <= upto
    forecaster.update(t[part], y[part])
    fc = forecaster.forecast()
    lo, hi = forecast_band(fc, t, kind="mean")
    print(f"seen up to step {upto:3d}: plateau {float(fc['param_plateau'].median()):.3f}, "
          f"regime {fc.attrs['regime']}, stop step {stop_text(fc)}, mean-band width at step 300 {hi[-1] - lo[-1]:.3f}")
pd.DataFrame(forecaster.history)
"""),
]


# ----------------------------------------------------------------------------- 05 diagnostics

DIAGNOSTICS = [
    md("""
# 05 · Failure-mode diagnostics

A reward curve alone conflates several ways a GRPO run goes wrong. The side quantities GRPO
logs (TRL names) separate them; `bayes_grpo.diagnostics` checks four modes, each returning a
verdict (detected / not detected / not assessable), an onset step, a strength with an interval,
the evidence, and a figure:

| mode | what it looks for | logged quantities |
|---|---|---|
| `reward_hacking` | training reward keeps rising while evaluation reward saturates or falls (train-eval decoupling) | `reward`, evaluation reward |
| `advantage_degeneracy` | groups whose rewards are all equal carry no advantage: zero-spread share beyond what the mean reward implies | `frac_reward_zero_std`, `reward_std` |
| `policy_concentration` | entropy collapses while the reward is still rising | `entropy`, `reward` |
| `instability` | growing `grad_norm` / importance ratios / `clip_ratio`, a real oscillation, negative damping | `grad_norm`, `clip_ratio`, fit of the reward |

We run them on built cases (simulated GRPO logs made to show one mode each, with a healthy
control), then on real runs from the shipped example data.
"""),
    code(SETUP.replace("import numpy as np\n", "")),  # this notebook needs no NumPy
    code(FIND_DATA),
    md("""
## 1. Built cases

`bayes_grpo.diagnostics.cases.simulated_case` simulates per-group GRPO logs around a
damped-oscillator mean curve, with the side quantities and a periodic evaluation reward, and
records which modes each case must show. `verdict_matrix` writes the verdicts `detected`, `-`
(not detected) and `n/a` (not assessable: the quantities the mode reads are not logged).
"""),
    code("""
from bayes_grpo.diagnostics import diagnose, diagnosis_table, verdict_matrix
from bayes_grpo.diagnostics.cases import CASES, simulated_case
from bayes_grpo.runset import concat_runsets

names = ["healthy", "reward_hacking", "advantage_degeneracy", "policy_concentration",
         "instability_growth", "instability_oscillation"]
if not FAST:
    names += ["healthy_noisy", "reward_hacking_mild", "policy_concentration_mild", "instability_oscillation_mild"]
cases = concat_runsets([simulated_case(n, seed=i) for i, n in enumerate(names)])
results = diagnose(cases)
matrix = verdict_matrix(results)
matrix["built to show"] = [", ".join(sorted(CASES[r])) or "(healthy)" for r in matrix.index]
matrix
"""),
    code("""
table = diagnosis_table(results).reset_index()
table["expected"] = [m in CASES[r] for r, m in zip(table["run"], table["mode"])]
table["detected"] = table["verdict"] == "detected"
assessed = table[table["verdict"] != "not assessable"]
agree = int((assessed["expected"] == assessed["detected"]).sum())
print(f"verdicts matching the construction: {agree} of {len(assessed)} assessed (run, mode) pairs")
table[table["detected"]][["run", "mode", "onset_step", "strength", "lower", "upper", "strength_of"]].round(3)
"""),
    md("""
Each result carries its evidence in words and a figure. One per mode:
"""),
    code("""
by_key = {(r.values.get("run"), r.values.get("mode")): r for r in results}
for run, mode in [("reward_hacking", "reward_hacking"), ("advantage_degeneracy", "advantage_degeneracy"),
                  ("policy_concentration", "policy_concentration"), ("instability_oscillation", "instability")]:
    res = by_key[(run, mode)]
    print(f"[{mode}] {res.summary}")
    for fig in res.figures.values():
        show(fig)
"""),
    md("""
## 2. Real runs

Three of the shipped example runs (`data/README.md`): one that learns (`G = 16`, learning rate
`1e-3`, final reward about 0.9); a `G = 4 x 8 prompts` run that stalls (on this task a random
policy is almost never right, so a group of 4 nearly always has zero reward spread and carries no
advantage); and the largest learning rate (`4e-3`), whose smoothed reward rises to about 0.2
(single steps up to 0.43) and then falls back to 0 while the entropy collapses. On real logs the
verdicts are findings to read with their evidence sentences, not ground truth: the run that
learns is flagged too, its zero-spread share rising once most groups are all right (0.72 in the
last window against 0.34 by the binomial expectation) and its entropy halving while the reward
has covered 11% of its way to 0.922, its highest (smoothed) logged level. `reward_hacking` is
`n/a` on all three: the example logs hold no evaluation reward to compare the training reward
with (its summary names the setting that would compare it with a logged reward component).
"""),
    code("""
from bayes_grpo.runset.ingest import load_runs

chosen = ["g16_p8_lr0.001_k1_adamw_s0", "g4_p8_lr0.001_k1_adamw_s1", "g16_p8_lr0.004_k1_adamw_s0"]
real = load_runs([DATA / r for r in chosen])
real_results = diagnose(real)
verdict_matrix(real_results)
"""),
    code("""
for res in real_results:
    if res.passed is False:
        print(f"[{res.values['run']} / {res.values['mode']}] {res.summary}")
fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
for ax, var, label in zip(axes, ["reward", "frac_reward_zero_std", "entropy"],
                          ["mean reward", "share of zero-spread groups", "entropy"]):
    for r in real.run.values:
        ax.plot(real.step, real[var].sel(run=r), lw=0.8, label=str(r))
    ax.set(title=label, xlabel="optimizer step")
axes[0].legend(fontsize=7)
show(fig)
for run in chosen:
    found = [r.values["mode"] for r in real_results if r.values["run"] == run and r.passed is False]
    print(f"{run}: {', '.join(found) or 'nothing detected'}")
"""),
]


NOTEBOOKS: dict[str, list] = {
    "01_quickstart.ipynb": QUICKSTART,
    "02_group_size_invariance.ipynb": INVARIANCE,
    "03_bandit_stability.ipynb": BANDIT,
    "04_predict_and_forecast.ipynb": PREDICT,
    "05_failure_mode_diagnostics.ipynb": DIAGNOSTICS,
}


def build(cells: list) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata = {
        "kernelspec": {
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
            "name": "python3",
        },
        "language_info": {"name": "python"},
    }
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:02d}"
    nbformat.validate(nb)
    return nb


def render(name: str) -> str:
    return nbformat.writes(build(NOTEBOOKS[name])) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--check", action="store_true", help="do not write; exit 1 if any notebook differs"
    )
    args = parser.parse_args(argv)
    stale = []
    for name in NOTEBOOKS:
        path = HERE / name
        text = render(name)
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            write_text_atomic(path, text)
            print(f"wrote {path}")
    if stale:
        print(
            "stale notebooks (run notebooks/_build_notebooks.py):",
            ", ".join(stale),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
