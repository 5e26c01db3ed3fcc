"""``bayes-grpo ingest``: read GRPO logs into a run set (netCDF) and print a table of the runs."""

from __future__ import annotations

import argparse
import math
import warnings
from pathlib import Path

from bayes_grpo.cli._common import (
    RawWrappedDescriptionFormatter,
    add_json_flag,
    add_overwrite_flag,
    check_output_paths,
    positive_int,
    print_json,
    print_table,
)

EPILOG = """\
formats (auto-detected; folders are searched recursively):
  trainer_state.json      TRL / HF Trainer state: a file, a run folder, or an output folder
                          with checkpoint-* (its own state, else the latest checkpoint's); eval_* -> eval variables
  events.out.tfevents.*   TensorBoard scalars; the GRPOConfig text summary gives G, lr, beta, seed
  *.csv / *.tsv           wide (step + metrics), long wandb exports (run_name,metric,step,value),
                          wandb panel exports ("<run> - <metric>"), several runs per file
  *.jsonl / *.ndjson      one object per step (a .json of such lines or a list of them too); typed
                          records (train/rollout/eval) merged by step;
                          verl's file logger ({"step": N, "data": {...}}) too
  *.log / *.txt / *.out   console output: the Trainer's printed metric dicts, or verl's
                          'step:N - key:value' lines
verl and OpenRLHF count rollout iterations: with k_ref > 1 from their config, rollout iteration n
is stored at optimizer step (n - 1) k_ref + 1 (its evaluation at n k_ref).

reward: TRL 'reward' (also train/reward, train_reward, critic/score/mean, rollout/reward,
mean_reward), else the single rewards/<func>/mean, else an accuracy-like metric, else an
evaluation reward (with a warning). Override with --reward-key. Hyperparameters: manifest > bayes_grpo_run.json > config inside the
log > training_args.json/config.yaml beside it > model config.json > constants logged as metrics
(and a text column of one value naming the model, momentum_convention or optimizer: SGD
heavy_ball, Adam ema).

bad runs are skipped and reported (status 'rejected' with the reason) unless --strict.
--json: the top-level 'n_steps' (also 'step_axis_length') is the length of the run set's step
axis, the union of the steps any run logged; a run's 'n_steps' (also 'n_points', the table's
'points') counts its own logged reward points, and first_step / last_step the steps they span.
manifest (CSV/YAML): columns path, run (or id), run_name, reward_key, logging_steps, and any of
model, model_size, group_size, learning_rate, momentum, momentum_convention, k_ref, beta, seed,
completions_per_step.

examples:
  bayes-grpo ingest outputs/ -o runs.nc
  bayes-grpo ingest wandb_export.csv --reward-key train/rewards/accuracy/mean -o runs.nc --json
  bayes-grpo ingest --manifest runs.yaml -o runs.nc
"""

TABLE_COLUMNS = (
    "status",
    "model",
    "group_size",
    "completions_per_step",
    "n_steps",
    "step_span",
    "reward_first",
    "reward_last",
    "learning_rate",
    "momentum",
    "momentum_convention",
    "k_ref",
    "beta",
    "seed",
    "reward_source",
    "n_nonfinite_reward",
)
SHORT = {
    "group_size": "G",
    "completions_per_step": "per_step",
    # the reward's logged points, not optimizer steps: a run logged every 10 steps over 1000
    # steps showed "steps 100"; the steps they span are the next column
    "n_steps": "points",
    "step_span": "steps",
    "reward_first": "r_first",
    "reward_last": "r_last",
    "learning_rate": "lr",
    "momentum": "mu",
    "momentum_convention": "conv",
    "n_nonfinite_reward": "nan",
    "reward_source": "reward_from",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ingest",
        help="read GRPO logs (TRL, TensorBoard, CSV/JSONL, console) into a run set (netCDF)",
        description=(
            # raw text (RawDescriptionHelpFormatter): wrapped here, it printed as one 190-character
            # line; the table has no warnings column (they follow it) and shows completions per step
            "Read GRPO training logs into one run set (xarray, dims run x step, one coordinate per\n"
            "hyperparameter), save it as netCDF and print one line per run: id, status, model, G,\n"
            "completions per step (per_step), the reward's logged points and the steps they span,\n"
            "first/last reward, hyperparameters, the metric read as the reward and its NaN count;\n"
            "then each run's warnings. Runs that cannot be used are listed with the reason."
        ),
        epilog=EPILOG,
        formatter_class=RawWrappedDescriptionFormatter,
    )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="log files (also compressed: .gz, .bz2, .xz, .lzma; .zst with the zstandard module) or folders to read, or one run set "
        "saved by ingest (.nc: re-read as it is, e.g. to re-time it with --lr-clock)",
    )
    parser.add_argument(
        "--manifest",
        metavar="FILE",
        help="CSV or YAML manifest: one row per run (path + coordinates)",
    )
    parser.add_argument(
        "--reward-key",
        metavar="KEY",
        help="metric to use as the reward in every run (source name such as train/rewards/acc/mean, or a canonical name)",
    )
    parser.add_argument(
        "--min-points",
        type=positive_int,
        default=None,  # None: MIN_POINTS; told apart from a given 10, which a saved run set refuses
        metavar="N",
        help="reject runs with fewer finite reward values (default 10)",
    )
    parser.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="netCDF file to write (atomically)"
    )
    parser.add_argument(
        "--strict", action="store_true", help="stop at the first bad run instead of skipping it"
    )
    parser.add_argument(
        "--lr-clock",
        action="store_true",
        help=(
            "re-time the runs whose logged learning rate follows a schedule (warm-up, decay) on "
            "the learning-rate clock: a clock step is one step at the run's learning_rate "
            "(tau = integral of lr / learning_rate), the logged steps on one clock step averaged; "
            "the law's gain is constant over a run, so a fit of such runs otherwise averages over "
            "the schedule"
        ),
    )
    parser.add_argument(
        "--every",
        type=positive_int,
        default=None,
        metavar="N",
        help=(
            "keep each run's first logged reward and every N-th after it, and the other metrics at "
            "those steps (after --lr-clock): a fit's cost grows with the logged points, and a few "
            "hundred resolve the law's shape; `fit` suggests N for runs of more than 2000 points "
            "(runset.thin)"
        ),
    )
    add_overwrite_flag(parser, "replace the output file if it exists")
    add_json_flag(parser)
    parser.set_defaults(func=run)


def _fmt(value: object) -> object:
    if isinstance(value, str) and not value.strip():
        return "-"  # an unknown model or convention read as a blank cell, other unknowns as "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:.4g}"
    return value


def _step_span(first: object, last: object) -> str:
    """``first..last`` optimizer step of a run's rewards (``-`` when it has none)."""
    try:
        return f"{int(first)}..{int(last)}"  # type: ignore[arg-type]
    except (TypeError, ValueError):  # None, NaN: no reward
        return "-"


def rejection_line(run_id: str, reason: str) -> str:
    """The printed line of a rejected run: its reason, prefixed by the run id when the reason
    does not name it (a manifest row whose path is missing names only the row)."""
    if not run_id or f"'{run_id}'" in reason:
        return reason
    return f"run {run_id!r}: {reason}"


def read_files(paths: list[str]) -> list[Path]:
    """The files ingesting ``paths`` reads inside its folders: each log found there, its
    TensorBoard config events and the sidecar configs beside it. An output path among them would
    replace an input (``ingest runs -o runs/a/trainer_state.json --overwrite``)."""
    from bayes_grpo.runset.ingest import discover
    from bayes_grpo.runset.loaders.sidecar import SIDECAR_NAMES, search_dirs

    files: list[Path] = []
    for path in paths:
        if not Path(path).is_dir():
            continue  # a file input is checked as such; a missing one is load_runs' error
        for job in discover(path):
            files += [job.path, *job.config_events]
            files += [d / name for d in search_dirs(job.path) for name in SIDECAR_NAMES]
    return [f for f in files if f.is_file()]


def manifest_paths(manifest: str | None) -> list[str]:
    """The log paths a manifest's rows name (resolved from its folder): inputs too, so an output
    there is refused like one among the PATHs (`ingest --manifest runs.yaml -o
    wandb_export.csv --overwrite` replaced a log the manifest names with the run set). An
    unreadable manifest gives none here: reading it is load_runs' error, with its message."""
    if manifest is None:
        return []
    from bayes_grpo.runset.loaders import LogFormatError, read_manifest

    try:
        return [str(row.path) for row in read_manifest(manifest)]
    except (OSError, ValueError, LogFormatError):
        return []


def _reread_runset(saved: list[str], args: argparse.Namespace):
    """The one saved run set among ``args.paths``, re-read as it is (no log options apply)."""
    from bayes_grpo.runset import load_runset

    if len(args.paths) > 1 or args.manifest:
        # the other inputs as given: filtering out saved[0] by value dropped the same file given
        # twice, and the message then named --manifest
        others = list(args.paths)
        others.remove(saved[0])
        others += [f"--manifest {args.manifest}"] if args.manifest else []
        raise ValueError(
            f"{saved[0]}: a saved run set is re-read alone; ingest does not merge it with other "
            f"inputs ({others})"
        )
    options = (
        ("--reward-key", args.reward_key),
        ("--strict", args.strict),
        ("--min-points", args.min_points is not None),  # was ignored without a word
    )
    ignored = [flag for flag, on in options if on]
    if ignored:
        verb = "applies" if len(ignored) == 1 else "apply"
        raise ValueError(f"{saved[0]}: {', '.join(ignored)} {verb} to logs, not to a saved run set")
    return load_runset(saved[0])


def run(args: argparse.Namespace) -> int:
    from bayes_grpo.checks.base import counted
    from bayes_grpo.runset import runset_warnings, save_runset
    from bayes_grpo.runset.ingest import (
        MIN_POINTS,
        ingest_notes,
        load_runs,
        runset_summary,
        summary_records,
    )
    from bayes_grpo.runset.loaders import RUNSET_SUFFIXES

    if not args.paths and not args.manifest:
        raise ValueError("give at least one PATH or --manifest")
    logs = [*args.paths, *manifest_paths(args.manifest)]
    check_output_paths(
        {"--output": args.output},
        {"log": [*logs, *read_files(logs)], "--manifest": args.manifest},
        overwrite=args.overwrite,
        netcdf=("--output",),
    )
    saved = [p for p in args.paths if Path(p).suffix.lower() in RUNSET_SUFFIXES]
    if saved:
        ds = _reread_runset(saved, args)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # rejected runs are printed below instead
            ds = load_runs(
                args.paths,
                manifest=args.manifest,
                reward_key=args.reward_key,
                min_points=MIN_POINTS if args.min_points is None else args.min_points,
                on_error="raise" if args.strict else "skip",
            )
    if args.lr_clock:
        from bayes_grpo.runset import RunSetError
        from bayes_grpo.runset.clock import clock_runset

        try:
            ds = clock_runset(ds)
        except RunSetError as exc:
            if not saved:
                raise
            raise RunSetError(f"{saved[0]}: {exc}") from exc  # which file is clocked already
    if args.every is not None:
        from bayes_grpo.runset import RunSetError
        from bayes_grpo.runset.thin import thin_runset

        try:
            ds = thin_runset(ds, args.every)
        except RunSetError as exc:
            raise RunSetError(f"{saved[0] if saved else ', '.join(map(str, logs))}: --every {args.every}: {exc}") from exc
    out = save_runset(ds, args.output, overwrite=args.overwrite)
    # load_runs' warnings of them are silenced with the rejections above: said once here
    notes = [] if saved else ingest_notes(ds)
    summary = runset_summary(ds)
    ok = summary[summary["status"] == "ok"]
    bad = summary[summary["status"] != "ok"]
    if args.json:
        records = summary_records(summary)
        warns = runset_warnings(ds)
        for rec in records:
            if rec["status"] == "ok":
                rec["warnings"] = warns.get(rec["run"], [])  # a list, not the table's joined text
        print_json(
            {
                "output": str(out),
                "n_runs": int(len(ok)),
                "n_rejected": int(len(bad)),
                # the step axis (union over runs); a run's own count is its 'n_points'
                "n_steps": int(ds.sizes["step"]),
                "step_axis_length": int(ds.sizes["step"]),
                "variables": sorted(map(str, ds.data_vars)),
                "notes": notes,
                "runs": records,
            }
        )
        return 0
    ok = ok.assign(step_span=[_step_span(a, b) for a, b in zip(ok["first_step"], ok["last_step"])])
    table = ok[[c for c in TABLE_COLUMNS if c in ok.columns]].rename(columns=SHORT).map(_fmt)
    print_table(table, title=f"{counted(len(ok), 'run')} ingested -> {out}")
    warned = {run_id: msgs for run_id, msgs in runset_warnings(ds).items() if msgs}
    if warned:
        print("\nwarnings:")
        for run_id, msgs in warned.items():
            for msg in msgs:
                print(f"  [{run_id}] {msg}")
    for note in notes:
        print(f"\nnote: {note}")
    if len(bad):
        print(f"\n{counted(len(bad), 'run')} rejected:")
        for run_id, row in bad.iterrows():
            print(f"  {rejection_line(str(run_id), str(row['reason']))}")
    return 0
