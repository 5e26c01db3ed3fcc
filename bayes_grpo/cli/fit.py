"""``bayes-grpo fit``: fit the hierarchical model to a run set and save the posterior."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bayes_grpo.cli._common import (
    DefaultsHelpFormatter,
    add_hyperparameter_defaults_flag,
    add_json_flag,
    add_overwrite_flag,
    add_progress_flag,
    add_reward_bounds_flag,
    check_output_paths,
    naming_the_run_set,
    non_negative_int,
    open_fraction,
    positive_int,
    print_json,
    print_table,
    read_json_object,
    reward_bounds_arg,
    sampler_messages,
    show_progress,
    spelled_like,
    with_hyperparameter_defaults,
)

#: Exit status of ``fit --strict`` when the convergence check fails (2 is a refused input).
UNCONVERGED_STATUS = 3


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "fit",
        help="fit the hierarchical damped-oscillator model to a run set",
        description=(
            "Fit the hierarchical Bayesian damped-oscillator model (DESIGN.md section 3) to a run set "
            "(netCDF from `bayes-grpo ingest` or a simulator), check convergence, print a summary per "
            "model and group size G, and save the posterior (ArviZ InferenceData netCDF with the run set, "
            "configs, config hash and package version) for `stability`, `predict`, `report`, ..."
        ),
        formatter_class=DefaultsHelpFormatter,
    )
    p.add_argument("runs", type=Path, help="run-set netCDF file")
    p.add_argument("-o", "--output", type=Path, required=True, help="where to write the fitted model (e.g. models/NAME.nc)")
    p.add_argument(
        "--parameterisation",
        choices=("mechanistic", "phenomenological"),
        default="mechanistic",
        help="mechanistic: M, C, K_eff from per-model curvature K and each run's learning rate, momentum and k_ref "
        "(needs them; predicts new settings); phenomenological: free damping ratio and frequency per model",
    )
    p.add_argument(
        "--likelihood",
        choices=("iid", "state-space"),
        type=spelled_like("iid", "state-space"),
        default="iid",
        help="iid Gaussian residuals around the closed-form trajectory (fast) or the exact state-space (Kalman) "
        "likelihood of the SDE plus measurement noise (slower)",
    )
    p.add_argument(
        "--invariance",
        choices=("shared", "by-group"),
        type=spelled_like("shared", "by-group"),
        default="shared",
        help="shared: one mean trajectory per model for every G (H0); by-group: per (model, G) offsets (H1)",
    )
    p.add_argument("--draws", type=positive_int, default=1000, help="posterior draws per chain")
    p.add_argument("--tune", type=non_negative_int, default=1000, help="tuning (warm-up) iterations per chain")
    p.add_argument("--chains", type=positive_int, default=4, help="number of chains")
    p.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        help="random seed: the same seed gives the same draws, with either sampler",
    )
    p.add_argument("--sampler", choices=("pymc", "nutpie"), default="pymc", help="NUTS implementation")
    p.add_argument("--target-accept", type=open_fraction, default=0.9, help="NUTS target acceptance rate")
    p.add_argument(
        "--max-treedepth",
        type=positive_int,
        default=10,
        help="NUTS maximum tree depth (2^depth leapfrog steps a draw); raise it when the convergence "
        "check says transitions hit it",
    )
    add_reward_bounds_flag(
        p,
        "every plateau p* and initial reward R0 of the fit lie inside, a logged reward outside is refused, "
        "and forecast --prior takes the bounds from the fit (default: unbounded)",
    )
    add_hyperparameter_defaults_flag(p)
    p.add_argument("--config", type=Path, default=None, help="JSON file of model-config overrides (priors as data)")
    add_progress_flag(p, "the sampling progress bar and PyMC's progress messages (its warnings are kept)")
    p.add_argument(
        "--strict",
        action="store_true",
        help=f"exit with status {UNCONVERGED_STATUS} (not 0) when the convergence check fails, for "
        "scripts and pipelines; the fit is written either way",
    )
    add_overwrite_flag(p, "replace the output file if it exists")
    add_json_flag(p)
    p.set_defaults(func=run_fit)


def flagged_unstable_runs(runset) -> dict[str, str]:
    """``{run id: evidence}`` of the runs the instability diagnostic flags by a signal the law cannot
    draw (sustained clipping, a growing importance ratio, a reward that diverges beyond any fitted
    curve). A damped reward oscillation alone is the law's underdamped regime, and a growing grad
    norm is confounded with the take-off of a run that starts at zero reward
    (``diagnostics.instability.TAKE_OFF_CONFOUNDED``): neither is listed. Runs before the fit, so
    the note comes before the sampling."""
    from bayes_grpo.diagnostics import detected_runs
    from bayes_grpo.diagnostics.instability import (
        TAKE_OFF_CONFOUNDED,
        WITHIN_THE_LAW,
        detected_signals,
    )

    out = {}
    for run_id, res in detected_runs(runset, "instability").items():
        signals, onset = detected_signals(res, leave_out=WITHIN_THE_LAW + TAKE_OFF_CONFOUNDED)
        if signals:
            out[run_id] = "; ".join(signals) + (f", from step {onset:g}" if onset is not None else "")
    return out


def unstable_run_note(run_id: str, evidence: str) -> str:
    return (
        f"run {run_id!r} is flagged by the instability diagnostic ({evidence}): the law is fitted to it "
        "like the other runs, but a run past the stability threshold whose reward is bounded (it "
        "saturates or swings instead of diverging) follows no trajectory of the law; leave it out of "
        "the run set if the fit should describe the stable runs (evidence: `bayes-grpo diagnose`)"
    )


def no_trend_note(runs, data) -> str | None:
    """The note on fitted runs without a visible trend (``has_trend`` False in the run summary;
    a constant run has its own note, :func:`bayes_grpo.model.prepare.shape_notes`), or None.

    Such a run (a flat, noisy log) shows no rise for the law to fit, yet it shares its LLM's
    plateau, curvature and noise ``D``: its misfit is counted as that LLM's noise, widening the
    bands of the LLM's other runs and predictions. ``fit`` printed nothing of it (the report and
    ``compare`` name such runs)."""
    from bayes_grpo.model.prepare import constant_reward

    constant = {str(r) for r, row in zip(data.run_ids, data.reward) if constant_reward(row)}
    names = [
        str(r)
        for r, trend in runs["has_trend"].items()
        if trend is not None and not bool(trend) and str(r) not in constant
    ]
    if not names:
        return None
    return (
        f"runs {names} show no visible trend (has_trend False; not evidence for or against the "
        "law): the law has no rise to fit there, yet each shares its LLM's plateau, curvature "
        "and noise D, and its misfit is counted as that LLM's noise; fit such runs apart (a "
        "model name of their own) or leave them out"
    )


def _group_records(groups, runs) -> list[dict]:
    """The rows of :meth:`GRPODynamicsModel.group_summary` for ``--json``, G as the table shows
    it (``readable_group_sizes``): ``reset_index`` turned the G of every group into a float
    (``4.0``) when one group's G is unknown (NaN). ``r2_note`` says why a group's R^2 are null
    (none of its runs has a visible trend), None where they are numbers. A (model, G) whose runs
    differ in a setting the coefficients depend on has a row per value, with that setting's
    key, as the printed table has."""
    from bayes_grpo.model.core import NO_TREND_R2_REASON, groups_without_trend
    from bayes_grpo.runset.schema import readable_group_sizes

    rows = groups.reset_index()
    rows["group_size"] = readable_group_sizes(groups.index.get_level_values("group_size"))
    rows["r2_note"] = [NO_TREND_R2_REASON if flat else None for flat in groups_without_trend(runs, groups)]
    return rows.to_dict(orient="records")


def run_fit(args: argparse.Namespace) -> int:
    from bayes_grpo.checks.ppc import iid_residual_check
    from bayes_grpo.constants import RUN_DIM, STEP_DIM
    from bayes_grpo.model import GRPODynamicsModel
    from bayes_grpo.model.core import (
        per_group_text,
        size_exponent_summary,
        too_short_for_trend_note,
        with_no_trend_r2,
    )
    from bayes_grpo.runset import REWARD_VAR, load_runset, require_runs
    from bayes_grpo.runset.bounds import bounds_text, check_rewards_within
    from bayes_grpo.runset.schema import group_sizes_as_text
    from bayes_grpo.runset.thin import long_runs_note

    check_output_paths(
        {"--output": args.output},
        {"run set": args.runs, "--config": args.config},
        overwrite=args.overwrite,
        netcdf=("--output",),
    )
    config = read_json_object(args.config) if args.config is not None else {}
    settings = dict(
        parameterisation=args.parameterisation,
        likelihood=args.likelihood,
        invariance=args.invariance.replace("-", "_"),
        # checked before the --config file's check below, which would put it down to the file
        reward_bounds=reward_bounds_arg(args),
    )
    if args.config is not None:
        try:
            GRPODynamicsModel(model_config=config, **settings)
        except ValueError as exc:
            # a wrong entry of the --config file: name the file (before the run set is read)
            raise ValueError(f"{args.config}: {exc}") from exc
    # the file is fine: a refusal now is of a --default value, which its message names (it was
    # put down to the --config file: "c.json: ... (--default momentum=...) must be in [0, 1)")
    model = GRPODynamicsModel(model_config=with_hyperparameter_defaults(config, args.defaults), **settings)
    runset = load_runset(args.runs)
    with naming_the_run_set(args.runs):
        # no run: refused as the fit would refuse it (the instability diagnostic below said
        # "nothing to diagnose" of a fit)
        require_runs(runset, "fit")
        # the first look at the data (the fit checks it again): it came after the instability
        # diagnostic had run and printed its notes
        reward = runset[REWARD_VAR].transpose(RUN_DIM, STEP_DIM)
        check_rewards_within(reward.values, reward[RUN_DIM].values, reward[STEP_DIM].values, model.reward_bounds)
    unstable = flagged_unstable_runs(runset)
    # long runs: said before the sampling (it can take many minutes), not again after it
    long_runs = long_runs_note(runset)
    if not args.json:
        for run_id, summary in unstable.items():
            print(f"bayes-grpo fit: note: {unstable_run_note(run_id, summary)}", file=sys.stderr)
        if long_runs:
            print(f"bayes-grpo fit: note: {long_runs}", file=sys.stderr)
    progress = show_progress(args)
    with naming_the_run_set(args.runs), sampler_messages(progress):
        model.fit(
            runset,
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            random_seed=args.seed,
            sampler=args.sampler,
            progressbar=progress,
            target_accept=args.target_accept,
            max_treedepth=args.max_treedepth,
        )
    path = model.save(args.output, overwrite=args.overwrite)
    conv = model.convergence()
    independence = iid_residual_check(model)
    runs = model.run_summary()
    groups = model.group_summary()
    no_trend = no_trend_note(runs, model.data)
    too_short = too_short_for_trend_note(runs)  # has_trend blank: say why
    notes = [*model.data.notes, *([no_trend] if no_trend else []), *([too_short] if too_short else [])]
    scaling = size_exponent_summary(model)
    noise_exponent = model.noise_exponent_summary()
    if args.json:
        print_json(
            {
                "output": str(path),
                "settings": model.settings,
                "fit_seconds": model.fit_seconds,
                "convergence": conv.to_dict(),
                "notes": notes,
                "size_exponent": scaling,
                "noise_exponent": noise_exponent,
                "units": model.coefficient_units(),
                "flagged_unstable": {r: unstable_run_note(r, s) for r, s in unstable.items()},
                "residual_autocorrelation": None if independence is None else independence.to_dict(),
                # the settings by which a (model, G)'s rows are split, each a key of those rows
                "groups_split_by": model.mixed_settings(runs),
                "groups": _group_records(groups, runs),
                "runs": runs.reset_index().to_dict(orient="records"),
            }
        )
    else:
        bounds_title = "" if model.reward_bounds is None else f", reward bounds {bounds_text(model.reward_bounds)}"
        # the settings a (model, G) of the runs differs in, by which its rows are split (the
        # medians of a K_ref sweep at one G mixed the damping of every K_ref into one row)
        split = [c for c in model.mixed_settings(runs) if c in groups.columns]
        cols = [*split, "p_star", model.gain_column, "M_eff", "C_eff", "K_eff", "zeta", "D", "r2_raw", "r2_noise_ceiling", "r2_smoothed", "n_runs", "n_runs_r2"]
        # a group whose runs all lack a trend read NaN for its R^2: "no trend", as the report says
        table = with_no_trend_r2(runs, groups[cols])
        print_table(group_sizes_as_text(table), title=f"posterior medians per {per_group_text(split)} ({model.parameterisation}, {model.likelihood}{bounds_title})")
        if split:
            print(
                f"the runs of one model and G differ in {' and '.join(split)}, of the settings the "
                "coefficients (M_eff, C_eff, K_eff, zeta) follow from: one row per value, so that no "
                "median mixes two settings"
            )
        print(model.units_note())
        print()
        if model.parameterisation == "phenomenological":
            print("phenomenological form: M_eff = 1, C_eff = 2 zeta w0, K_eff = w0_sq = w0^2 (per step^2); the runs' learning rate and K_ref do not enter")
        if scaling is not None:
            print(
                f"curvature scaling: K ~ model_size^beta, beta = {scaling['median']:.3g} "
                f"[{scaling['lo']:.3g}, {scaling['hi']:.3g}] ({scaling['prob']:.0%} interval) over "
                f"{len(scaling['llms'])} LLMs of known size"
            )
        if noise_exponent is not None and noise_exponent["note"]:
            # the note gives the interval too: one line, not the interval and then the note
            # restating it three lines further down under the same label
            # under its label the note's own opening "the noise exponent alpha" said it twice
            print(f"noise exponent: {noise_exponent['note'].removeprefix('the noise exponent ')}")
        elif noise_exponent is not None:
            print(
                f"noise exponent: sigma^2 = D / G^alpha, alpha = {noise_exponent['median']:.3g} "
                f"[{noise_exponent['lo']:.3g}, {noise_exponent['hi']:.3g}] ({noise_exponent['prob']:.0%} interval; theory 1)"
            )
        # each summary names itself ('Converged: ...' / 'Convergence problems: ...', 'Residual
        # lag-1 autocorrelation ...'): under a label they read "convergence: Convergence problems"
        print(conv.summary)
        if independence is not None and independence.passed is False:
            print(independence.summary)
        for note in notes:
            if note != long_runs:
                print(f"note: {note}")
        print(f"saved {path} ({model.fit_seconds:.1f} s sampling incl. compilation)")
    if args.strict and not conv.passed:
        print(
            f"bayes-grpo fit: error: --strict: the fit did not converge ({'; '.join(conv.values.get('failed', []))}); "
            f"it was written to {path}",
            file=sys.stderr,
        )
        return UNCONVERGED_STATUS
    return 0
