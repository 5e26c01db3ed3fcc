"""``bayes-grpo invariance``: is the mean trajectory the same for every group size G?"""

from __future__ import annotations

import argparse
import dataclasses

from bayes_grpo.cli._common import (
    add_hyperparameter_defaults_flag,
    add_json_flag,
    add_progress_flag,
    add_reward_bounds_flag,
    naming_the_run_set,
    non_negative_int,
    positive_float,
    positive_int,
    print_json,
    print_table,
    progress_lines,
    reward_bounds_arg,
    sampler_messages,
    show_progress,
    spelled_like,
    with_hyperparameter_defaults,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "invariance",
        help="G-invariance test: Bayes factor BF01 by two methods, noise exponent alpha, verdict",
        description=(
            "Test whether the deterministic reward trajectory (plateau, initial reward, stiffness, damping) "
            "is shared across group sizes G within each model (H0) or differs by G (H1). Computes the Bayes "
            "factor BF01 = p(data|H0)/p(data|H1) from NUTS fits of H0 and H1 by two methods: bridge sampling of "
            "each marginal likelihood (Meng-Wong iterative scheme, normal proposal; Monte Carlo error from the "
            "relative mean-squared error) and the Savage-Dickey density ratio on the H1 offsets; optionally "
            "(--smc-draws > 0) the ratio of SMC marginal likelihoods as a third figure; a "
            "prior-width sensitivity table (0.5x, 1x, 2x the offset prior scale), the posterior of the noise "
            "exponent alpha in sigma^2 ~ G^-alpha (theory 1), and a verdict in words. Needs runs of one model "
            "at two or more group sizes."
        ),
    )
    p.add_argument("runset", help="run set netCDF (from `bayes-grpo ingest` or any loader)")
    p.add_argument(
        "--parameterisation",
        choices=["mechanistic", "phenomenological"],
        default="mechanistic",
        help="model parameterisation (default mechanistic; needs learning_rate, momentum, k_ref)",
    )
    p.add_argument(
        "--likelihood",
        choices=["iid", "state_space"],
        type=spelled_like("iid", "state_space"),
        default="iid",
        help="observation model (default iid: Gaussian residuals)",
    )
    add_reward_bounds_flag(
        p,
        "every plateau p* and initial reward R0 of H0 and H1 lie inside, as in `fit --reward-bounds` "
        "(default: unbounded)",
    )
    p.add_argument(
        "--draws",
        type=positive_int,
        default=1000,
        help=(
            "NUTS draws per chain (default 1000; bridge sampling needs chains x draws/2 >= 4 per "
            "parameter of H1, checked before sampling)"
        ),
    )
    p.add_argument(
        "--tune", type=non_negative_int, default=1000, help="NUTS tuning steps per chain (default 1000)"
    )
    p.add_argument(
        "--chains", type=positive_int, default=2, help="NUTS chains (default 2; run one after the other)"
    )
    p.add_argument(
        "--smc-draws",
        type=non_negative_int,
        default=0,
        help="SMC particles per chain for the optional third figure (default 0: no SMC; else at least 2)",
    )
    p.add_argument(
        "--smc-chains",
        type=positive_int,
        default=2,
        help="independent SMC chains (default 2; >= 2 for an error)",
    )
    p.add_argument(
        "--prior-scales",
        type=positive_float,
        nargs="+",
        default=[0.5, 1.0, 2.0],
        help="multiples of the offset prior sd for the sensitivity table (default 0.5 1 2)",
    )
    p.add_argument(
        "--offset-sigma",
        type=positive_float,
        default=None,
        help="offset prior sd at scale 1 (default: the model config's group_offset_sigma)",
    )
    p.add_argument(
        "--sd-method",
        choices=["gaussian", "importance", "kde"],
        default="gaussian",
        help=(
            "posterior density of the offsets at 0 for Savage-Dickey: gaussian (normal fit of the NUTS "
            "draws; default), importance (importance-weighted marginal density, conditional-normal "
            "weight), kde (1-2 offsets only)"
        ),
    )
    # -1 was taken, then failed after the H0 model was built and compiled, as "marginal likelihood
    # of H0 (...): Setting random_seed = -1 is not allowed"
    p.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default 0)")
    add_progress_flag(p, "the sampling progress (a line and PyMC's progress bar and messages per fit)")
    add_hyperparameter_defaults_flag(p)
    add_json_flag(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from bayes_grpo.checks.invariance import invariance_check
    from bayes_grpo.runset import load_runset

    bounds = reward_bounds_arg(args)  # refused before the run set is read
    ds = load_runset(args.runset)
    config = {"group_offset_sigma": args.offset_sigma} if args.offset_sigma is not None else None
    config = with_hyperparameter_defaults(config, args.defaults)
    # as `fit` and `compare` show their sampling: not under --no-progress or --json
    shown = show_progress(args)
    with naming_the_run_set(args.runset), sampler_messages(shown):
        result = invariance_check(
            ds,
            model_config=config,
            parameterisation=args.parameterisation,
            likelihood=args.likelihood,
            reward_bounds=bounds,
            prior_scales=args.prior_scales,
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            smc_draws=args.smc_draws,
            smc_chains=args.smc_chains,
            sd_method=args.sd_method,
            random_seed=args.seed,
            progress=progress_lines(args, "invariance"),
        )
    if result.table is not None and not args.smc_draws:
        # without SMC its columns read NaN and "smc_chains_finite_h0 0", as if every chain failed:
        # dropped from the text and, as there, from --json's table (it kept them)
        result = dataclasses.replace(
            result, table=result.table.drop(columns=[c for c in result.table.columns if "smc" in c])
        )
    if args.json:
        print_json(result.to_dict())
        return 0
    print(result.summary)
    if result.table is not None:
        print()
        print_table(
            result.table,
            title="Prior-width sensitivity (natural-log Bayes factors; > 0 favours invariance)",
        )
    return 0
