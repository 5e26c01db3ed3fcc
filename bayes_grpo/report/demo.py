"""The demo: the whole flow on the shipped example runs, from logs to ``report.html``.

    logs (data/tiny: real TRL runs of a tiny model) -> run set -> diagnostics
      -> fit (healthy Adam runs) -> G-invariance -> stability phase diagram
      -> prediction for one new setting -> report.html

Every stage is the public API that the CLI verbs call; the demo only chooses small, fast
settings (``fast=True``) or the defaults.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bayes_grpo.checks.base import counted

#: Example-data groups the demo fits (see data/README.md): G at fixed completions per step,
#: and the learning-rate and K_ref ladders (all AdamW, 128 completions per step).
FIT_GROUPS: tuple[str, ...] = ("g_fixed_completions", "lr_ladder", "k_ref_ladder")
#: Diagnostics that mark a run as outside the law's premises (left out of the fit, kept in the report).
EXCLUDING_MODES: tuple[str, ...] = ("instability",)
#: A run whose mean reward over its last 10% of logged steps is below this fraction of its
#: (smoothed) maximum rose and then collapsed: the damped-oscillator law does not describe it.
COLLAPSE_FRACTION: float = 0.5


@dataclass
class DemoSettings:
    """Sampler sizes of the demo (``fast`` for CI and notebooks).

    ``fit_draws`` is the fit's; ``draws`` the G-invariance fits'. With 500 fit draws the fit of
    the shipped runs missed R-hat 1.01 on the run-level initial-reward offsets in three seeds of
    three (1.013-1.019: Monte Carlo error of 2 x 500 draws); with 1000 it converged in both seeds
    tried (R-hat <= 1.005, bulk ESS >= 503), for about 40 s more.

    ``reward_bounds``: the fit's (``GRPODynamicsModel(reward_bounds=...)``). The example runs'
    reward is a success rate in [0, 1] (``data/README.md``: 1 for the right answer, else 0,
    averaged over the step's completions), and they end before their plateau: fitted without
    bounds their plateau p* was 3.44, which no 0-1 reward reaches.
    """

    fit_draws: int = 1000
    draws: int = 500
    tune: int = 500
    chains: int = 2
    smc_draws: int = 0  # SMC evidence as a third figure (0: bridge sampling + Savage-Dickey only)
    smc_chains: int = 2
    prior_scales: tuple[float, ...] = (0.5, 1.0, 2.0)
    seed: int = 0
    reward_bounds: tuple[float, float] | None = (0.0, 1.0)

    def fit(self, runs: Any) -> Any:
        """The mechanistic model fitted to ``runs`` with these sampler sizes, seed and reward bounds."""
        from bayes_grpo.model import GRPODynamicsModel

        model = GRPODynamicsModel(reward_bounds=self.reward_bounds)
        model.fit(
            runs,
            draws=self.fit_draws,
            tune=self.tune,
            chains=self.chains,
            random_seed=self.seed,
            progressbar=False,
        )
        return model

    @classmethod
    def fast(cls, seed: int = 0) -> DemoSettings:
        return cls(fit_draws=150, draws=150, tune=150, chains=2, smc_draws=0, smc_chains=2, prior_scales=(1.0,), seed=seed)


@dataclass
class DemoResult:
    out_dir: Path
    report: Path
    runs_file: Path
    posterior_file: Path
    fitted_runs: list[str]
    excluded_runs: dict[str, str]
    timings: dict[str, float] = field(default_factory=dict)
    headline: dict[str, Any] = field(default_factory=dict)
    #: The fit's own warnings shown at the top of the report, and what each section concludes
    #: (:func:`bayes_grpo.report.section_verdicts`): ``report --json``'s keys of the same name.
    posterior_warnings: list[str] = field(default_factory=list)
    sections: list[dict[str, Any]] = field(default_factory=list)
    #: The phase diagram's PNG (None when it drew no figure) and the saved prediction.
    phase_file: Path | None = None
    prediction_file: Path | None = None
    #: What the report's overview warns of the run set (:func:`bayes_grpo.report.overview_notes`):
    #: ``report --json``'s ``runset_notes``.
    runset_notes: dict[str, Any] = field(default_factory=dict)


def default_data_dir() -> Path:
    """``data/tiny`` of the source tree this package was installed from."""
    return Path(__file__).resolve().parents[2] / "data" / "tiny"


def _index_groups(data_dir: Path) -> dict[str, list[str]] | None:
    """``{group: [run ids]}`` from the data folder's ``index.json``; None when there is none."""
    index = data_dir / "index.json"
    if not index.exists():
        return None
    return json.loads(index.read_text())["groups"]


def _fit_candidates(groups: dict[str, list[str]] | None, run_ids: list[str]) -> list[str]:
    if groups is None:
        return run_ids
    wanted = {r for g in FIT_GROUPS for r in groups.get(g, [])}
    return [r for r in run_ids if r in wanted]


RUNS_FILE, POSTERIOR_FILE, PHASE_FILE, PREDICTION_FILE, REPORT_FILE = DEMO_OUTPUTS = (
    "runs.nc",
    "posterior.nc",
    "phase.png",
    "prediction.nc",
    "report.html",
)
"""The files :func:`run_demo` writes into its output folder (one name each, used there)."""


def flagged_by_diagnosis(diagnostics) -> dict[str, str]:
    """``{run: mode}`` of the runs a diagnosis in :data:`EXCLUDING_MODES` failed."""
    flagged: dict[str, str] = {}
    for res in diagnostics:
        if res.values.get("mode") in EXCLUDING_MODES and res.passed is False:
            flagged.setdefault(str(res.values.get("run")), res.values.get("mode"))
    return flagged


def flagged_text(flagged: dict[str, str]) -> str:
    """``{run: why}`` in words, ``run (why), run (why)``, or ``none``: the demo printed the
    dict as Python writes it (``flagged: {'g16_p8_lr0.001_k4_adamw_s0': 'instability', ...}``)."""
    return ", ".join(f"{run} ({why})" for run, why in flagged.items()) or "none"


def demo_fit_set(runs, flagged: dict[str, str], groups: dict[str, list[str]] | None, data_dir: Path):
    """The runs the demo fits, and ``{run: why}`` for the others.

    The candidates are the runs of :data:`FIT_GROUPS` (all runs without an index); of those,
    runs in ``flagged`` (diagnosed, ``{run: mode}``) and runs that collapse after rising are
    left out. Steps where no fitted run logged a reward are dropped.
    """
    run_ids = [str(r) for r in runs["run"].values]
    flagged = dict(flagged)
    for run_id in run_ids:
        if run_id not in flagged and _collapsed(runs, run_id):
            flagged[run_id] = f"collapse (final reward < {COLLAPSE_FRACTION:g} x its maximum)"
    candidates = _fit_candidates(groups, run_ids)
    fit_ids = [r for r in candidates if r not in flagged]
    if not fit_ids:
        raise ValueError(f"{data_dir}: no healthy run left to fit (flagged: {flagged_text(flagged)})")
    excluded = {r: f"diagnosed {flagged[r]}" for r in candidates if r in flagged}
    excluded |= {r: "not in the fitted groups " + "/".join(FIT_GROUPS) for r in run_ids if r not in candidates}
    fit_set = runs.sel(run=fit_ids).dropna("step", how="all", subset=["reward"])
    return fit_set, excluded


@dataclass
class ExampleFit:
    """Stages 1-3 of the demo: the example runs, their diagnoses and the model fitted to the healthy ones."""

    runs: Any
    diagnostics: list
    fit_set: Any
    excluded: dict[str, str]
    model: Any
    convergence: Any


def fit_example_runs(
    data_dir: str | Path | None = None,
    *,
    settings: DemoSettings | None = None,
    progress: Callable[[str], None] = print,
    stage: Callable[[str], None] = lambda name: None,
    n_stages: int = 3,
) -> ExampleFit:
    """Ingest the example runs, diagnose every run, fit the mechanistic model to the healthy ones.

    The demo's first three stages, and how the shipped posterior ``models/tiny.nc`` is made
    (``scripts/make_example_models.py``): the runs of :data:`FIT_GROUPS` that no diagnosis in
    :data:`EXCLUDING_MODES` flags and that do not collapse (:func:`demo_fit_set`), fitted with
    ``settings.chains x settings.fit_draws`` draws from seed ``settings.seed``.

    Parameters
    ----------
    data_dir
        Folder of run directories (default: the shipped ``data/tiny``).
    settings
        Sampler sizes and seed (default :class:`DemoSettings`).
    progress, stage
        Called with one line per stage, and with the stage's name when it ends.
    n_stages
        The stage count shown in the progress lines (``[1/n]``).
    """
    from bayes_grpo.diagnostics import diagnose
    from bayes_grpo.runset.ingest import load_runs

    settings = settings or DemoSettings()
    data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
    progress(f"[1/{n_stages}] ingest {data_dir}")
    runs = load_runs([data_dir])
    progress(f"      {counted(runs.sizes['run'], 'run')}")
    stage("ingest")

    progress(f"[2/{n_stages}] diagnose every run")
    diagnostics = diagnose(runs)
    flagged = flagged_by_diagnosis(diagnostics)
    progress(f"      flagged: {flagged_text(flagged)}")
    stage("diagnose")

    fit_set, excluded = demo_fit_set(runs, flagged, _index_groups(data_dir), data_dir)
    n_fit = fit_set.sizes["run"]
    progress(
        f"[3/{n_stages}] fit the mechanistic model to {counted(n_fit, 'run')} "
        f"({settings.chains} chains x {settings.fit_draws} draws)"
    )
    model = settings.fit(fit_set)
    convergence = model.convergence()
    progress(f"      convergence: {convergence.summary}")
    stage("fit")
    return ExampleFit(runs, diagnostics, fit_set, excluded, model, convergence)


def run_demo(
    out_dir: str | Path = "demo_output",
    *,
    data_dir: str | Path | None = None,
    fast: bool = False,
    seed: int = 0,
    progress: Callable[[str], None] = print,
    overwrite: bool = False,
) -> DemoResult:
    """Run the whole flow on the example data and write ``out_dir/report.html``.

    Parameters
    ----------
    out_dir
        Folder for the files named in :data:`DEMO_OUTPUTS` (``runs.nc``, ``posterior.nc``,
        ``phase.png``, ``prediction.nc``, ``report.html``).
    data_dir
        Folder of run directories (default: the shipped ``data/tiny``).
    fast
        Small sampler settings (about a minute or two on 2 cores) instead of the defaults.
    seed
        Seed of every random stage.
    progress
        Called with one line per stage.
    overwrite
        Replace those files where they exist; otherwise ``FileExistsError`` before any work
        (and for a file that appears while the demo runs).
    """
    from bayes_grpo._arguments import checked_seed
    from bayes_grpo._io import refuse_non_regular_file, write_atomic
    from bayes_grpo.checks.invariance import invariance_check
    from bayes_grpo.checks.stability import most_common_setting, phase_diagram
    from bayes_grpo.model.core import fitted_model_warnings
    from bayes_grpo.model.prepare import convention_without_momentum
    from bayes_grpo.predict.predict import predict_run, save_prediction
    from bayes_grpo.predict.result import prediction_result
    from bayes_grpo.report.build import ppc_results, write_report
    from bayes_grpo.runset import save_runset

    # before the ingest: -1 was refused as the fit's "sampler configuration 'random_seed'"
    checked_seed(seed, generator=False)
    settings = DemoSettings.fast(seed) if fast else DemoSettings(seed=seed)
    data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
    if not data_dir.exists():  # before making OUT: a wrong --data leaves no empty folder behind
        raise FileNotFoundError(f"{data_dir}: example data not found (regenerate with scripts/make_example_data.py)")
    out = Path(out_dir)
    for name in DEMO_OUTPUTS:  # a folder at an output's path, overwrite or not: before the work
        refuse_non_regular_file(out / name)
    held = [name for name in DEMO_OUTPUTS if (out / name).exists()]
    if held and not overwrite:
        raise FileExistsError(f"{out}: already holds {', '.join(held)}; pass overwrite=True to replace them")
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def stage(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = round(now - clock, 2)
        clock = now

    fitted = fit_example_runs(data_dir, settings=settings, progress=progress, stage=stage, n_stages=7)
    runs, diagnostics, fit_set, model = fitted.runs, fitted.diagnostics, fitted.fit_set, fitted.model
    runs_file = save_runset(runs, out / RUNS_FILE, overwrite=overwrite)
    posterior_file = model.save(out / POSTERIOR_FILE, overwrite=overwrite)
    progress(f"      wrote {runs_file} and {posterior_file}")
    run_ids = [str(r) for r in runs["run"].values]
    fit_ids = [str(r) for r in fit_set["run"].values]
    groups = _index_groups(data_dir)

    progress("[4/7] G-invariance (bridge sampling and Savage-Dickey)")
    inv_runs = fit_set.sel(run=[r for r in fit_ids if r in set((groups or {}).get("g_fixed_completions", []))] or fit_ids)
    invariance = invariance_check(
        inv_runs,
        reward_bounds=settings.reward_bounds,  # the fit's: H0 and H1 put plateaus above 1 without them
        draws=settings.draws,
        tune=settings.tune,
        chains=settings.chains,
        smc_draws=settings.smc_draws,
        smc_chains=settings.smc_chains,
        prior_scales=settings.prior_scales,
        random_seed=seed,
    )
    progress(f"      {invariance.summary}")
    stage("invariance")

    progress("[5/7] stability phase diagram")
    # the fitted runs' most common setting (the median momentum with the first run's convention
    # was one no run had on runs at two settings: a diagram with no run marked)
    common_momentum, common_convention = most_common_setting(fit_set)
    momentum = float("nan") if common_momentum is None else common_momentum
    convention = common_convention or str(convention_without_momentum([momentum], [""])[0])
    phase = phase_diagram(model, momentum=momentum, momentum_convention=convention)
    png = phase.figures and next(iter(phase.figures.values()))
    phase_file = None
    if png is not None:
        phase_file = write_atomic(
            out / PHASE_FILE,
            lambda tmp: png.savefig(tmp, format="png", dpi=110, bbox_inches="tight"),
            overwrite=overwrite,
        )
    stage("stability")

    progress("[6/7] predict a new setting")
    lrs = fit_set["learning_rate"].values
    new = {"learning_rate": float(np.nanmax(lrs)) * 1.5, "momentum": momentum, "momentum_convention": convention, "k_ref": 2.0, "group_size": 16.0}
    horizon = int(fit_set["step"].values.max())
    prediction = predict_run(model, steps=horizon, seed=seed, **new)
    prediction_file = save_prediction(prediction, out / PREDICTION_FILE, overwrite=overwrite)
    predicted = prediction_result(prediction, title=f"New setting: lr={new['learning_rate']:.3g}, K_ref=2, G=16")
    progress(f"      {predicted.summary}")
    stage("predict")

    progress("[7/7] write the report")
    # the posterior predictive checks of the fitted runs (a second or two), as `report` runs them
    ppc = ppc_results(model, seed=seed)
    # what `report posterior.nc` shows at the top of the same fit (an i.i.d. fit too confident)
    fit_warnings = fitted_model_warnings(model, posterior_file)
    verdicts: list[dict[str, Any]] = []
    runset_notes: dict[str, Any] = {}
    report = write_report(
        out / REPORT_FILE,
        title="bayes_grpo demo: tiny-model TRL runs",
        subtitle=f"{len(fit_ids)} of {counted(len(run_ids), 'run')} fitted; seed {seed}",
        model=model,
        runset=runs,
        ppc=ppc,
        invariance=invariance,
        stability=phase,
        predictions=predicted,
        diagnostics=diagnostics,
        excluded=fitted.excluded,
        posterior_warnings=fit_warnings,
        # the report's default sent the reader to `bayes-grpo compare` without saying the demo
        # leaves the comparison out, nor on which files
        absent_reasons={
            "comparison": f"the demo does not compare laws (four more fits): `bayes-grpo report "
            f"{out / POSTERIOR_FILE} --compare` adds this section for the fitted runs."
        },
        overwrite=overwrite,
        verdicts=verdicts,
        runset_notes=runset_notes,
    )
    stage("report")
    progress(f"      {report}  (total {sum(timings.values()):.0f} s)")
    headline = {
        "n_runs": len(run_ids),
        "fitted": len(fit_ids),
        "converged": fitted.convergence.passed,
        "invariance": invariance.values.get("verdict", invariance.summary),
        "prediction": predicted.values.get("regime"),
    }
    return DemoResult(
        out, report, runs_file, posterior_file, fit_ids, fitted.excluded, timings, headline, list(fit_warnings), verdicts,
        phase_file=phase_file, prediction_file=prediction_file, runset_notes=runset_notes,
    )


def _collapsed(runs: Any, run_id: str) -> bool:
    from bayes_grpo.metrics import moving_average
    from bayes_grpo.runset import run_frame

    reward = run_frame(runs, run_id)["reward"].to_numpy()
    reward = reward[np.isfinite(reward)]  # K_ref > 1 runs log the reward on some steps only
    if len(reward) < 10:
        return False
    tail = float(np.mean(reward[-max(len(reward) // 10, 1):]))
    peak = float(np.nanmax(moving_average(reward)))
    return peak > 0 and tail < COLLAPSE_FRACTION * peak


__all__ = ["run_demo", "fit_example_runs", "ExampleFit", "DemoSettings", "DemoResult", "default_data_dir"]
