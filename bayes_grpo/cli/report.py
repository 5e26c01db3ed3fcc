"""``bayes-grpo report`` and ``bayes-grpo demo``: the HTML report, and the whole flow on the example data."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bayes_grpo.cli._common import (
    DefaultsHelpFormatter,
    add_json_flag,
    add_overwrite_flag,
    check_output_paths,
    naming_the_run_set,
    non_negative_int,
    positive_int,
    print_json,
    sampler_messages,
    warn_unused_sampler_options,
)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "report",
        help="write the self-contained HTML report of a fitted posterior",
        description=(
            "Write one self-contained HTML file (images embedded, no network) from a posterior saved by "
            "`bayes-grpo fit`: data overview, fit per run with bands and R^2, convergence, posteriors of "
            "M_eff, C_eff, K_eff, zeta and D (with their units), the posterior predictive checks per G (as "
            "`bayes-grpo ppc`), the failure-mode diagnostics and the stability phase diagram (unless --no-ppc / "
            "--no-diagnose / --no-stability), and, as asked, G-invariance Bayes factors "
            "(--invariance), the law comparison (--compare) and saved predictions (--prediction). Sections whose "
            "inputs are absent say so. --json prints the report's path, the saved fit's warnings "
            "(posterior_warnings), the overview's warnings on the run set (runset_notes: evaluation_reward, "
            "ingest, rejected, runs) and each section's verdicts (sections: per check its verdict and summary, "
            "as the HTML shows them)."
        ),
        formatter_class=DefaultsHelpFormatter,
    )
    p.add_argument("posterior", type=Path, help="posterior netCDF written by `bayes-grpo fit`")
    p.add_argument("-o", "--output", type=Path, required=True, help="HTML file to write")
    p.add_argument("--runs", type=Path, help="run set for the overview and diagnostics (default: the fitted runs)")
    p.add_argument("--no-diagnose", action="store_true", help="skip the failure-mode diagnostics")
    p.add_argument("--no-stability", action="store_true", help="skip the stability phase diagram")
    p.add_argument("--no-ppc", action="store_true", help="skip the posterior predictive checks (bayes-grpo ppc)")
    p.add_argument("--invariance", action="store_true", help="run the G-invariance Bayes factors (samples: slower)")
    p.add_argument("--compare", action="store_true", help="run the law comparison (samples: slower)")
    p.add_argument("--prediction", type=Path, action="append", default=[], help="prediction/forecast netCDF to include (repeatable)")
    p.add_argument("--title", help="report title")
    sampled = "of the sampled stages (default: the fit's own for --invariance, {} for --compare as in `bayes-grpo compare`)"
    p.add_argument("--draws", type=positive_int, help="NUTS draws per chain " + sampled.format(500))
    p.add_argument("--tune", type=non_negative_int, help="NUTS tuning steps per chain " + sampled.format(500))
    p.add_argument("--chains", type=positive_int, help="NUTS chains " + sampled.format(2))
    p.add_argument("--seed", type=non_negative_int, default=0, help="random seed of the sampled stages and the posterior predictive draws")
    add_overwrite_flag(p, "replace the output file if it exists")
    add_json_flag(p)
    p.set_defaults(func=_report)

    d = subparsers.add_parser(
        "demo",
        help="run the whole flow on the shipped example runs and write report.html",
        description=(
            "Ingest the shipped example runs (real TRL runs of a tiny model in data/tiny), diagnose them, fit "
            "the hierarchical model to the healthy ones, test G-invariance, draw the stability phase diagram, "
            "predict one new setting, and write OUT/report.html (with runs.nc, posterior.nc, phase.png, prediction.nc). "
            "--json prints, as `report --json` does, the report's path, the fit's warnings (posterior_warnings), "
            "the overview's warnings on the run set (runset_notes) and each section's verdicts (sections), with the demo's files (runs, posterior, phase, prediction), fitted and excluded runs, timings and headline; "
            "the progress lines go to stderr."
        ),
        formatter_class=DefaultsHelpFormatter,
    )
    d.add_argument("--out", type=Path, default=Path("demo_output"), help="output folder")
    d.add_argument("--data", type=Path, help="folder of run directories (default: the shipped data/tiny)")
    d.add_argument("--fast", action="store_true", help="small sampler settings (for CI and quick looks)")
    d.add_argument("--seed", type=non_negative_int, default=0, help="random seed")
    add_overwrite_flag(d, "replace the demo's files in OUT if they exist")
    add_json_flag(d)
    d.set_defaults(func=_demo)


def _report(args: argparse.Namespace) -> int:
    from bayes_grpo.report.build import report_from_posterior

    check_output_paths(
        {"--output": args.output},
        {"posterior": args.posterior, "--runs": args.runs, "--prediction": args.prediction},
        overwrite=args.overwrite,
        html=("--output",),
    )
    warn_unused_sampler_options(
        args, args.invariance or args.compare, "the sampled stages, --invariance and --compare, and neither was asked"
    )
    runset = None
    if args.runs is not None:
        from bayes_grpo.runset import load_runset, require_runs

        runset = load_runset(args.runs)
        with naming_the_run_set(args.runs):  # before the fit is read: no run, no report
            require_runs(runset, "report on")
    load_notes: list[str] = []  # the saved fit's own warnings (stderr has them too)
    verdicts: list[dict] = []  # what each section concludes, as the HTML shows it
    runset_notes: dict = {}  # what the overview warns of the run set, as the HTML shows it
    # the sampled stages: PyMC's progress messages not under --json (no PyMC import without them)
    with sampler_messages(not (args.json and (args.invariance or args.compare))):
        path = report_from_posterior(
            args.posterior,
            args.output,
            runset=runset,
            diagnose=not args.no_diagnose,
            stability=not args.no_stability,
            ppc=not args.no_ppc,
            invariance=args.invariance,
            compare=args.compare,
            predictions=args.prediction,
            title=args.title,
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            seed=args.seed,
            overwrite=args.overwrite,
            posterior_warnings=load_notes,
            verdicts=verdicts,
            runset_notes=runset_notes,
        )
    if args.json:
        # as `predict` / `stability` / `phase-diagram --json` give them: they were on stderr only;
        # and the report's verdicts (it printed the path alone: the HTML had to be opened to
        # learn that the fit failed to converge or a run was flagged)
        # and the overview's warnings on the run set (the ingest's notes, the sources not
        # ingested, each run's notes, a reward read from an evaluation metric): HTML only before
        print_json(
            {
                "report": str(path),
                "posterior_warnings": load_notes,
                "runset_notes": runset_notes,
                "sections": verdicts,
            }
        )
    else:
        print(f"wrote {path}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from bayes_grpo.report.demo import DEMO_OUTPUTS, run_demo

    if args.out.exists() and not args.out.is_dir():
        raise FileExistsError(f"{args.out}: --out is a file; give a folder")
    check_output_paths({"--out": [args.out / name for name in DEMO_OUTPUTS]}, overwrite=args.overwrite)
    say = (lambda line: print(line, file=sys.stderr)) if args.json else print
    with sampler_messages(not args.json):
        result = run_demo(
            args.out, data_dir=args.data, fast=args.fast, seed=args.seed, progress=say, overwrite=args.overwrite
        )
    if args.json:
        print_json(
            {
                "report": str(result.report),
                # as `report --json` gives them for a saved fit: the fit's warnings and each
                # section's verdicts (the demo printed the paths, runs and headline only)
                "posterior_warnings": result.posterior_warnings,
                "runset_notes": result.runset_notes,
                "sections": result.sections,
                "runs": str(result.runs_file),
                "posterior": str(result.posterior_file),
                # the two other files it writes (the phase diagram: null when none was drawn)
                "phase": None if result.phase_file is None else str(result.phase_file),
                "prediction": None if result.prediction_file is None else str(result.prediction_file),
                "fitted_runs": result.fitted_runs,
                "excluded_runs": result.excluded_runs,
                "timings_s": result.timings,
                "headline": result.headline,
            }
        )
    return 0
