"""``bayes-grpo ppc``: the posterior predictive checks of a saved fit, per group size G."""

from __future__ import annotations

import argparse
from pathlib import Path

from bayes_grpo.checks.ppc import COVERAGE_SLACK
from bayes_grpo.cli._common import (
    RawWrappedDescriptionFormatter,
    add_json_flag,
    add_overwrite_flag,
    add_progress_flag,
    check_output_paths,
    non_negative_int,
    positive_int,
    print_json,
    print_table,
    progress_lines,
    sampler_messages,
    show_progress,
    warn_unused_sampler_options,
)
from bayes_grpo.constants import HDI_PROB

_DESCRIPTION = f"""\
Check a posterior saved by `bayes-grpo fit` against the rewards it was fitted to, per LLM and
group size G (DESIGN.md section 3, bayes_grpo.checks.ppc.ppc_checks):

  trajectory bands      the share of logged rewards inside the {HDI_PROB:.0%} posterior predictive band
                        of a new run at each run's setting (passes at {HDI_PROB - COVERAGE_SLACK:.0%} or more), with one
                        figure of bands and data per LLM and G
  residual              the lag-1..5 autocorrelation of each run's residuals about its fitted
  autocorrelation       trajectory (a wander that the i.i.d. likelihood takes as independent)
  stationary variance   the reward's variance at the plateau against D / (2 G C K_eff), the
                        SDE's prediction (a state-space fit only)

With --leave-one-g-out, also refit on one G and predict the other's rewards, per LLM at two or
more G (bayes_grpo.checks.invariance.leave_one_g_out: samples, slower; the fit's priors,
parameterisation, likelihood and reward bounds). Exit status 0 whatever the verdicts; 2 on bad
input."""

EPILOG = """\
examples:
  bayes-grpo ppc models/tiny.nc
  bayes-grpo ppc models/tiny.nc --figures ppc_figures --json
  bayes-grpo ppc models/tiny.nc --leave-one-g-out --draws 300 --tune 300
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "ppc",
        help="posterior predictive checks of a saved fit per G: band coverage, residual autocorrelation, "
        "stationary variance",
        description=_DESCRIPTION,
        epilog=EPILOG,
        formatter_class=RawWrappedDescriptionFormatter,
    )
    p.add_argument("posterior", type=Path, help="posterior netCDF saved by `bayes-grpo fit` (models/NAME.nc)")
    p.add_argument(
        "--runs",
        type=Path,
        metavar="RUNS",
        help="run set netCDF to check (default: the fitted runs; a run the fit did not see is "
        "checked against a new run of its LLM, which must be one of the fit's)",
    )
    p.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default 0)")
    p.add_argument(
        "--figures",
        type=Path,
        metavar="DIR",
        help="write each figure as PNG into DIR (the band figure of each LLM and G, and with "
        "--leave-one-g-out one per pair), named after it; --json gives the files as 'figures'",
    )
    p.add_argument(
        "--leave-one-g-out",
        action="store_true",
        help="also fit on one G and predict the other, per LLM at two or more G (samples: slower)",
    )
    sampled = "of the --leave-one-g-out fits (default: the fit's own)"
    p.add_argument("--draws", type=positive_int, help="NUTS draws per chain " + sampled)
    p.add_argument("--tune", type=non_negative_int, help="NUTS tuning steps per chain " + sampled)
    p.add_argument("--chains", type=positive_int, help="NUTS chains " + sampled)
    add_progress_flag(p, "the progress of the --leave-one-g-out fits (a line and PyMC's progress bar per fit)")
    add_overwrite_flag(p, "replace figures of the same name in DIR")
    add_json_flag(p)
    p.set_defaults(func=_run)


def figure_file_stems(titles: list[str]) -> dict[str, str]:
    """``{figure title: file-name stem}`` of the ``--figures`` files: the title with ``/``, spaces
    and ``=`` made file-name friendly (``tiny-gpt2 G=16 bands`` -> ``tiny-gpt2_G16_bands``),
    ``-2``, ``-3`` ... after one that then reads as an earlier one."""
    from bayes_grpo.cli.diagnose import figure_stems

    friendly = {t: t.replace("/", "_").replace(" -> ", "_to_").replace("=", "").replace(" ", "_") for t in titles}
    stems = figure_stems(list(friendly.values()))
    return {t: stems[f] for t, f in friendly.items()}


def _run(args: argparse.Namespace) -> int:
    from bayes_grpo._io import write_atomic
    from bayes_grpo.checks.ppc import ppc_checks
    from bayes_grpo.model.core import as_fitted_model

    if args.figures is not None and args.figures.exists() and not args.figures.is_dir():
        # before the work: the figures' paths are known after it
        raise FileExistsError(f"{args.figures}: --figures is a file; give a folder")
    warn_unused_sampler_options(args, args.leave_one_g_out, "the fits of --leave-one-g-out, which was not asked")
    runset = None
    if args.runs is not None:
        from bayes_grpo.runset import load_runset

        runset = load_runset(args.runs)
    # as predict / stability / phase-diagram / report load a fit: its warnings (did not converge,
    # an i.i.d. fit too confident) on stderr, and in --json as posterior_warnings
    fitted, load_notes = as_fitted_model(args.posterior)
    try:
        results = ppc_checks(fitted, runset, seed=args.seed)
    except ValueError as exc:  # a run the fit cannot give coefficients for: which file?
        raise ValueError(f"{args.runs or args.posterior}: {exc}") from exc
    if args.leave_one_g_out:
        from bayes_grpo.checks.invariance import leave_one_g_out

        # the fit's own model: its priors and defaults (`fit --default`), likelihood and reward
        # bounds, on the runs it was fitted to (or those of --runs)
        # as `invariance` shows its fits: a line and PyMC's bar per fit, not under --no-progress or --json
        with sampler_messages(show_progress(args)):
            results.append(
                leave_one_g_out(
                    runset if runset is not None else fitted.runset,
                    **fitted.refit_settings(draws=args.draws, tune=args.tune, chains=args.chains),
                    random_seed=args.seed,
                    progress=progress_lines(args, "ppc"),
                )
            )
    figure_of: dict[int, list[str]] = {}
    if args.figures is not None:
        import matplotlib.pyplot as plt

        stems = figure_file_stems([title for r in results for title in r.figures])
        figures = [
            (i, args.figures / f"{stems[title]}.png", fig) for i, r in enumerate(results) for title, fig in r.figures.items()
        ]
        # every name is checked before the first figure is written
        check_output_paths({"--figures": [path for _, path, _ in figures]}, overwrite=args.overwrite)
        for i, path, fig in figures:
            write_atomic(
                path,
                lambda tmp, fig=fig: fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight"),
                overwrite=args.overwrite,
            )
            plt.close(fig)
            figure_of.setdefault(i, []).append(str(path))
    if args.json:
        print_json(
            {
                "posterior": str(args.posterior),
                "runs": None if args.runs is None else str(args.runs),
                "posterior_warnings": load_notes,
                "results": [
                    r.to_dict() | ({"figures": figure_of.get(i, [])} if args.figures is not None else {})
                    for i, r in enumerate(results)
                ],
            }
        )
        return 0
    for i, r in enumerate(results):
        if i:
            print()
        verdict = "not assessable" if r.passed is None else ("pass" if r.passed else "flagged")
        print(f"[{r.name}] {verdict}: {r.summary}")
        if r.table is not None and len(r.table):
            print_table(r.table)
        for path in figure_of.get(i, []):
            print(f"figure written to {path}")
    return 0


__all__ = ["register", "figure_file_stems"]
