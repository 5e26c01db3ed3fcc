"""``bayes-grpo predict``, ``bayes-grpo forecast`` and ``bayes-grpo compare``."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from bayes_grpo.cli._common import (
    JoinedLists,
    add_hyperparameter_defaults_flag,
    add_json_flag,
    add_lr_schedule_args,
    add_overwrite_flag,
    add_progress_flag,
    add_reward_bounds_flag,
    check_output_paths,
    figure_format,
    finite_float,
    lr_schedule_from_args,
    momentum_value,
    non_negative_float,
    non_negative_int,
    open_fraction,
    parse_values,
    positive_float,
    positive_int,
    print_json,
    print_table,
    progress_lines,
    reward_bounds_arg,
    spelled_like,
    value_text,
)
from bayes_grpo.constants import MOMENTUM_CONVENTIONS, STEP_DIM

#: The laws of ``bayes_grpo.predict.compare.LAWS`` (named here so that ``--help`` lists them
#: without importing the PyMC code; a test keeps the two equal).
COMPARE_LAWS = ("oscillator_mechanistic", "oscillator_phenomenological", "single_exp", "logistic")


def law_names(text: str) -> list[str]:
    """An argparse ``type`` for ``compare --laws``: one law or a comma list of them
    (:func:`~bayes_grpo.cli._common.parse_values`, as ``simulate``'s lists), each one of
    :data:`COMPARE_LAWS` (``--laws single_exp,logistic`` was "invalid choice", while the
    space-separated form worked)."""
    try:
        names = parse_values(text, str, "--laws")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--laws: ")) from None
    for name in names:
        if name not in COMPARE_LAWS:
            choices = ", ".join(map(repr, COMPARE_LAWS))
            raise argparse.ArgumentTypeError(f"invalid choice: {name!r} (choose from {choices})")
    return names


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "predict",
        help="predict the reward trajectory of a run with new hyperparameters from a fitted posterior",
        description=(
            "Posterior predictive of a new run: bands of the mean trajectory and of the logged reward, "
            "steps to 90/95/99% of the rise to the plateau, the regime (overdamped / critical / "
            "underdamped / unstable) and its probability, the probability of instability (closed form "
            "and exact), and the recommended stop step."
        ),
    )
    p.add_argument("posterior", help="fitted model saved by `bayes-grpo fit` (models/NAME.nc)")
    p.add_argument(
        "--lr",
        "--learning-rate",
        dest="learning_rate",
        type=positive_float,
        required=True,
        help="learning rate eta",
    )
    p.add_argument(
        "--momentum", type=momentum_value, required=True, help="momentum mu (heavy-ball mu or Adam beta1)"
    )
    p.add_argument(
        "--momentum-convention",
        "--convention",
        dest="momentum_convention",
        choices=MOMENTUM_CONVENTIONS,
        default=None,
        help="how --momentum enters the update: heavy_ball (SGD momentum) or ema (Adam's beta1) "
        "(default: that of the fitted runs at this momentum, the most common where they differ, "
        "heavy_ball where they record none)",
    )
    p.add_argument(
        "--k-ref", type=non_negative_float, required=True, help="off-policy lag K_ref in optimizer steps"
    )
    p.add_argument(
        "--group-size", type=positive_float, required=True, help="group size G (completions per prompt)"
    )
    p.add_argument(
        "--steps",
        type=positive_int,
        required=True,
        help="horizon T, the last step predicted: steps 0..T (T >= 1; a TRL run of max_steps T logs "
        "steps 1..T; simulate's --steps T logs T rows, steps 0..T-1)",
    )
    p.add_argument(
        "--model",
        default=None,
        help="an LLM already in the fit (default: the fit's LLM when it has only one, else a new one, "
        "from the population level)",
    )
    p.add_argument(
        "--model-size",
        type=positive_float,
        default=None,
        help="parameter count of a new LLM (used when the curvature regression on size is on)",
    )
    p.add_argument(
        "--law",
        choices=("auto", "recursion", "continuous"),
        default="auto",
        help=(
            "mean-trajectory law: the exact discrete lagged recursion or the continuous second-order "
            "expansion; auto (default) uses the recursion when it is defined (mechanistic fit, integer "
            "K_ref and steps)"
        ),
    )
    p.add_argument(
        "--observation-lag",
        type=non_negative_int,  # -2 was refused as "observation_lag must be ...", naming no flag
        default=None,
        help=(
            "steps by which the logged reward trails the policy under the recursion (default: read "
            "from the fitted runs: K_ref for bandit runs, which log the reward of rollouts from the "
            "policy K_ref steps old; 1 for training logs such as TRL's, whose step s logs the rollouts "
            "of the policy before that step's update; 0 for SDE simulations)"
        ),
    )
    p.add_argument(
        "--no-discrepancy",
        dest="discrepancy",
        action="store_false",
        help=(
            "band of the mean trajectory from parameter uncertainty only (default: also the law's "
            "misfit on the fit's own training runs)"
        ),
    )
    p.add_argument(
        "--clip-epsilon",
        type=positive_float,
        default=None,
        help=(
            "PPO clip range of the run (TRL's epsilon; TRL sets 0.2): the recursion scales "
            "the gradient by the share clipping leaves, reading the reward as a success rate in [0, 1] "
            "(default: the linear law, no clipping); at a lag where the policy moves more than the "
            "range within K_ref steps the linear law rises too fast"
        ),
    )
    p.add_argument(
        "--clip-epsilon-high",
        type=positive_float,
        default=None,
        help="upper bound of an asymmetric clip range (TRL's epsilon_high; default: --clip-epsilon)",
    )
    add_lr_schedule_args(p, what="the new run")
    _common_output_args(p)
    p.set_defaults(func=_run_predict)

    f = subparsers.add_parser(
        "forecast",
        help="forecast the rest of a run in progress from its first steps",
        description=(
            "Forecast a run from its steps up to --upto: bands for the rest, regime, stop step. The prior "
            "is a fitted posterior (--prior, the run's hyperparameters read from the run set), or else the "
            "other runs of the run set (empirical Bayes; same LLM where possible), or a weak data-scaled "
            "prior (--no-population). When the run set holds steps after --upto, the forecast is also "
            "scored on them (coverage of the 90% band, RMSE)."
        ),
    )
    f.add_argument("runs", help="run set netCDF (from `bayes-grpo ingest`)")
    f.add_argument("--run", required=True, help="run id to forecast")
    f.add_argument(
        "--upto",
        type=finite_float,
        required=True,
        metavar="STEP",
        help="last observed optimizer step to use (a step, not a count of logged points): the forecast "
        "sees the run's rewards logged at steps <= STEP; upto_step in the output is the last of those steps",
    )
    f.add_argument(
        "--prior", default=None, help="fitted model (models/NAME.nc) whose posterior is the prior"
    )
    f.add_argument(
        "--no-population",
        action="store_true",
        help="ignore the other runs; use the weak data-scaled prior (not with --prior)",
    )
    f.add_argument(
        "--likelihood",
        choices=["state_space", "iid"],
        type=spelled_like("state_space", "iid"),
        default="state_space",
        help="observation model of the forecast: SDE + measurement noise via a Kalman filter "
        "(default; bands grow as the run wanders) or i.i.d. residuals (faster)",
    )
    f.add_argument(
        "--horizon",
        type=positive_int,
        default=None,
        help="forecast up to this step (default: the run's last logged step, or 2x --upto when the run ends there)",
    )
    add_reward_bounds_flag(  # finite numbers: `--reward-bounds 0 inf` was taken, and gave nonsense bands
        f,
        "the curve rises on the latent (logistic) level of p* and R0 and stays inside the bounds, "
        "noise largest mid-range, small near the bounds, and a logged reward outside is refused "
        "(default: the --prior fit's bounds if it has any, else constant noise)",
    )
    f.add_argument(
        "--same-model-only",
        action="store_true",
        help="build the run-based prior from runs of the same LLM only (default: when there are "
        "fewer than 2, the other LLMs' runs lend their time scale and damping; plateau, R0 and "
        "noise are then scaled to the run's own first steps; not with --prior or --no-population)",
    )
    f.add_argument(
        "--no-retime",
        dest="retime",
        action="store_false",
        help="take the other runs' rise rate and damping as they were logged (default: the runs of "
        "the same LLM are carried to this run's learning rate, momentum and K_ref first, the gain "
        "scaling with the learning rate, where both runs log them; not with --prior or --no-population)",
    )
    f.add_argument(
        "--calibrate",
        action="store_true",
        help="scale the bands of the logged reward by the split-conformal band scale from "
        "backtests of the other runs of the run set at the same --upto (each forecast as this "
        "run is, with a prior built without it and without this run); needs 2+ such runs",
    )
    _common_output_args(f)
    f.set_defaults(func=_run_forecast)

    c = subparsers.add_parser(
        "compare",
        help="compare the oscillator, single-exponential and logistic laws on a run set (LOO, leave-future-out, R^2)",
        description=(
            "Fit the three-phase oscillator (mechanistic and phenomenological), the single exponential and "
            "the logistic law to every run with PyMC; compare them by PSIS-LOO (Pareto-k warnings surfaced), "
            "by leave-future-out on the last 30% of each run, and by R^2 per run."
        ),
    )
    c.add_argument("runs", help="run set netCDF")
    c.add_argument(
        "--laws",
        nargs="+",
        type=law_names,
        action=JoinedLists,
        default=None,
        metavar="LAW",
        help=f"subset of laws, from {', '.join(COMPARE_LAWS)}, space or comma separated, each once (default all four)",
    )
    c.add_argument("--draws", type=positive_int, default=500, help="posterior draws per chain (default 500)")
    c.add_argument("--tune", type=non_negative_int, default=500, help="tuning steps per chain (default 500)")
    c.add_argument("--chains", type=positive_int, default=2, help="chains (default 2)")
    c.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default 0)")
    add_hyperparameter_defaults_flag(c, ("momentum", "k_ref"), why=" (the only settings a law reads)")
    add_reward_bounds_flag(
        c,
        "every law's plateau p* and initial reward R0 lie inside, as in `fit --reward-bounds`, and a "
        "logged reward outside is refused (default: unbounded)",
    )
    add_progress_flag(c, "the sampling progress (a line and PyMC's progress bar per fit)")
    add_json_flag(c)
    c.set_defaults(func=_run_compare)


def _common_output_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--hdi",
        type=open_fraction,  # `--hdi 1.5` was refused only after the forecast, naming no option
        nargs="+",
        default=[0.5, 0.9],
        help="HDI probabilities of the bands (default 0.5 0.9)",
    )
    p.add_argument(
        "--stop-threshold",
        type=positive_float,
        default=None,
        help="stop when the expected remaining gain is below this (reward units; default 1%% of the rise)",
    )
    p.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default 0)")
    p.add_argument(
        "-o", "--output", default=None, help="write the bands and summaries to this netCDF file"
    )
    p.add_argument("--plot", default=None, help="write a plot of the bands to this file (PNG, SVG or PDF)")
    add_overwrite_flag(p)
    add_json_flag(p)


#: What ``discrepancy_sd_max`` is measured in (``predict``'s output, text and JSON).
DISCREPANCY_SD_UNITS: str = (
    "share of the rise p* - R0 (the law-discrepancy term's largest sd over the run's progress), "
    "not reward units"
)


#: What a ``discrepancy_sd_max`` of 0 means (``predict``'s ``discrepancy_note``, text and JSON).
DISCREPANCY_AT_ZERO: str = (
    "estimated at 0 (floored): the law's misfit on the fit's training runs is within their noise, "
    "so the band of the mean trajectory is from parameter uncertainty only"
)


def _emit(ds, args, *, observed=None, extra=None) -> None:
    from bayes_grpo.predict.predict import plot_prediction, save_prediction
    from bayes_grpo.predict.summary import attr_warnings, step_value, summary_dict

    out = summary_dict(ds)
    for key in (
        "units",
        "prob_unstable_closed_form",
        "prob_unstable_exact",
        "pareto_k",
        "upto_step",
        "law",
        "law_reason",
        "clip_range",
        "observation_lag",
        "observation_lag_reason",
        "milestones_of",
        "discrepancy_sd_max",
        "warnings",
        "posterior_warnings",
    ):
        if key in ds.attrs:
            out[key] = ds.attrs[key]
        if key == "discrepancy_sd_max" and key in out:
            # printed after "units: reward", it read as reward units: it is a share of the rise
            out["discrepancy_sd_max_units"] = DISCREPANCY_SD_UNITS
            if float(out[key]) == 0.0:
                # the profile is floored at 0: "discrepancy_sd_max: 0.0" read as a misfit measured
                # to be nothing (or a rounding), not one within the training runs' noise
                out["discrepancy_note"] = DISCREPANCY_AT_ZERO
    if "warnings" in out:  # stored as JSON text in the netCDF attrs
        out["warnings"] = attr_warnings(ds)
    for key in ("upto_step", "observation_lag"):  # steps: 120 and 6, not 120.0 and 6.0
        if key in out:
            out[key] = step_value(out[key])
    if out.get("clip_range", "off") != "off":  # [eps_low, eps_high], stored as JSON text
        out["clip_range"] = json.loads(out["clip_range"])
    if "posterior_warnings" in out:  # the saved fit's own (stderr has them already)
        out["posterior_warnings"] = json.loads(out["posterior_warnings"])
    settings = json.loads(ds.attrs.get("settings", "{}"))
    if ds.attrs.get("kind") == "prediction" and "posterior" in settings:
        # say first what this is: `predict models/tiny.nc ...` printed bands and milestones
        # without naming the LLM they are of, or that they are its posterior
        llm = settings.get("model") or ""
        source = settings["posterior"]
        out = {
            "prediction_for": (
                f"a new LLM{f' {llm!r}' if llm else ''}, not in the fit: the population level of {source}"
                if settings.get("new_model")
                else f"LLM {llm!r} of the fit: its posterior in {source}"
            ),
            **out,
        }
    if "lr_schedule" in settings:  # a run on a schedule: say which, beside its results
        out["lr_schedule"] = settings["lr_schedule"]
        out["lr_schedule_peak_rate"] = settings["lr_schedule_peak_rate"]
    out.update(extra or {})
    if args.output:
        save_prediction(ds, args.output, overwrite=args.overwrite)
        out["output"] = args.output
    if args.plot:
        import matplotlib.pyplot as plt

        from bayes_grpo._io import write_atomic

        fig = plot_prediction(ds, observed=observed)
        fmt = figure_format(args.plot, "--plot")
        write_atomic(
            args.plot, lambda tmp: fig.savefig(tmp, format=fmt, dpi=110), overwrite=args.overwrite
        )
        plt.close(fig)
        out["plot"] = args.plot
    if args.json:
        print_json(out)
        return
    for key, value in out.items():
        if key == "no_stop_step":  # the stop_step line and the warning on stderr say it
            continue
        if isinstance(value, dict):
            # "90%" of what: of the rise p* - R0 (the JSON keys are documented in the README)
            share = (
                " (steps to 90/95/99% of the rise p* - R0)"
                if key.endswith("time_to_fraction")
                else " (first step after which it stays within 10/5/1% of the rise of p*)"
                if key.endswith("time_to_settle")
                else ""
            )
            print(f"{key}{share}:{'' if value else ' none'}")
            for k, v in value.items():
                print(f"  {k}: {_milestone_text(v) if share else _nested_text(k, v)}")
        elif key in ("warnings", "posterior_warnings"):
            # printed as Python writes a list (`warnings: ["extrapolation: ...", '...']`), the
            # quotes of each note chosen by its apostrophes: one note a line, as the milestones
            print(f"{key}:{'' if value else ' none'}")
            for note in value:
                print(f"  - {note}")
        elif key == "stop_step" and not np.isfinite(float(value)):
            print(f"{key}: none{_where(ds)}{_remaining_gain_note(ds)}")
        elif key == "policy_stop_step" and not np.isfinite(float(value)):
            print(f"{key}: none{_where(ds)}{_remaining_gain_note(ds, 'policy_expected_remaining_gain')}")
        else:
            print(f"{key}: {value_text(value)}")


def _nested_text(key: str, value: object) -> object:
    """A value of a nested block (``prefix_instability``) in words: it printed as Python writes
    it, ``onset_step: None``, ``signals: []``, ``onset_step: 85.0``."""
    if value is None:
        return "not assessed (too few steps)" if key == "detected" else "none"
    if isinstance(value, list):
        return "; ".join(map(str, value)) or "none"
    if key.endswith("step") and isinstance(value, float):
        from bayes_grpo.predict.summary import step_value

        return step_value(value)
    return value_text(value)


def _milestone_text(milestone: dict) -> str:
    """A milestone of ``time_to_fraction`` in words: the text output printed the JSON's dict as
    Python writes it, ``{'median_step': None, 'prob_reached_within_horizon': 0.496}``, where
    None (JSON null) means that the median draw gets there only beyond the horizon."""
    step = milestone.get("median_step")
    prob = milestone.get("prob_reached_within_horizon")
    where = (
        "beyond the horizon"
        if step is None or not np.isfinite(float(step))
        else f"step {float(step):g}"
    )
    reached = "" if prob is None else f" (reached within the horizon with probability {float(prob):.3g})"
    return f"median {where}{reached}"


def _print_warnings(ds, args: argparse.Namespace) -> None:
    """Each warning of a prediction / forecast dataset as its own line on stderr, in the form
    of the package's other warnings (``bayes-grpo COMMAND: warning: ...``), not the attrs'
    JSON text."""
    from bayes_grpo.predict.summary import attr_warnings

    for note in attr_warnings(ds):
        print(f"bayes-grpo {args.command}: warning: {note}", file=sys.stderr)


def _where(ds) -> str:
    """`` within the horizon`` for a stop step beyond it; nothing where no stop step is known
    (``no_stop_step``: a constant prefix whose prior knows no rise)."""
    return "" if "no_stop_step" in ds.attrs else " within the horizon"


def _remaining_gain_note(ds, var: str = "expected_remaining_gain") -> str:
    """`` (expected remaining gain at step T: X)`` when the dataset carries the gain curve ``var``;
    where (nearly) every draw diverges, that there is no stable run to stop (the policy's gain
    read 0 at the last step there)."""
    from bayes_grpo.predict.summary import no_stable_run

    if "no_stop_step" in ds.attrs:  # nothing known of a rise (a constant prefix): not a later stop
        return " (the prefix is constant and the prior knows no rise: nothing says when to stop; see the warning)"
    if no_stable_run(int(ds.attrs.get("n_draws_diverging", 0) or 0), int(ds.attrs.get("n_draws", 0))):
        swinging = int(ds.attrs.get("n_draws_swinging", 0) or 0)  # a clipped law's limit cycle
        if swinging:
            how = "swing" if swinging == int(ds.attrs["n_draws_diverging"]) else "diverge or swing"
            return f" (the draws {how} without settling: no settled run to stop)"
        return " (the draws diverge: no stable run to stop)"
    if var not in ds:
        return ""
    last = ds[var].isel({STEP_DIM: -1})
    after = ds.attrs.get(f"{var}_after")
    if after is not None and float(last) < float(ds.attrs["stop_threshold"]) <= float(after):
        # a lightly damped run's gain is ~0 at a peak and large at the next trough: "0 at step
        # 200" and no stop step read as a contradiction
        return (
            f" (expected remaining gain at step {float(last[STEP_DIM]):.0f}: {float(last):.3g}, "
            f"but up to {float(after):.3g} after it, where the run still swings)"
        )
    return f" (expected remaining gain at step {float(last[STEP_DIM]):.0f}: {float(last):.3g})"


def _run_predict(args: argparse.Namespace) -> int:
    from bayes_grpo.predict.predict import horizon_steps, predict_run

    check_output_paths(
        {"--output": args.output, "--plot": args.plot},
        {"posterior": args.posterior},
        overwrite=args.overwrite,
        figures=("--plot",),
        netcdf=("--output",),
    )
    n_updates = int(horizon_steps(args.steps)[-1])  # refuses a horizon below 1 step
    schedule, schedule_label = lr_schedule_from_args(args, args.learning_rate, n_updates)
    if schedule is not None and not np.any(schedule > 0):  # predict_run's message named no file
        raise ValueError(
            f"--lr-schedule {schedule_label}: the rate is 0 at every update of the horizon (--steps {args.steps})"
        )
    if args.clip_epsilon_high is not None and args.clip_epsilon is None:
        # predict_run's message named its parameters (clip_epsilon_high, clip_epsilon), not the flags
        raise ValueError(
            f"--clip-epsilon-high {args.clip_epsilon_high:g} needs --clip-epsilon (the lower bound of the "
            "clip range) too"
        )
    ds = predict_run(
        args.posterior,
        learning_rate=args.learning_rate,
        momentum=args.momentum,
        momentum_convention=args.momentum_convention,
        k_ref=args.k_ref,
        group_size=args.group_size,
        steps=args.steps,
        model=args.model,
        model_size=args.model_size,
        law=args.law,
        observation_lag=args.observation_lag,
        discrepancy=args.discrepancy,
        hdi_probs=args.hdi,
        stop_threshold=args.stop_threshold,
        seed=args.seed,
        lr_schedule=schedule,
        lr_schedule_label=schedule_label,
        clip_epsilon=args.clip_epsilon,
        clip_epsilon_high=args.clip_epsilon_high,
    )
    _print_warnings(ds, args)
    _emit(ds, args)
    return 0


def _run_forecast(args: argparse.Namespace) -> int:
    from bayes_grpo.predict.forecast import ForecastError, forecast_in_runset
    from bayes_grpo.runset import RunSetError, load_runset, run_frame

    bounds = reward_bounds_arg(args)  # a setting: refused, naming the flag, before the file is read
    check_output_paths(
        {"--output": args.output, "--plot": args.plot},
        {"run set": args.runs, "--prior": args.prior},
        overwrite=args.overwrite,
        figures=("--plot",),
        netcdf=("--output",),
    )
    # the flags that shape the run-based prior, where none is built: `--prior fit.nc
    # --no-population` (or --same-model-only, --no-retime) forecast from the fit's posterior,
    # and `--no-population --same-model-only` from the weak prior, the flags dropped unsaid
    shaping = [
        flag
        for flag, given in (
            ("--no-population", args.no_population and args.prior is not None),
            ("--same-model-only", args.same_model_only),
            ("--no-retime", not args.retime),
        )
        if given
    ]
    if shaping and (args.prior is not None or args.no_population):
        instead = (
            f"with --prior {args.prior} the prior is that fit's posterior"
            if args.prior is not None
            else "with --no-population no run-based prior is built (the weak prior scaled to the run's first steps)"
        )
        raise ValueError(
            f"{' '.join(shaping)} {'shapes' if len(shaping) == 1 else 'shape'} the prior built from "
            f"the other runs, and {instead}; drop one or the other"
        )
    ds = load_runset(args.runs)
    if args.run not in [str(r) for r in ds["run"].values]:
        raise RunSetError(
            f"{args.runs}: no run {args.run!r}; runs: {[str(r) for r in ds['run'].values]}"
        )
    frame = run_frame(ds, args.run)
    try:
        fc = forecast_in_runset(
            ds,
            args.run,
            args.upto,
            posterior=args.prior,
            use_runs=not args.no_population,
            same_model_only=args.same_model_only,
            retime=args.retime,
            reward_bounds=bounds,
            likelihood=args.likelihood,
            horizon=args.horizon,
            hdi_probs=args.hdi,
            stop_threshold=args.stop_threshold,
            seed=args.seed,
            calibrate=args.calibrate,
        )
    except ForecastError as exc:
        # name the run set, as the no-such-run error above does ("run 'r' has 0 rewards up to
        # step 0; need at least 3" named no file)
        raise ForecastError(f"{args.runs}: {exc}") from exc
    extra: dict[str, object] = {"run": args.run, "prior": fc.attrs["prior_source"]}
    if fc.attrs.get("prior_note"):
        extra["prior_note"] = fc.attrs["prior_note"]
    if args.calibrate:
        cal = json.loads(fc.attrs["calibration"])
        extra["band_scale"] = cal["band_scale"]
        extra["calibration_runs"] = cal["n_runs"]
        extra["calibration_raw_coverage"] = cal["raw_coverage"]
        # the other runs it could not backtest, and why (a run too short for --upto, ...)
        extra["calibration_left_out"] = cal["left_out"]
    if "prefix_instability" in fc.attrs:
        found = json.loads(fc.attrs["prefix_instability"])
        extra["prefix_instability"] = {k: found[k] for k in ("detected", "onset_step", "signals")}
    for key in sorted(fc.attrs):
        if key.startswith("backtest_"):
            extra[key] = fc.attrs[key]
    _print_warnings(fc, args)
    t_all = frame.index.to_numpy(dtype=float)
    _emit(fc, args, observed=(t_all, frame["reward"].to_numpy(dtype=float)), extra=extra)
    return 0


def _run_compare(args: argparse.Namespace) -> int:
    from bayes_grpo.predict.compare import LAWS, compare_laws
    from bayes_grpo.runset import load_runset

    laws = args.laws or list(LAWS)
    unknown = sorted(set(laws) - set(LAWS))
    if unknown:
        raise ValueError(f"unknown laws {unknown}; choose from {list(LAWS)}")
    if args.draws * args.chains < 2:
        # a setting, not the run set: refused before the file is read and without its name
        raise ValueError("--draws 1 --chains 1: PSIS-LOO needs at least 2 posterior draws (draws x chains)")
    bounds = reward_bounds_arg(args)  # a setting: refused before the file is read
    ds = load_runset(args.runs)
    try:
        res = compare_laws(
            ds,
            laws=laws,
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            random_seed=args.seed,
            hyperparameter_defaults=dict(args.defaults),
            # as `fit` shows its sampling: not under --no-progress or --json
            progress=progress_lines(args, "compare"),
            reward_bounds=bounds,
        )
    except ValueError as exc:
        # what compare_laws refuses is the run set ("no law could be fitted: ...", "runs with
        # fewer than 9 finite rewards ...", "steps must be >= 0"): name it
        raise ValueError(f"{args.runs}: {exc}") from exc
    check = res.to_check_result()
    if args.json:
        out = check.to_dict()
        out["loo"] = (
            res.loo.reset_index().rename(columns={"index": "law"}).to_dict(orient="records")
        )
        out["lfo"] = res.lfo.reset_index().to_dict(orient="records")
        print_json(out)
        return 0
    print(check.summary)
    print_table(
        res.loo[
            [
                c
                for c in (
                    "rank",
                    "elpd_loo",
                    "p_loo",
                    "elpd_diff",
                    "se",
                    "dse",
                    "weight",
                    "n_pareto_k_high",
                    "max_rhat",
                )
                if c in res.loo
            ]
        ],
        # rewards on 0-100 read elpd_loo +99.6 and lfo_elpd -104.3 for the same runs, units unsaid
        title="\nPSIS-LOO (az.compare; elpd of each run's standardised reward (reward - mean) / sd: "
        "its differences between laws, not its level, compare with leave-future-out's)",
    )
    print_table(
        res.lfo,
        title=f"\nleave-future-out (last {res.lfo_fraction:.0%} of each run; elpd of the reward in its own units) and R^2",
    )
    # the R^2 of each law on each run (the table above has medians only; --json has per_run)
    print_table(res.r2_by_run().rename_axis(index=None, columns=None), title="\nR^2 per run (raw; noise-ceiling and smoothed R^2: --json)")
    # rows named by run, as the R^2 table above (the records' own index read 0, 1, 2, ...)
    print_table(res.per_run_winners().set_index("run").rename_axis(index=None), title="\nbest law per run")
    return 0
