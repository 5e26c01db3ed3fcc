"""``bayes-grpo diagnose``: failure-mode diagnostics of the runs in a run set."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from bayes_grpo.cli._common import (
    RawWrappedDescriptionFormatter,
    add_hyperparameter_defaults_flag,
    add_json_flag,
    add_overwrite_flag,
    check_output_paths,
    number_text,
    print_json,
    print_table,
    read_json_object,
)

_DESCRIPTION = """\
Assess four failure modes on each run of a run set, from the side quantities the logs
carry (DESIGN.md section 4):

  reward_hacking        train-eval decoupling: the training reward keeps rising while the
                        evaluation reward (eval_reward, eval_accuracy ...) saturates or falls
  advantage_degeneracy  most groups have zero reward spread (frac_reward_zero_std, or derived
                        from reward_std and G), against the binomial expectation p^G + (1-p)^G
  policy_concentration  entropy falls fast while the reward is still far from its plateau,
                        or collapses (ends below concentration.collapse_fraction, 10%, of
                        its start)
  instability           sustained growth of grad_norm / importance ratio / KL, more frequent
                        grad_norm or importance-ratio spikes, sustained clipping (clip ratio
                        level), reward oscillation (fitted zeta < 1), a reward that diverges,
                        swings ever wider at its plateau or collapses after rising, negative
                        damping (posterior)

Each result is "detected", "not detected" or "not assessable" (the run lacks the metric),
with an onset step, a strength and its interval (bootstrap, or posterior draws with
--posterior) and the evidence. Thresholds are named in bayes_grpo.diagnostics.config and
can be changed with --set SECTION.FIELD=VALUE (sections: common, hacking, degeneracy,
concentration, instability) or --config FILE.json ({section: {field: value}}).
Exit status 0 whatever the verdicts; 2 on bad input."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "diagnose",
        help="failure-mode diagnostics (reward hacking, advantage degeneracy, policy concentration, instability)",
        description=_DESCRIPTION,
        formatter_class=RawWrappedDescriptionFormatter,
    )
    p.add_argument("runset", help="run-set netCDF file (bayes-grpo ingest output)")
    p.add_argument(
        "--run", action="append", metavar="ID", help="only this run (repeatable); default: all runs"
    )
    p.add_argument(
        "--mode",
        action="append",
        metavar="MODE",
        help="only this mode (repeatable): reward_hacking, advantage_degeneracy, policy_concentration, instability",
    )
    p.add_argument(
        "--posterior",
        metavar="PATH",
        help="fitted model (bayes-grpo fit output, netCDF): its draws give the strength intervals of oscillation / damping and the plateau; "
        "a fitted run whose G the run set does not log is read at the G the fit took for it (fit --default group_size), before --default",
    )
    add_hyperparameter_defaults_flag(
        p,
        ("group_size",),
        why=" (the one run setting diagnose reads: advantage degeneracy's G)",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="SECTION.FIELD=VALUE",
        dest="assignments",
        help="override one threshold, e.g. degeneracy.flag_fraction=0.6 (repeatable)",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="JSON file {section: {field: value}} of threshold overrides (applied before --set)",
    )
    p.add_argument(
        "--figures",
        metavar="DIR",
        help="write each result's evidence figure as PNG into DIR, named RUN__MODE.png ('/' in a "
        "run id as '_'; a second run whose id then reads the same gets RUN-2); --json gives each "
        "result's file as 'figure'",
    )
    p.add_argument(
        "--verbose", action="store_true", help="print each result's sentence under the table"
    )
    add_overwrite_flag(p, "replace figures of the same name in DIR")
    add_json_flag(p)
    p.set_defaults(func=_run)


def _config(args: argparse.Namespace):
    from bayes_grpo.diagnostics.config import DiagnosticsConfig

    mapping: dict = read_json_object(Path(args.config)) if args.config else {}
    # the file's sections checked before --set and --figures are merged into them: {"common": 3}
    # died in a TypeError traceback there ('int' object does not support item assignment)
    DiagnosticsConfig.from_mapping(mapping)
    for item in args.assignments or []:
        override = DiagnosticsConfig.from_assignments([item]).to_dict()
        section = item.split(".", 1)[0].strip()
        field = item.split(".", 1)[1].split("=", 1)[0].strip()
        mapping.setdefault(section, {})[field] = override[section][field]
    # the command draws figures only to write them into --figures DIR: that option decides
    # (common.figures false in a --config file made --figures DIR write nothing, without a word)
    mapping.setdefault("common", {})
    mapping["common"]["figures"] = bool(args.figures)
    return DiagnosticsConfig.from_mapping(mapping)


def figure_stems(run_ids: list[str]) -> dict[str, str]:
    """``{run id: file-name stem}`` of the ``--figures`` files: the id with ``/`` as ``_``, and
    ``-2``, ``-3`` ... after it for a second, third run whose id reads the same that way (runs
    ``a/b`` and ``a_b`` made one file name, and the command stopped on "given as both --figures
    and --figures")."""
    stems: dict[str, str] = {}
    taken: set[str] = set()
    for run_id in dict.fromkeys(run_ids):
        base = run_id.replace("/", "_")
        stem, k = base, 1
        while stem in taken:
            k += 1
            stem = f"{base}-{k}"
        stems[run_id] = stem
        taken.add(stem)
    return stems


def printable_diagnosis_table(table):
    """The diagnosis table as the terminal shows it, and the notes printed under it.

    A result that is not assessable carries its reason (a sentence of up to hundreds of
    characters) where the others name their strength: in the table it stretched every row past
    the terminal's width. Here it is a reference ``see [i]`` and the list of ``(run, mode,
    reason)`` notes; a missing onset reads ``-`` instead of ``None``. The Python table
    (:func:`~bayes_grpo.diagnostics.diagnosis_table`) and ``--json`` keep the reason in place.

    The strength and its interval are printed by :func:`number_text`, ``-`` where there is
    none; an interval that bounds nothing, ``[0, inf]`` (a damping ratio the run does not
    identify, :func:`~bayes_grpo.diagnostics.instability.zeta_interval_limits`), reads ``not
    identified`` (pandas printed it ``0.000000 inf``, a bound at 0 and what read as an
    overflow); one open end alone keeps its ``0`` or ``inf``."""
    from bayes_grpo.diagnostics._result import NOT_IDENTIFIED, bounds_nothing

    shown = table.copy()
    notes: list[tuple[str, str, str]] = []
    refs = []
    for (run_id, mode), row in table.iterrows():
        if row["verdict"] == "not assessable" and str(row["strength_of"]):
            notes.append((str(run_id), str(mode), str(row["strength_of"])))
            refs.append(f"see [{len(notes)}]")
        else:
            refs.append(row["strength_of"])
    shown["strength_of"] = refs
    shown["onset_step"] = ["-" if step is None or step != step else step for step in table["onset_step"]]
    for key in ("strength", "lower", "upper"):
        shown[key] = ["-" if np.isnan(x) else number_text(x) for x in table[key].astype(float)]
    unbounded = bounds_nothing(table["lower"], table["upper"])
    shown.loc[unbounded, "lower"] = NOT_IDENTIFIED
    shown.loc[unbounded, "upper"] = "-"
    return shown, notes


def _run(args: argparse.Namespace) -> int:
    from bayes_grpo._io import write_atomic
    from bayes_grpo.checks.base import counted
    from bayes_grpo.constants import RUN_DIM
    from bayes_grpo.diagnostics import diagnose, diagnosis_table
    from bayes_grpo.runset.core import load_runset

    config = _config(args)
    ds = load_runset(args.runset)
    if ds.sizes.get(RUN_DIM, 0) == 0:
        # an empty table's set_index died in a KeyError traceback; --json printed no result
        raise ValueError(f"{args.runset} holds no runs: nothing to diagnose")
    load_notes: list[str] = []  # the saved fit's own warnings (stderr has them too)
    known = [str(r) for r in ds[RUN_DIM].values]
    missing = [r for r in args.run or [] if str(r) not in known]
    if missing:
        # "run 'nope' not in the run set" named no file (forecast's names it)
        raise ValueError(
            f"{args.runset}: run {', '.join(repr(r) for r in missing)} not in the run set; runs: {known}"
        )
    results = diagnose(
        ds,
        run=args.run,
        config=config,
        posterior=args.posterior,
        modes=args.mode,
        posterior_warnings=load_notes,
        defaults=dict(args.defaults),
    )
    # the file each result's figure went to: the name alone does not say which run a '-2' is
    figure_of: dict[int, str] = {}
    if args.figures:
        import matplotlib.pyplot as plt

        out = Path(args.figures)
        stems = figure_stems([str(r.values["run"]) for r in results])
        figure_of = {
            i: str(out / f"{stems[str(r.values['run'])]}__{r.name}.png")
            for i, r in enumerate(results)
            if r.figures
        }
        figures = [
            (Path(figure_of[i]), fig) for i, r in enumerate(results) for fig in r.figures.values()
        ]
        # every name is checked before the first figure is written
        check_output_paths({"--figures": [path for path, _ in figures]}, overwrite=args.overwrite)
        for path, fig in figures:
            write_atomic(
                path,
                lambda tmp, fig=fig: fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight"),
                overwrite=args.overwrite,
            )
            plt.close(fig)
    if args.json:
        print_json(
            {
                "runset": str(args.runset),
                "config": config.to_dict(),
                # as predict / stability / phase-diagram / report --json give them: stderr only
                "posterior_warnings": load_notes,
                "results": [
                    {**r.to_dict(), "figure": figure_of.get(i)} if args.figures else r.to_dict()
                    for i, r in enumerate(results)
                ],
            }
        )
        return 0
    table = diagnosis_table(results)
    shown, notes = printable_diagnosis_table(table)
    print_table(
        shown,
        title=f"failure-mode diagnostics of {args.runset} ({counted(table.index.get_level_values('run').nunique(), 'run')})",
    )
    if notes:
        print()
        for i, (run_id, mode, reason) in enumerate(notes, start=1):
            print(f"[{i}] {run_id} / {mode} not assessable: {reason}")
    if args.verbose:
        print()
        for r in results:
            print(f"[{r.name}] {r.summary}")
    if args.figures:
        print(f"\nwrote {counted(len(figure_of), 'figure')} to {args.figures} (RUN__MODE.png)")
    return 0
