"""``bayes-grpo phase-diagram``: posterior stability map over learning rate and K_ref."""

from __future__ import annotations

import argparse

import numpy as np

from bayes_grpo.cli._common import (
    add_json_flag,
    add_overwrite_flag,
    check_output_paths,
    figure_format,
    finite_float,
    momentum_value,
    non_negative_int,
    positive_float,
    print_json,
    print_table,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "phase-diagram",
        help="phase diagram over (learning rate, K_ref) with posterior contours of instability and oscillation",
        description=(
            "Draw the posterior probability of instability (exact discrete criterion, with the closed-form "
            "0.5 contour dashed) and of the oscillatory regime (0 < zeta < 1) over a grid of learning rates "
            "and lags K_ref, from a fitted posterior, with the fitted runs marked. Prints the threshold "
            "learning rate per K_ref (posterior median and 90% interval)."
        ),
    )
    p.add_argument("posterior", help="posterior netCDF saved by `bayes-grpo fit` (models/NAME.nc)")
    p.add_argument(
        "-o", "--output", required=True, help="where to write the figure (PNG, SVG or PDF)"
    )
    p.add_argument(
        "--momentum",
        type=momentum_value,
        default=None,
        help="momentum mu (heavy-ball) or Adam beta1 (ema); default: that of the most common setting "
        "(momentum and convention) of the fitted runs, those of --model when it names a fitted LLM",
    )
    p.add_argument(
        "--momentum-convention",
        "--convention",
        dest="momentum_convention",
        choices=["heavy_ball", "ema"],
        default=None,
        help="momentum convention; default: that of the most common setting of the fitted runs (at the "
        "given --momentum, when runs have it)",
    )
    # the defaults are checks.stability.phase_diagram's grid (the help named none, nor that the
    # two go together)
    p.add_argument(
        "--lr-min",
        type=finite_float,
        default=None,
        help="smallest learning rate of the grid, given with --lr-max (default: the posterior-median "
        "threshold rate at K_ref 1 / 30, or half the threshold at the largest K_ref or half the "
        "smallest rate of the runs marked where lower)",
    )
    p.add_argument(
        "--lr-max",
        type=finite_float,
        default=None,
        help="largest learning rate of the grid, given with --lr-min (default: three times the posterior-median "
        "threshold rate at K_ref 1, or twice the largest rate of the runs marked where higher)",
    )
    p.add_argument(
        "--n-lr", type=int, default=40, help="number of log-spaced learning rates (default 40)"
    )
    p.add_argument(
        "--k-ref-max",
        type=non_negative_int,
        default=None,
        help="largest K_ref of the grid (default max(16, 2x the largest K_ref of the runs marked))",
    )
    p.add_argument(
        "--model",
        default=None,
        help="LLM name in the posterior (default: the fit's LLM when it has only one, else a new model, "
        "population level)",
    )
    p.add_argument(
        "--model-size",
        type=positive_float,
        default=None,
        help="parameter count of a new LLM (needed when the fit regresses the curvature on model size)",
    )
    add_overwrite_flag(p, "replace the output file if it exists")
    add_json_flag(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from bayes_grpo._io import write_atomic
    from bayes_grpo.checks.stability import (
        _fitted_llm,
        _require_mechanistic,
        most_common_setting,
        phase_diagram,
        runset_as_fitted,
    )
    from bayes_grpo.model.core import as_fitted_model
    from bayes_grpo.model.prepare import convention_without_momentum

    check_output_paths(
        {"--output": args.output},
        {"posterior": args.posterior},
        overwrite=args.overwrite,
        figures=("--output",),
    )
    if args.n_lr < 2:
        raise ValueError(f"--n-lr must be at least 2 (the grid's learning rates), got {args.n_lr}")
    fitted, load_notes = as_fitted_model(args.posterior)
    _require_mechanistic(str(getattr(fitted, "parameterisation", "mechanistic")), args.posterior)
    # the runs' settings as the fit took them (a momentum from `fit --default` included), as
    # the diagram marks them
    ds = runset_as_fitted(fitted)
    momentum, convention = args.momentum, args.momentum_convention
    if ds is not None and (momentum is None or convention is None):
        momentum, convention = most_common_setting(
            ds, momentum=momentum, convention=convention, llm=_fitted_llm(fitted, args.model)
        )
    if convention is None and momentum is not None:
        # at momentum 0 the conventions are one optimizer step: the fit's rule, which predict and
        # `stability --posterior` follow (runs logged without a convention at momentum 0 were
        # refused here)
        convention = convention_without_momentum([momentum], [""])[0] or None
    if momentum is None or convention is None:
        raise ValueError(
            f"{args.posterior}: give --momentum and --momentum-convention (not recorded in the fitted runs)"
        )
    lrs = None
    if args.lr_min is not None or args.lr_max is not None:
        if args.lr_min is None or args.lr_max is None or not 0 < args.lr_min < args.lr_max:
            raise ValueError("give both --lr-min and --lr-max with 0 < lr-min < lr-max")
        lrs = np.geomspace(args.lr_min, args.lr_max, args.n_lr)
    k_refs = np.arange(0, args.k_ref_max + 1) if args.k_ref_max is not None else None
    result = phase_diagram(
        fitted,
        momentum=momentum,
        momentum_convention=convention,
        learning_rates=lrs,
        k_refs=k_refs,
        model=args.model,
        model_size=args.model_size,
        n_learning_rates=args.n_lr,
    )
    fig = result.figures["phase diagram"]
    fmt = figure_format(args.output, "--output")
    write_atomic(
        args.output,
        lambda tmp: fig.savefig(tmp, dpi=130, bbox_inches="tight", format=fmt),
        overwrite=args.overwrite,
    )
    if args.json:
        # the saved fit's own warnings (stderr has them too), where `predict --json` gives them,
        # once: values["posterior_warnings"] read [] beside them (the check was given the model
        # this verb loaded, not the file), as `stability --posterior --json` pops them too
        out = result.to_dict()
        out["values"].pop("posterior_warnings", None)
        print_json(out | {"posterior_warnings": load_notes, "figure": str(args.output)})
        return 0
    print(result.summary)
    print(f"figure written to {args.output}")
    print_table(
        result.table,
        title="Threshold learning rate per K_ref (exact criterion; median and 90% interval)",
    )
    return 0
