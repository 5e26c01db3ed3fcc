"""Turn a run set into the arrays the PyMC model needs (pure, no PyMC).

Everything the builder reads about the data is computed here: per-LLM reward scaling,
index maps (run -> model, run -> (model, G) group), the resolved hyperparameters of each
run, the observed entries (flattened, so ragged runs and missing steps are masked rather
than dropped), and the data-derived centres of the priors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from bayes_grpo.constants import EMA, HEAVY_BALL, MOMENTUM_CONVENTIONS, RUN_DIM, STEP_DIM
from bayes_grpo.dynamics.coefficients import effective_step
from bayes_grpo.dynamics.trajectory import starts_late
from bayes_grpo.model.config import DEFAULT_RANGES, measurement_g_exponent, setting_in_range
from bayes_grpo.runset import REWARD_VAR, RunSetError, validate_runset
from bayes_grpo.runset.names import LOGGED_LR_VAR
from bayes_grpo.runset.schema import UNKNOWN_MODEL, group_size_text, model_text, readable_group_size
from bayes_grpo.runset.thin import thinning_note

#: Coordinates the mechanistic parameterisation needs for every run.
MECHANISTIC_COORDS: tuple[str, ...] = ("learning_rate", "momentum", "momentum_convention", "k_ref")


def run_llm_names(ds: xr.Dataset) -> np.ndarray:
    """``(n_runs,)`` each run's LLM as the fit names it: the ``model`` coordinate, runs without
    one the LLM :data:`UNKNOWN_MODEL`."""
    return np.array([model_text(m) for m in ds["model"].values], dtype=object)

#: Fraction of a run averaged for the early / late reward guesses that centre the priors.
EDGE_FRACTION: float = 0.1


@dataclass
class ModelData:
    """Arrays derived from a run set, in the order the PyMC model uses them.

    Shapes: ``n_runs`` runs, ``n_models`` LLMs, ``n_groups`` (model, G) pairs, ``n_obs``
    observed (finite) rewards.
    """

    run_ids: list[str]
    models: list[str]
    groups: list[str]
    model_idx: np.ndarray  # (n_runs,) int
    group_idx: np.ndarray  # (n_runs,) int
    group_model_idx: np.ndarray  # (n_groups,) int
    group_g: np.ndarray  # (n_groups,) float, G of each group (NaN unknown)
    steps: np.ndarray  # (n_steps,) float, optimizer steps of the grid
    reward: np.ndarray  # (n_runs, n_steps) reward units, NaN where missing
    obs_run: np.ndarray  # (n_obs,) int
    obs_step_idx: np.ndarray  # (n_obs,) int
    obs_t: np.ndarray  # (n_obs,) float, optimizer step of each observation
    obs_y: np.ndarray  # (n_obs,) standardised reward
    loc: np.ndarray  # (n_models,) reward mean per model
    scale: np.ndarray  # (n_models,) reward sd per model
    run_length: np.ndarray  # (n_models,) largest observed step per model
    learning_rate: np.ndarray  # (n_runs,)
    momentum: np.ndarray  # (n_runs,)
    momentum_convention: list[str]
    k_ref: np.ndarray  # (n_runs,)
    group_size: np.ndarray  # (n_runs,) NaN when unknown
    eta_eff: np.ndarray  # (n_runs,) heavy-ball-equivalent step
    early: np.ndarray  # (n_models,) standardised early reward
    late: np.ndarray  # (n_models,) standardised late reward
    noise_guess: np.ndarray  # (n_models,) standardised per-step noise from first differences
    log_size: np.ndarray  # (n_models,) log model_size (NaN when unknown)
    notes: list[str] = field(default_factory=list)
    # (n_runs, n_steps) mean rate multiplier lr / learning_rate of each grid interval
    # (runset.clock.interval_multipliers; 1 for a run at a constant rate), or None: every run
    # is fitted with the constant-rate law (no run on a schedule, or the schedule not followed)
    lr_multiplier: np.ndarray | None = None

    @property
    def n_runs(self) -> int:
        return len(self.run_ids)

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def n_groups(self) -> int:
        return len(self.groups)

    @property
    def offset_groups(self) -> list[str]:
        """The groups that get ``H1`` offsets under ``invariance="by_group"``
        (:func:`has_group_offsets`), in the order of :attr:`groups`."""
        keep = has_group_offsets(self.group_model_idx, self.group_g)
        return [g for g, k in zip(self.groups, keep) if k]


def group_label(model: str, group_size: float) -> str:
    """Label of a (model, G) group, e.g. ``"qwen|G=8"`` (``G=?`` when unknown)."""
    return f"{model}|G={group_size_text(group_size)}"


def has_group_offsets(group_model_idx: np.ndarray, group_g: np.ndarray) -> np.ndarray:
    """Which (model, G) groups get ``H1`` offsets: those of an LLM at two or more known G.

    ``group_model_idx`` [group] (each group's LLM), ``group_g`` [group] (its G, NaN unknown);
    returns a bool array [group]. An LLM run at one G only, or with unknown G only, carries
    no evidence for or against G-invariance: offsets of its groups only widened the prior of
    its own trajectory under ``H1``, which moved the joint Bayes factor by an Occam factor
    (+0.2 nats at offset sd 0.5, +1.5 at 2, on a toy model) with nothing tested. Such an LLM's
    groups stay on its trajectory under ``H1`` as under ``H0``. The runs of unknown G of an LLM
    at two or more known G keep their group's offsets (``"model|G=?"``).
    """
    idx = np.asarray(group_model_idx, dtype=int)
    g = np.asarray(group_g, dtype=float)
    n_known = np.array([np.unique(g[(idx == m) & np.isfinite(g)]).size for m in idx], dtype=int)
    return n_known >= 2


def group_model(label: str) -> str:
    """The LLM of a (model, G) group label (:func:`group_label`): ``"qwen|G=8"`` -> ``"qwen"``."""
    return str(label).rsplit("|G=", 1)[0]


def _resolve(ds: xr.Dataset, name: str, defaults: dict[str, Any]) -> np.ndarray:
    """The runs' ``name`` with the unknown ones (NaN; ``""`` for the momentum convention) set to
    ``defaults[name]`` where it is given; still unknown where it is not."""
    values = ds[name].values
    if name == "momentum_convention":
        out = np.array([str(v) for v in values], dtype=object)
        missing = out == ""
    else:
        out = np.asarray(values, dtype=float).copy()
        infinite = np.isinf(out)
        if infinite.any():
            # given, but no setting: neither unknown (a default would replace it) nor usable
            bad = [f"{r} ({v:g})" for r, v in zip(ds[RUN_DIM].values, out) if np.isinf(v)]
            raise RunSetError(f"invalid {name} for runs {bad}: not a finite number")
        missing = np.isnan(out)
    default = defaults.get(name)
    if missing.any() and default is not None:
        out[missing] = default
    return out


def _refuse_unknown(ds: xr.Dataset, unknown: dict[str, np.ndarray]) -> None:
    """Refuse, in one error, every mechanistic setting some run still lacks (``{name: (n_runs,)
    mask}``, in :data:`MECHANISTIC_COORDS` order); nothing when none does. A run set of CSV
    exports without any of them was refused for its learning rate, then, given that default,
    for its momentum, and so on: four tries to learn the four `--default` it needed."""
    missing = {name: m for name, m in unknown.items() if m.any()}
    if not missing:
        return
    runs = ds[RUN_DIM].values
    if len(missing) == 1:
        ((name, m),) = missing.items()
        raise RunSetError(
            f"the mechanistic parameterisation needs {name!r} for every run; unknown for runs "
            f"{[str(r) for r in runs[m]]}. Set it in the run set, give a default with model_config="
            f"{{'hyperparameter_defaults': {{'{name}': ...}}}} (CLI: --default {name}=VALUE), "
            "or use parameterisation='phenomenological' (CLI: --parameterisation phenomenological)"
        )
    each = "; ".join(f"{name} for runs {[str(r) for r in runs[m]]}" for name, m in missing.items())
    flags = " ".join(f"--default {name}=VALUE" for name in missing)
    given = ", ".join(f"'{name}': ..." for name in missing)
    raise RunSetError(
        f"the mechanistic parameterisation needs {', '.join(repr(n) for n in missing)} for every run; unknown: "
        f"{each}. Set them in the run set, give defaults with model_config={{'hyperparameter_defaults': "
        f"{{{given}}}}} (CLI: {flags}), or use parameterisation='phenomenological' (CLI: --parameterisation "
        "phenomenological)"
    )


def _unknown(ds: xr.Dataset, name: str) -> np.ndarray:
    """Runs whose ``name`` the run set does not know (NaN; ``""`` for the momentum convention)."""
    values = ds[name].values
    if name == "momentum_convention":
        return np.array([str(v) for v in values], dtype=object) == ""
    return np.isnan(np.asarray(values, dtype=float))


def default_settings_notes(ds: xr.Dataset, defaults: dict[str, Any], parameterisation: str, *, momentum) -> list[str]:
    """The notes on the ``hyperparameter_defaults`` (``fit --default``) of a fit of ``ds``.

    Which runs took which default (the tables show the value as if logged), and, for the
    phenomenological form, the defaults it does not use at all (it has no learning rate,
    momentum or ``K_ref``: only ``group_size``, the G of the noise). A default no run needed
    is not named. ``momentum``: ``(n_runs,)`` resolved, for the convention, which a run at
    momentum 0 does not need (:func:`convention_without_momentum`).
    """
    mech = parameterisation == "mechanistic"
    runs = np.array([str(r) for r in ds[RUN_DIM].values], dtype=object)
    taken, unused = [], []
    for name, value in defaults.items():
        if value is None or name not in ds.coords:
            continue
        shown = f"{value:g}" if isinstance(value, int | float) else str(value)
        if not mech and name in MECHANISTIC_COORDS:
            unused.append(f"{name}={shown}")
            continue
        missing = _unknown(ds, name)
        if name == "momentum_convention":
            missing &= np.asarray(momentum, dtype=float) != 0.0
        if missing.any():
            taken.append(f"{name}={shown} for runs {runs[missing].tolist()}")
    notes = []
    if taken:
        notes.append(
            "settings the run set does not have, taken from the fit's hyperparameter_defaults "
            f"(fit --default): {'; '.join(taken)}"
        )
    if unused:
        notes.append(
            f"hyperparameter_defaults {', '.join(unused)} not used: the phenomenological form fits each "
            "LLM's damping ratio and frequency, free of a run's learning rate, momentum and K_ref "
            "(of the defaults it uses only group_size); they fill no run"
        )
    return notes


def convention_without_momentum(momentum, convention) -> np.ndarray:
    """``convention`` with the unknown ones (``""``) of runs without momentum set to heavy ball.

    At ``mu = 0`` the conventions coincide (EMA's ``eta_eff = eta (1 - beta1) = eta``), so such a
    run needs none; ingest leaves it unknown when momentum is only logged as a metric.
    ``momentum``, ``convention``: ``(n_runs,)``.
    """
    conv = np.asarray(convention, dtype=object).copy()
    conv[(conv == "") & (np.asarray(momentum, dtype=float) == 0.0)] = HEAVY_BALL
    return conv


def mixed_optimizer_notes(run_ids: list[str], model_idx: np.ndarray, models: list[str], convention) -> list[str]:
    """One note per LLM whose runs were trained with both momentum conventions, i.e. two
    optimizers: ``ema`` (Adam's beta1) and ``heavy_ball`` (SGD), naming the runs of each.

    The mechanistic form gives an LLM one curvature ``K``; under Adam the per-coordinate
    normalisation is absorbed into an effective ``K`` (DESIGN.md section 1), so the curvature a
    learning rate acts on differs between the two and one ``K`` fits at most one of them (an
    Adam and an SGD run of one simulated LLM: the Adam runs were fitted at a gain 300x too small,
    R^2 0.001). ``convention``: ``(n_runs,)`` as given (``""``: unknown, e.g. a run at momentum
    0 whose optimizer the log does not say; such runs are not counted).
    """
    conv = np.asarray(convention, dtype=object)
    notes = []
    for m, name in enumerate(models):
        rows = np.flatnonzero(np.asarray(model_idx) == m)
        by_conv = {c: [run_ids[i] for i in rows if conv[i] == c] for c in (EMA, HEAVY_BALL)}
        if all(by_conv.values()):
            notes.append(
                f"{mixed_optimizer_start(name)}: {EMA} momentum (Adam) {by_conv[EMA]} and "
                f"{HEAVY_BALL} momentum (SGD) {by_conv[HEAVY_BALL]}. The mechanistic form gives an LLM "
                "one curvature K, but Adam's per-coordinate normalisation changes the curvature a "
                "learning rate acts on, so one K cannot describe both: the fit compromises between "
                "them (compare the runs' R^2) and its predictions for either optimizer inherit it. "
                f"Fit them as separate LLMs (e.g. model names '{name}-adam' and '{name}-sgd': the run "
                "set's model coordinate, ingest --manifest) or fit each optimizer's runs alone"
            )
    return notes


def mixed_optimizer_start(name: str) -> str:
    """How :func:`mixed_optimizer_notes` begins its note on LLM ``name`` (``predict`` repeats
    the note of the LLM it predicts)."""
    return f"LLM {name!r} has runs of two optimizers"


def scheduled_runs(ds: xr.Dataset, run_ids: list[str]) -> list[str]:
    """The runs among ``run_ids`` whose logged per-step learning rate (the run-set metric
    ``lr``) follows a schedule (warm-up, decay; :func:`bayes_grpo.runset.ingest.learning_rate_schedule_range`),
    each as ``"ID (lr LO to HI)"``; runs already re-timed by
    :func:`bayes_grpo.runset.clock.clock_runset` are not among them."""
    return [f"{run_id} (lr {lo:.3g} to {hi:.3g})" for run_id, (lo, hi) in _schedule_spans(ds, run_ids).items()]


def _schedule_spans(ds: xr.Dataset, run_ids: list[str]) -> dict[str, tuple[float, float]]:
    """``{run: (smallest, peak) logged rate}`` of the :func:`scheduled_runs`."""
    if LOGGED_LR_VAR not in ds.data_vars:
        return {}
    from bayes_grpo.runset.clock import clocked_runs
    from bayes_grpo.runset.ingest import learning_rate_schedule_range

    on_clock = clocked_runs(ds)
    spans = {}
    for run_id in run_ids:
        if run_id in on_clock:
            continue  # re-timed: one clock step is one step at the run's learning_rate
        span = learning_rate_schedule_range(ds[LOGGED_LR_VAR].sel({RUN_DIM: run_id}).values)
        if span is not None:
            spans[run_id] = span
    return spans


def averaged_scheduled_runs(fitted: Any, ds: xr.Dataset, model: str | None = None) -> list[str]:
    """The :func:`scheduled_runs` of a fit's run set ``ds`` that the fit averaged over (fitted
    with the constant-rate law: :func:`follows_schedule` false for its config and likelihood).

    ``model``: only the runs of that fitted LLM (an answer for it rests on its own curvature);
    None: every run (a new LLM's answer rests on the population level). `predict fit.nc --model
    B` warned that the scheduled runs of LLM A averaged "its gain", which is B's own."""
    config = getattr(fitted, "model_config", None)
    if config is not None and follows_schedule(config, getattr(fitted, "likelihood", "iid")):
        return []
    run_ids = [str(r) for r in ds[RUN_DIM].values]
    if model is not None and "model" in ds.coords:
        run_ids = [r for r, m in zip(run_ids, ds["model"].values, strict=True) if str(m) == model]
    return scheduled_runs(ds, run_ids)


def scheduled_fit_warning(runs: list[str]) -> str:
    """What a verb that reads a fitted posterior (``predict``, ``stability --posterior``) says
    of a fit whose :func:`scheduled_runs` are ``runs``."""
    return (
        f"the fit's runs {runs} log a learning-rate schedule and were fitted with the constant-rate "
        "law (config learning_rate_schedule.follow off, or the state-space likelihood): its gain "
        "averages over their schedules, so it describes no constant rate (the fit's note; "
        "ingest --lr-clock)"
    )


def follows_schedule(model_config: dict[str, Any], likelihood: str) -> bool:
    """Whether a fit with this config and likelihood fits runs on a logged schedule with the law
    on that schedule (config ``learning_rate_schedule.follow``, i.i.d. likelihood only)."""
    return bool(model_config.get("learning_rate_schedule", {}).get("follow", False)) and likelihood == "iid"


def schedule_multipliers(ds: xr.Dataset, run_ids: list[str], steps: np.ndarray) -> np.ndarray | None:
    """``(n_runs, n_steps)`` interval rate multipliers of the :func:`scheduled_runs` at ``steps``
    (increasing steps of the run set's grid; intervals between them, the first from 0), 1 for the
    other runs, or None when no run follows a schedule.

    The nominal rate is the run's ``learning_rate`` (the configured peak), else its logged
    peak; between logged rates the rate is linear (:func:`bayes_grpo.runset.clock.interval_multipliers`).
    """
    scheduled = _schedule_spans(ds, run_ids)
    if not scheduled:
        return None
    from bayes_grpo.runset.clock import interval_multipliers

    grid = np.asarray(ds[STEP_DIM].values, dtype=float)
    at = np.searchsorted(grid, steps)
    if np.any(at >= grid.size) or np.any(grid[np.minimum(at, grid.size - 1)] != steps):
        raise ValueError("schedule_multipliers: steps must be steps of the run set's grid")
    out = np.ones((len(run_ids), steps.size))
    for i, run_id in enumerate(run_ids):
        if run_id not in scheduled:
            continue
        lr = np.asarray(ds[LOGGED_LR_VAR].sel({RUN_DIM: run_id}).values, dtype=float)[at]
        if not np.isfinite(lr).any():
            lr = np.asarray(ds[LOGGED_LR_VAR].sel({RUN_DIM: run_id}).values, dtype=float)
            lr = np.interp(steps, grid[np.isfinite(lr)], lr[np.isfinite(lr)])
        out[i] = interval_multipliers(steps, lr, _nominal_rate(ds, run_id, scheduled[run_id][1]))
    return out


def _nominal_rate(ds: xr.Dataset, run_id: str, logged_peak: float) -> float:
    """The rate a run's multipliers are relative to: its ``learning_rate`` (the configured peak),
    else its logged peak."""
    eta = float(ds["learning_rate"].sel({RUN_DIM: run_id}).values) if "learning_rate" in ds.coords else float("nan")
    return eta if np.isfinite(eta) and eta > 0 else float(logged_peak)


def update_multipliers(ds: xr.Dataset, run_id: str, n_updates: int) -> np.ndarray | None:
    """``(n_updates,)`` rate multiplier of each update ``n`` (its mean over ``(n, n+1]``, from
    the run's logged rate as :func:`schedule_multipliers` reads it) for the lagged recursion
    (``lr_multipliers`` of :func:`bayes_grpo.dynamics.simulate.simulate_recursion`), or None
    when the run follows no schedule."""
    scheduled = _schedule_spans(ds, [run_id])
    if not scheduled:
        return None
    from bayes_grpo.runset.clock import clock_time

    grid = np.asarray(ds[STEP_DIM].values, dtype=float)
    lr = np.asarray(ds[LOGGED_LR_VAR].sel({RUN_DIM: run_id}).values, dtype=float)
    eta = _nominal_rate(ds, run_id, scheduled[run_id][1])
    ok = np.isfinite(lr)
    points = np.arange(1, int(n_updates) + 1, dtype=float)
    lr_at = np.interp(points, grid[ok], lr[ok])
    tau = np.concatenate([[0.0], clock_time(points, lr_at, eta)])
    return np.diff(tau)


def learning_rate_schedule_note(ds: xr.Dataset, run_ids: list[str], *, followed: bool = False) -> str | None:
    """A note naming the :func:`scheduled_runs` of a fit, else None: the law follows their
    schedules (``followed``), or its coefficients are constant over a run and the fit averages
    over the schedule."""
    scheduled = scheduled_runs(ds, run_ids)
    if not scheduled:
        return None
    if followed:
        return (
            f"runs {scheduled} log a learning-rate schedule (warm-up or decay): the law follows it "
            "step by step (the gain eta K scales with the logged rate, the momentum buffer is kept "
            "apart from it as in torch's optimizers), so the fitted gain, regime and stability are "
            "those of each run's learning_rate (its peak)"
        )
    return (
        f"runs {scheduled} log a learning-rate schedule (warm-up or decay) and this fit does not "
        "follow it: the law's coefficients are constant over a run (mechanistic: the gain eta K at the run's learning_rate), so the "
        "fit averages over the schedule and cannot draw a gain that changes along the run; "
        "stability verdicts for these settings assume a constant rate (predict --lr-schedule "
        "predicts a new run on a schedule). Re-timing the runs on the learning-rate clock "
        "(ingest --lr-clock, bayes_grpo.runset.clock) turns them into runs at their constant "
        "learning_rate exactly without momentum, approximately with it; with the i.i.d. "
        "likelihood, --config '{\"learning_rate_schedule\": {\"follow\": true}}' fits the law "
        "on each run's logged schedule instead, exact for SGD's and Adam's momentum buffer "
        "(README: on the public LLM logs neither fitted better than the constant-rate law)"
    )


def constant_reward(y: np.ndarray) -> bool:
    """Whether a run's finite rewards ``y`` never change (``np.ptp == 0``; False for none): a
    level with no dynamics, whose residuals from any curve are that curve's mirror image."""
    y = np.asarray(y, dtype=float)
    y = y[np.isfinite(y)]
    return bool(y.size and np.ptp(y) == 0)


def constant_reward_note(runs: list[str], *, forecast: bool = False) -> str:
    """The note on runs whose reward is constant (:func:`constant_reward`), labelled as in
    ``runs``: for a fit (``fit`` and ``compare`` print it, :func:`shape_notes`), or with
    ``forecast`` for a run forecast from a constant prefix (``bayes-grpo forecast``)."""
    if forecast:
        effect = "so the forecast's plateau, time scale, regime and noise are its prior's, not the run's"
        remedy = ""
    else:
        effect = "yet they pull their LLM's plateau and initial reward towards that level"
        remedy = " or leave them out"
    return (
        f"runs {runs} have a constant reward: no dynamics to fit, {effect}; check the log "
        f"(reward column, logging){remedy}"
    )


def shape_notes(run_ids: list[str], steps: np.ndarray, reward: np.ndarray) -> list[str]:
    """Notes on runs the law can only misread: a log that starts late, a constant reward
    (``fit`` and ``compare`` print them).

    The law puts the start of training (``R0``, zero velocity) at step 0. A run whose first
    reward comes late (a resumed run, a step counter that did not start at 0) is fitted as a
    curve that began at step 0; a run whose reward never changes has no dynamics, only a
    level, yet it pulls its LLM's shared plateau and initial reward towards that level.
    """
    late, flat = [], []
    for run_id, row in zip(run_ids, reward):
        finite = np.isfinite(row)
        t, y = steps[finite], row[finite]
        if starts_late(t):
            late.append(f"{run_id} (from step {t[0]:.15g} to {t[-1]:.15g})")
        if constant_reward(y):
            flat.append(f"{run_id} ({y[0]:g} at all {y.size} logged steps)")
    notes = []
    if late:
        notes.append(
            f"runs {late} start late: the law puts the start of training (R0, zero velocity) at "
            "step 0 and draws the steps before the first logged one; if the log does start at "
            "the start of training (a step counter offset), number its steps from 0"
        )
    if flat:
        notes.append(constant_reward_note(flat))
    return notes


def prepare_data(ds: xr.Dataset, model_config: dict[str, Any], parameterisation: str, likelihood: str = "iid") -> ModelData:
    """Extract the model's arrays from a run set.

    Parameters
    ----------
    ds
        Run set (dims ``run``, ``step``; see :mod:`bayes_grpo.runset`).
    model_config
        Merged model configuration (uses ``hyperparameter_defaults``).
    parameterisation
        ``"mechanistic"`` requires learning rate, momentum (+ convention) and ``k_ref`` for
        every run (or a default); ``"phenomenological"`` does not.
    likelihood
        ``"iid"`` or ``"state_space"``: with the i.i.d. one, runs on a logged schedule get
        their rate multipliers (:func:`schedule_multipliers`, :func:`follows_schedule`).

    Raises
    ------
    RunSetError
        A run has no finite reward, a needed hyperparameter is unknown, or a value is invalid.
    """
    validate_runset(ds)
    run_ids = [str(r) for r in ds[RUN_DIM].values]
    reward = np.asarray(ds[REWARD_VAR].values, dtype=float)
    steps = np.asarray(ds[STEP_DIM].values, dtype=float)
    finite = np.isfinite(reward)
    if (steps < 0).any():
        # "found -5" named no run, nor said that nothing was logged there (a hand-built grid)
        negative = (steps < 0)[None, :] & finite
        runs = [r for r, row in zip(run_ids, negative) if row.any()]
        raise RunSetError(
            f"steps must be >= 0 (t = optimizer step, R0 at t = 0); found {steps.min():g}: "
            + (
                f"runs {runs} log a reward below step 0"
                if runs
                else "no run logs a reward there: drop those steps (runset.sel(step=runset.step >= 0))"
            )
        )
    counts = finite.sum(axis=1)
    few = [r for r, c in zip(run_ids, counts) if c < 3]
    if few:
        raise RunSetError(
            f"runs {few} have fewer than 3 finite rewards; the model cannot use them: leave them out "
            f"(runset.drop_sel(run={few}), or ingest with --min-points N, which rejects such runs)"
        )

    flat = [r for r, row in zip(run_ids, reward) if constant_reward(row)]
    if len(flat) == len(run_ids):
        raise RunSetError(
            f"every run has a constant reward ({', '.join(flat)}): there are no dynamics to fit "
            "(check the reward column the ingest chose, ingest --reward-key, or the logging)"
        )
    notes: list[str] = shape_notes(run_ids, steps, reward)
    thinning = thinning_note(ds)
    if thinning:
        notes.append(thinning)
    follow = follows_schedule(model_config, likelihood)
    lr_multiplier = schedule_multipliers(ds, run_ids, steps) if follow else None
    schedule = learning_rate_schedule_note(ds, run_ids, followed=lr_multiplier is not None)
    if schedule:
        notes.append(schedule)

    model_names = list(run_llm_names(ds))
    models = list(dict.fromkeys(model_names))
    model_idx = np.array([models.index(m) for m in model_names], dtype=int)

    defaults = dict(model_config.get("hyperparameter_defaults", {}))
    mech = parameterisation == "mechanistic"
    # the phenomenological form uses no learning rate, momentum or K_ref: their defaults fill
    # nothing (the tables showed the default as the run's learning rate), and a note says so
    used = defaults if mech else {k: v for k, v in defaults.items() if k not in MECHANISTIC_COORDS}
    lr = _resolve(ds, "learning_rate", used)
    mom = _resolve(ds, "momentum", used)
    # a run at momentum 0 needs no convention (convention_without_momentum): the default fills
    # only the others; filled at momentum 0 too, it made two optimizers of one LLM's runs
    given_conv = _resolve(ds, "momentum_convention", {})
    fill = (given_conv == "") & (mom != 0.0)
    if used.get("momentum_convention") is not None:
        given_conv[fill] = used["momentum_convention"]
    conv = convention_without_momentum(mom, given_conv)  # an unknown momentum (NaN) may need one
    kref = _resolve(ds, "k_ref", used)
    gsize = _resolve(ds, "group_size", used)
    if mech:
        _refuse_unknown(
            ds,
            {"learning_rate": np.isnan(lr), "momentum": np.isnan(mom), "momentum_convention": conv == "", "k_ref": np.isnan(kref)},
        )
    notes.extend(default_settings_notes(ds, defaults, parameterisation, momentum=mom))
    nameless = [r for r, m in zip(run_ids, ds["model"].values) if not str(m)]
    if len(nameless) >= 2:
        notes.append(
            f"model unknown for runs {nameless}: they are fitted as one LLM {UNKNOWN_MODEL!r} "
            "(one plateau, initial reward and dynamics); if they come from different LLMs, give "
            "each run its model (ingest --manifest, or a bayes_grpo_run.json beside the log)"
        )
    elif nameless:
        # one such run was fitted (and named in every table) as 'unknown-model' without a word
        notes.append(
            f"model unknown for run {nameless[0]!r}: it is fitted as the LLM {UNKNOWN_MODEL!r}; "
            "give the run its model (ingest --manifest, or a bayes_grpo_run.json beside the log)"
        )
    if mech:
        bad = [r for r, c in zip(run_ids, conv) if c not in MOMENTUM_CONVENTIONS]
        if bad:
            raise RunSetError(f"runs {bad}: momentum_convention must be one of {MOMENTUM_CONVENTIONS}")
        for name, arr in (("learning_rate", lr), ("momentum", mom), ("k_ref", kref)):
            bad = [f"{r} ({v:g})" for r, v, o in zip(run_ids, arr, setting_in_range(name, arr)) if not o]
            if bad:
                # said what a valid value is, as the --default refusal does ("must be in [0, 1)")
                raise RunSetError(f"invalid {name} for runs {bad}: {name} {DEFAULT_RANGES[name]}")
        eta_eff = np.array([effective_step(e, m, c) for e, m, c in zip(lr, mom, conv)], dtype=float)
        notes.extend(mixed_optimizer_notes(run_ids, model_idx, models, given_conv))
    else:
        eta_eff = np.full(len(run_ids), np.nan)
    if (np.isfinite(gsize) & (gsize <= 0)).any():
        raise RunSetError(f"group_size must be positive; runs {[r for r, g in zip(run_ids, gsize) if g <= 0]}")
    if not np.isfinite(gsize).all():
        unknown = [r for r, g in zip(run_ids, gsize) if not np.isfinite(g)]
        notes.append(
            f"group_size unknown for runs {unknown}: their noise is taken at their LLM's reference G "
            "(the geometric mean of its runs' known G; 1 when none is known)"
        )

    group_labels = [group_label(models[m], g) for m, g in zip(model_idx, gsize)]
    groups = list(dict.fromkeys(group_labels))
    group_idx = np.array([groups.index(g) for g in group_labels], dtype=int)
    group_model_idx = np.array([model_idx[group_labels.index(g)] for g in groups], dtype=int)
    group_g = np.array([gsize[group_labels.index(g)] for g in groups], dtype=float)

    n_models = len(models)
    loc = np.zeros(n_models)
    scale = np.ones(n_models)
    run_length = np.zeros(n_models)
    early = np.zeros(n_models)
    late = np.zeros(n_models)
    noise = np.zeros(n_models)
    sizes = np.asarray(ds["model_size"].values, dtype=float)
    log_size = model_log_sizes(run_ids, model_idx, models, sizes)
    for m in range(n_models):
        rows = model_idx == m
        vals = reward[rows][finite[rows]]
        loc[m] = float(np.mean(vals))
        sd = float(np.std(vals))
        scale[m] = sd if sd > 0 else 1.0
        run_length[m] = max(float(steps[finite[rows].any(axis=0)].max()), 1.0)
        e_list, l_list, n_list = [], [], []
        for i in np.flatnonzero(rows):
            y = (reward[i][finite[i]] - loc[m]) / scale[m]
            k = max(1, int(np.ceil(EDGE_FRACTION * len(y))))
            e_list.append(np.mean(y[:k]))
            l_list.append(np.mean(y[-k:]))
            d = np.diff(y)
            mad = np.median(np.abs(d - np.median(d))) * 1.4826
            n_list.append(mad / np.sqrt(2.0))
        early[m] = float(np.mean(e_list))
        late[m] = float(np.mean(l_list))
        noise[m] = float(np.clip(np.median(n_list), 0.02, 2.0))

    obs_run, obs_step_idx = np.nonzero(finite)
    obs_t = steps[obs_step_idx]
    obs_y = (reward[obs_run, obs_step_idx] - loc[model_idx[obs_run]]) / scale[model_idx[obs_run]]
    return ModelData(
        run_ids=run_ids,
        models=models,
        groups=groups,
        model_idx=model_idx,
        group_idx=group_idx,
        group_model_idx=group_model_idx,
        group_g=group_g,
        steps=steps,
        reward=reward,
        obs_run=obs_run,
        obs_step_idx=obs_step_idx,
        obs_t=obs_t,
        obs_y=obs_y,
        loc=loc,
        scale=scale,
        run_length=run_length,
        learning_rate=lr,
        momentum=mom,
        momentum_convention=[str(c) for c in conv],
        k_ref=kref,
        group_size=gsize,
        eta_eff=eta_eff,
        early=early,
        late=late,
        noise_guess=noise,
        log_size=log_size,
        notes=notes,
        lr_multiplier=lr_multiplier,
    )


def model_log_sizes(run_ids: list[str], model_idx: np.ndarray, models: list[str], sizes: np.ndarray) -> np.ndarray:
    """``(n_models,)`` log parameter count of each LLM from its runs' ``model_size``.

    ``sizes`` is ``(n_runs,)`` parameters per run (NaN: unknown; 0, negative or infinite: an
    error naming the runs); an LLM none of
    whose runs knows its size gets NaN. Raises ``RunSetError`` naming the runs when the runs of
    one LLM record different sizes: one name with two sizes is two LLMs (or a typo), and a
    size taken from one of them would put the LLM's curvature at the wrong place on the
    curvature-scaling regression.
    """
    log_size = np.full(len(models), np.nan)
    invalid = [f"{run_ids[i]} ({sizes[i]:g})" for i in np.flatnonzero(~np.isnan(sizes) & ~((sizes > 0) & np.isfinite(sizes)))]
    if invalid:
        # a count of parameters that is no count: not "unknown" (the regression would go on without it)
        raise RunSetError(f"invalid model_size for runs {invalid}: a model_size is a positive number of parameters (NaN when unknown)")
    for m, name in enumerate(models):
        rows = np.flatnonzero((model_idx == m) & np.isfinite(sizes) & (sizes > 0))
        if not rows.size:
            continue
        if not np.allclose(sizes[rows], sizes[rows[0]], rtol=1e-9, atol=0.0):
            listed = ", ".join(f"{run_ids[i]} ({sizes[i]:g})" for i in rows)
            raise RunSetError(
                f"model {name!r} has runs of different model_size: {listed}; one LLM has one size: "
                "give runs of different LLMs different model names, or correct model_size"
            )
        log_size[m] = float(np.log(sizes[rows[0]]))
    return log_size


def batch_g_exponent(group_size: np.ndarray, completions_per_step: np.ndarray) -> float | None:
    """How the completions averaged into one logged step grow with G across runs.

    Parameters
    ----------
    group_size, completions_per_step
        ``(n_runs,)`` G and completions per optimizer step (NaN where unknown).

    Returns
    -------
    1.0 when every run with both known averages the same number of prompts (``n = prompts x
    G``), 0.0 when every such run averages the same number of completions whatever its G,
    NaN when they do neither, and None when fewer than two distinct G have a known ``n``.
    """
    g = np.asarray(group_size, dtype=float)
    n = np.asarray(completions_per_step, dtype=float)
    known = np.isfinite(g) & np.isfinite(n) & (g > 0) & (n > 0)
    if np.unique(g[known]).size < 2:
        return None
    if np.unique(n[known] / g[known]).size == 1:
        return 1.0
    if np.unique(n[known]).size == 1:
        return 0.0
    return float("nan")


def measurement_batch_note(ds: xr.Dataset, model_config: dict[str, Any]) -> str | None:
    """A note when the run set's batches (``completions_per_step``) contradict how the
    state-space measurement noise is scaled with G (``noise.measurement_g_exponent``), else None.

    The logged reward of a step is a mean over its completions, so its sampling variance
    falls as 1 / completions. With a fixed number of prompts per step that is ``G^-1`` (the
    default exponent ``"alpha"``, theory 1, or a number near 1); with a fixed number of
    completions per step (TRL counts its batch in completions) it does not fall with G at all
    (exponent 0), and with budgets that vary otherwise no single exponent holds.
    """
    if "completions_per_step" not in ds.coords or "group_size" not in ds.coords:
        return None
    exponent = measurement_g_exponent(model_config)
    if exponent == "free":
        return None
    g = np.asarray(ds["group_size"].values, dtype=float)
    n = np.asarray(ds["completions_per_step"].values, dtype=float)
    k = batch_g_exponent(g, n)
    if k is None:
        return None
    known = np.isfinite(g) & np.isfinite(n)
    by_g: dict[object, set] = {}
    for gi, ni in zip(g[known], n[known]):
        by_g.setdefault(readable_group_size(gi), set()).add(readable_group_size(ni))
    batches = "; ".join(
        f"G {gi}: {' and '.join(map(str, sorted(ns)))}" for gi, ns in sorted(by_g.items())
    )
    configured = "G^-alpha, the default" if exponent == "alpha" else f"G^-{exponent:g}"
    if k == 0.0 and exponent != 0.0:
        return (
            f"every run averages the same number of completions per step whatever its G "
            f"(completions per step: {batches}), so its logged mean is no less noisy at larger G; "
            f"the state-space measurement noise is scaled by {configured}: set "
            "noise.measurement_g_exponent to 0"
        )
    if k == 1.0 and exponent != "alpha" and abs(float(exponent) - 1.0) > 0.25:
        return (
            f"every run averages the same number of prompts per step (completions per step: "
            f"{batches}), so the variance of its logged mean falls as 1/G; the state-space "
            f"measurement noise is scaled by {configured}: set noise.measurement_g_exponent to "
            "'alpha' or 1"
        )
    if np.isnan(k):
        return (
            f"the runs' completions per step follow neither a fixed prompt budget nor a fixed "
            f"completion budget (completions per step: {batches}), so no single G exponent of "
            f"the state-space measurement noise (now {configured}) holds for every run, and the "
            "runs of the other budgets get a mis-scaled measurement noise (a free exponent, "
            "noise.measurement_g_exponent = {'mu': 0.5, 'sigma': 0.5}, lets the data pick the "
            "best single one)"
        )
    return None


def momentum_factor(momentum: np.ndarray) -> np.ndarray:
    """``1 - mu``: the damping of the heavy-ball recursion without lag (dimensionless)."""
    return 1.0 - np.asarray(momentum, dtype=float)


def prior_centres(data: ModelData, config: dict[str, Any], parameterisation: str) -> dict[str, Any]:
    """Data-derived centres of the priors (all NumPy; saved with the fit for reuse).

    Returns a dict with ``a0`` [model] (typical gain, 1/steps), ``eta_ref`` [model]
    (geometric-mean effective step), ``log_k_centre`` (scalar), ``log_k_spread``,
    ``w0`` [model] (phenomenological frequency guess, rad/step), ``g_ref`` [model]
    (geometric-mean G), ``x_size`` [model] (centred log size, 0 when unknown),
    ``size_mean`` and ``use_size`` (bool).
    """
    frac = float(config["time_scale"]["fraction"])
    n_m = data.n_models
    a0 = np.zeros(n_m)
    eta_ref = np.ones(n_m)
    g_ref = np.ones(n_m)
    for m in range(n_m):
        rows = data.model_idx == m
        if parameterisation == "mechanistic":
            a0[m] = float(np.median(1.0 - data.momentum[rows])) / (frac * data.run_length[m])
            eta_ref[m] = float(np.exp(np.mean(np.log(data.eta_eff[rows]))))
        g = data.group_size[rows]
        g = g[np.isfinite(g)]
        g_ref[m] = float(np.exp(np.mean(np.log(g)))) if g.size else 1.0
    w0 = 1.0 / (frac * data.run_length)
    log_k = np.log(a0 / eta_ref) if parameterisation == "mechanistic" else np.zeros(n_m)
    known = np.isfinite(data.log_size)
    use_size = bool(
        config["size_exponent"]["enabled"]
        and known.sum() >= max(2, int(config["size_exponent"].get("min_models", 3)))
        and np.ptp(data.log_size[known]) > 0
    )
    size_mean = float(np.mean(data.log_size[known])) if known.any() else 0.0
    x_size = np.where(known, data.log_size - size_mean, 0.0) if use_size else np.zeros(n_m)
    return {
        "a0": a0,
        "eta_ref": eta_ref,
        "log_k_centre": float(np.mean(log_k)),
        "log_k_spread": float(np.std(log_k)),
        "w0": w0,
        "g_ref": g_ref,
        "x_size": x_size,
        "size_mean": size_mean,
        "use_size": use_size,
    }


def size_regression_note(data: ModelData, config: dict[str, Any], parameterisation: str) -> str | None:
    """A note when the curvature regression on ``log model_size`` leaves LLMs out, else None.

    With the regression on (:func:`prior_centres`' ``use_size``), an LLM without a known
    ``model_size`` gets ``x_size = 0``: its ``log K`` is centred where an LLM of the fitted
    LLMs' mean log size would be. With the regression enabled but not used although some
    sizes are known (fewer than ``min_models`` LLMs of known size, or all of one size), the
    sizes are not used at all. Either way a user who gave sizes should hear it.
    """
    if parameterisation != "mechanistic" or data.n_models < 2 or not config["size_exponent"]["enabled"]:
        return None
    known = np.isfinite(data.log_size)
    if not known.any():
        return None
    unknown = [m for m, k in zip(data.models, known) if not k]
    if prior_centres(data, config, parameterisation)["use_size"]:
        if not unknown:
            return None
        return (
            f"model_size unknown for LLMs {unknown}: the curvature is regressed on log model_size over the "
            f"{int(known.sum())} others, and theirs is centred at the mean log size of those (as if of that "
            "size); give their model_size (manifest column, or a config.json beside the log)"
        )
    need = max(2, int(config["size_exponent"].get("min_models", 3)))
    n_known = int(known.sum())
    return (
        f"the curvature is not regressed on log model_size: {n_known} of {data.n_models} LLMs "
        f"{'has a' if n_known == 1 else 'have a'} known size, {len(set(data.log_size[known]))} different (needs {need} LLMs of known size, two "
        "sizes at least); the sizes are not used"
    )


__all__ = [
    "run_llm_names",
    "ModelData",
    "prepare_data",
    "prior_centres",
    "size_regression_note",
    "mixed_optimizer_notes",
    "default_settings_notes",
    "follows_schedule",
    "averaged_scheduled_runs",
    "schedule_multipliers",
    "update_multipliers",
    "model_log_sizes",
    "group_label",
    "group_model",
    "has_group_offsets",
    "MECHANISTIC_COORDS",
    "UNKNOWN_MODEL",
    "HEAVY_BALL",
    "EMA",
]
