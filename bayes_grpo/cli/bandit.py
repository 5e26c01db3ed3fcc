"""``bayes-grpo simulate bandit`` and ``bayes-grpo sweep``: the softmax-bandit GRPO.

(The ``simulate`` verb is made here; its ``sde`` kind is in ``cli/sde.py``.)

``simulate bandit`` writes a run set (netCDF) of batched bandit runs with known truth;
``sweep`` runs the K_ref threshold experiment, prints the empirical threshold next to the
exact and closed-form predictions (and the oscillation onset next to zeta = 1), and draws
the phase diagram.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from bayes_grpo.checks.base import counted
from bayes_grpo.cli._common import (
    RawWrappedDescriptionFormatter,
    add_json_flag,
    add_lr_schedule_args,
    add_overwrite_flag,
    add_progress_flag,
    check_output_paths,
    checked_values,
    figure_format,
    lr_schedule_from_args,
    non_negative_int,
    open_fraction,
    positive_int,
    print_json,
    print_table,
    show_progress,
)
from bayes_grpo.cli.sde import add_simulate_sde
from bayes_grpo.constants import HEAVY_BALL, MOMENTUM_CONVENTIONS

ADVANTAGE_HELP = (
    "advantage estimator: loo (default; leave-one-out group baseline over the sampling "
    "policy's reward std: mean field exactly G-invariant), group (TRL default "
    "(r - mean)/(std + 1e-4), zero-std groups 0), batch (TRL scale_rewards=batch), none (Dr. GRPO)"
)

SIM_EPILOG = """\
the update (see `python -c "import bayes_grpo.bandit.simulator as m; help(m)"`):
  two arms (reward 1 / 0), B groups of G actions per step from the policy K_ref steps old,
  group advantages, PPO-clip masks from the importance ratios, KL anchor to the reference
  policy (interior plateau p* < 1), heavy-ball or EMA momentum; the gradient is taken at the
  behaviour policy, so the linearised mean field is exactly
  e[n+1] - e[n] = mu (e[n] - e[n-1]) - a e[n - K_ref] with a = eta_eff K.
logged per step: reward, reward_std, frac_reward_zero_std, kl, entropy, grad_norm,
clip_ratio, expected_reward (the exact expectation of reward: bandit ground truth).
truth (p*, K, D, zeta, ...) per run in the file's attrs["truth"].

value lists: "0:40" (0..39), "0:40:5", or "1,2,4"; every combination is run --seeds times.

examples:
  bayes-grpo simulate bandit --k-ref 0,4,8 --group-size 4,16 --seeds 8 --steps 2000 -o runs.nc
  bayes-grpo simulate bandit --lr 0.1 --momentum 0.9 --convention ema --device auto -o ema.nc
"""

SWEEP_EPILOG = """\
"runs stop converging": the RMS deviation of the expected reward from p* over the last 10%
of the steps exceeds 5% of the error scale and either grew by 1.5x since mid-run or
exceeds 25% of it (the scale: the larger of the initial error and |p* - p_ref|, so that a
run started near its plateau is not judged by its noise); the empirical threshold is the first K_ref where more
than half of the seeds have not converged. A deviation that does not grow counts as converged
below 25%: just past the exact threshold the unstable mode saturates in a persistent
oscillation that grows with K_ref, so the empirical threshold can read late (the defaults:
32 for an exact 30; the summary says so when it does). The sweep runs without PPO clipping unless
--clip-eps is given: the clip caps the unstable mode in a limit cycle of a few hundredths
in reward, which this rule does not count as diverging. Predictions use the stiffness K measured
independently (Jacobian of the exact expected update at p*): exact = first integer K_ref
with spectral radius >= 1, closed form = first K_ref with C_eff = (1 - mu) - a K_ref <= 0.
Near the threshold the spectral radius rho is close to 1 and runs change slowly: the table's
steps_to_resolve is the horizon the rule needs at each K_ref (rho^(T/2) changes by 1.5x, each
window spans half the dominant period); when --steps is shorter at a swept K_ref other than
the exact threshold the result says "Not determined" and gives no verdict.

examples:
  bayes-grpo sweep --k-ref 0:40 --seeds 32 --steps 3000 --lr 0.2 --momentum 0.5 --png phase.png
  bayes-grpo sweep --k-ref 0:30 --lr 0.1,0.15,0.2,0.3,0.4 --momentum 0.5 --seeds 16 --png phase2d.png
  bayes-grpo sweep --k-ref 0:40 --lr 0.2 --momentum 0.5 --clip-eps 0.2   # the clip's limit cycle
  bayes-grpo sweep --k-ref 0:16 --seeds 64 --steps 800 --n-prompts 256 --lr 0.1 --momentum 0.5 --transition --json
"""


def _clip_range(text: str) -> float:
    """An argparse ``type``: a PPO clip range > 0 (``inf``: no clipping)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:  # also NaN; a range <= 0 masks every sample: no update at all
        raise argparse.ArgumentTypeError(f"must be > 0 (inf: no clipping), got {text!r}")
    return value


def _add_common(p: argparse.ArgumentParser, *, lists: bool) -> None:
    many = "list allowed; " if lists else ""  # one parenthesis with the default: "(list allowed; default 8)"
    p.add_argument(
        "--group-size",
        default="8",
        metavar="G",
        help=f"actions per prompt G >= 2 ({many}default 8)",
    )
    p.add_argument(
        "--lr",
        default="0.1",
        metavar="ETA",
        help="learning rate eta (list allowed"
        + ("" if lists else ": the sweep then covers learning rate x K_ref, a 2-D phase diagram")
        + "; default 0.1)",
    )
    p.add_argument(
        "--momentum",
        default="0.0" if lists else "0.5",
        metavar="MU",
        help=f"momentum mu in [0, 1) ({many}default {0 if lists else 0.5})",
    )
    p.add_argument(
        "--convention",
        "--momentum-convention",
        dest="convention",
        choices=MOMENTUM_CONVENTIONS,
        default=HEAVY_BALL,
        help="momentum convention (default heavy_ball)",
    )
    p.add_argument(
        "--beta", default="1.0", metavar="B", help=f"KL anchor weight > 0 ({many}default 1)"
    )
    # the sweep runs longer and with more seeds than a simulation
    seeds, steps = (8, 1000) if lists else (32, 3000)
    p.add_argument(
        "--seeds",
        type=positive_int,
        default=seeds,
        metavar="N",
        help=f"seeds (replicates) per setting (default {seeds})",
    )
    p.add_argument(
        "--steps",
        type=positive_int,
        default=steps,
        metavar="T",
        help=f"optimizer steps per run: steps 0 .. T-1 logged, as simulate sde's (default {steps})",
    )
    p.add_argument(
        "--n-prompts",
        type=positive_int,
        default=16,
        metavar="B",
        help="groups (prompts) per step (default 16)",
    )
    p.add_argument(
        "--p-ref",
        type=open_fraction,
        default=0.5,
        help="reference policy's success probability (default 0.5)",
    )
    p.add_argument(
        "--p-init", type=open_fraction, default=None, help="initial success probability (default: --p-ref)"
    )
    # one or the other: --no-clip silently overrode a --clip-eps given with it
    clip = p.add_mutually_exclusive_group()
    clip.add_argument(
        "--clip-eps",
        type=_clip_range,
        default=0.2 if lists else math.inf,
        help="PPO clip range (default "
        + (
            "0.2"
            if lists
            else "inf: no clipping, since the clip caps the unstable mode in a small limit cycle"
        )
        + ")",
    )
    clip.add_argument("--no-clip", action="store_true", help="no PPO clipping (clip range infinite)")
    p.add_argument(
        "--advantage", choices=("loo", "group", "batch", "none"), default="loo", help=ADVANTAGE_HELP
    )
    p.add_argument(
        "--anchor",
        choices=("kl", "k3"),
        default="kl",
        help="kl (default): exact expectation of TRL's k3 gradient; k3: sampled per action as TRL does",
    )
    p.add_argument(
        "--gradient",
        choices=("behaviour", "importance"),
        default="behaviour",
        help="behaviour (default): gradient at the rollout policy K_ref steps old (lag in the mean "
        "field); importance: gradient of the clipped surrogate at the current policy",
    )
    p.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        help="seed of the torch generator (default 0); one stream for the whole call, so a run's "
        "data depend on every setting and seed of the call: the same run id from two calls with "
        "other settings (or --seeds) holds other draws, and is no replicate to merge",
    )
    p.add_argument(
        "--device", default="cpu", help="cpu (default), cuda, or auto (CUDA when present)"
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    sim = subparsers.add_parser(
        "simulate",
        help="simulate GRPO runs with known truth (softmax bandit, or the law's SDE)",
        description="Simulate GRPO runs with known truth and write them as a run set.",
    )
    kinds = sim.add_subparsers(dest="kind", metavar="KIND")
    kinds.required = True
    p = kinds.add_parser(
        "bandit",
        help="softmax-bandit GRPO in torch, batched over seeds and settings",
        description=(
            "Simulate softmax-bandit GRPO (the exact reduction of the damped-oscillator model) for "
            "every combination of the given K_ref, G, learning rates, momenta and KL weights, "
            "--seeds times each, in one batched tensor program, and write the run set (netCDF) "
            "with the known truth of every run. Shows a progress bar on stderr (--no-progress hides it)."
        ),
        epilog=SIM_EPILOG,
        formatter_class=RawWrappedDescriptionFormatter,
    )
    p.add_argument(
        "--k-ref",
        default="1",
        metavar="L",
        help="lag K_ref in optimizer steps (list allowed; default 1)",
    )
    _add_common(p, lists=True)
    add_lr_schedule_args(p, what="every run (the runs then log lr)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="run-set netCDF to write")
    add_progress_flag(p)
    # the bar was opt-in (--progress) while every other verb showed its progress unless told
    # --no-progress; it is shown by default now, and the old flag still runs in scripts
    p.add_argument("--progress", action="store_true", help=argparse.SUPPRESS)
    add_overwrite_flag(p, "replace the output file if it exists")
    add_json_flag(p)
    p.set_defaults(func=run_simulate)
    add_simulate_sde(kinds)

    s = subparsers.add_parser(
        "sweep",
        help="K_ref sweep of the softmax bandit: stability threshold (and oscillation onset), phase diagram",
        description=(
            "Run the stability-threshold experiment: sweep K_ref for one bandit setting, find the first "
            "K_ref at which runs stop converging, and print it next to the exact discrete prediction "
            "and the closed form (1 - mu)/a (gain a = eta K; eta (1 - beta1) K with --convention ema), using "
            "the independently measured K. With "
            "--transition also locate the overdamped-to-oscillatory transition against zeta = 1. "
            "Shows a progress bar; writes the phase-diagram PNG with --png and the runs with -o."
        ),
        epilog=SWEEP_EPILOG,
        formatter_class=RawWrappedDescriptionFormatter,
    )
    s.add_argument(
        "--k-ref",
        default="0:40",
        metavar="RANGE",
        # "0:12" swept 0..11, which the help did not say (simulate bandit's epilog does)
        help='K_ref values: START:STOP, end excluded ("0:40" is 0..39), START:STOP:STEP, or a list '
        '"1,2,4" (default "0:40")',
    )
    _add_common(s, lists=False)
    s.add_argument(
        "--transition", action="store_true", help="also locate the oscillation onset (zeta = 1)"
    )
    s.add_argument(
        "--png", metavar="FILE", default=None, help="write the phase-diagram figure here"
    )
    s.add_argument(
        "-o", "--output", metavar="FILE", default=None, help="also write the sweep's run set"
    )
    add_progress_flag(s)
    add_overwrite_flag(s)
    add_json_flag(s)
    s.set_defaults(func=run_sweep)


def _clip(args: argparse.Namespace) -> float:
    return math.inf if args.no_clip else float(args.clip_eps)


def run_simulate(args: argparse.Namespace) -> int:
    from bayes_grpo.bandit import simulate_bandit
    from bayes_grpo.bandit.simulator import StepBar
    from bayes_grpo.dynamics.schedule import SCHEDULES
    from bayes_grpo.runset import save_runset

    check_output_paths({"--output": args.output}, overwrite=args.overwrite, netcdf=("--output",))
    rates = _values(args.lr, "--lr")  # --steps >= 1: its argparse type (positive_int)
    if len(rates) > 1 and args.lr_schedule not in SCHEDULES:
        raise ValueError(
            f"--lr-schedule {args.lr_schedule}: a schedule file gives rates for one --lr, got {args.lr!r}"
        )
    schedule, schedule_label = lr_schedule_from_args(args, float(rates[0]), args.steps)
    bar = StepBar(args.steps, "bandit")
    try:
        ds = simulate_bandit(
            k_ref=_values(args.k_ref, "--k-ref"),
            group_size=_values(args.group_size, "--group-size"),
            learning_rate=rates,
            momentum=_values(args.momentum, "--momentum"),
            momentum_convention=args.convention,
            beta=_values(args.beta, "--beta"),
            seeds=args.seeds,
            steps=args.steps,
            n_prompts=args.n_prompts,
            p_ref=args.p_ref,
            p_init=args.p_init,
            clip_eps=_clip(args),
            advantage=args.advantage,
            anchor=args.anchor,
            gradient=args.gradient,
            seed=args.seed,
            device=args.device,
            progress=bar if show_progress(args) else None,
            lr_multipliers=schedule,
            lr_schedule_label=schedule_label,
        )
    finally:
        bar.close()
    path = save_runset(ds, args.output, overwrite=args.overwrite)
    info = {
        "output": str(path),
        "runs": int(ds.sizes["run"]),
        "steps": int(ds.sizes["step"]),
        "variables": list(ds.data_vars),
    }
    if args.json:
        print_json(info)
    else:
        print(f"wrote {counted(info['runs'], 'run')} x {counted(info['steps'], 'step')} to {path}")
    return 0


#: What each list option of the bandit must hold: (test, requirement). The simulator checks
#: the same, but its messages name its parameters (group_size, learning_rate), not the options.
_REQUIRED = {
    "--k-ref": (lambda v: v >= 0, "lags >= 0"),
    "--group-size": (lambda v: v >= 2, "group sizes >= 2 (a group std needs two samples)"),
    "--lr": (lambda v: math.isfinite(v) and v > 0, "finite learning rates > 0"),
    "--momentum": (lambda v: 0 <= v < 1, "momenta in [0, 1)"),
    "--beta": (lambda v: math.isfinite(v) and v > 0, "finite KL weights > 0 (an interior plateau p* < 1)"),
}


def _values(text: str, flag: str) -> list:
    """The values of a list option (whole numbers for lags and group sizes), each checked
    against :data:`_REQUIRED` (:func:`~bayes_grpo.cli._common.checked_values`)."""
    return checked_values(text, flag, *_REQUIRED[flag], whole=flag in ("--k-ref", "--group-size"))


def _single(text: str, name: str) -> float:
    values = _values(text, name)
    if len(values) != 1:
        raise ValueError(f"sweep takes one value of {name}, got {text!r}")
    return float(values[0])


def _shown_damping(result):
    """The threshold table as printed: a ``C_eff`` that is 0 up to rounding
    (``dynamics.stability.closed_form_marginal``) as 0. At lr 0.2, mu 0.5 the row of K_ref 10 read
    ``1.121325e-14`` beside a closed form that calls that K_ref unstable; the JSON keeps the number."""
    from bayes_grpo.dynamics.stability import closed_form_marginal

    table = result.table
    if table is None or "C_eff" not in table or not {"a", "momentum"} <= set(result.values):
        return table
    lags = table.index.to_numpy(dtype=float)
    on_threshold = closed_form_marginal(float(result.values["a"]), float(result.values["momentum"]), lags)
    if not on_threshold.any():
        return table
    shown = table.copy()
    shown.loc[on_threshold, "C_eff"] = 0.0
    return shown


def run_sweep(args: argparse.Namespace) -> int:
    from bayes_grpo.bandit.experiments import (
        convergence_window_error,
        phase_diagram_check,
        phase_diagram_figure,
        sweep_k_ref,
        threshold_check,
        transition_check,
    )
    from bayes_grpo.runset import save_runset

    check_output_paths(
        {"--output": args.output, "--png": args.png},
        overwrite=args.overwrite,
        figures=("--png",),
        netcdf=("--output",),
    )
    too_short = convergence_window_error(args.steps)  # was refused after the whole sweep had run
    if too_short:
        raise ValueError(f"--steps {args.steps}: {too_short}")
    rates = _values(args.lr, "--lr")
    # checked after the whole sweep had run (13 s for --k-ref 0:40 --lr 0.1,0.2 --seeds 32)
    if len(rates) > 1 and args.transition:
        raise ValueError("--transition takes one learning rate; give a single --lr")
    ds = sweep_k_ref(
        _values(args.k_ref, "--k-ref"),
        seeds=args.seeds,
        steps=args.steps,
        group_size=int(_single(args.group_size, "--group-size")),
        learning_rate=rates,
        momentum=_single(args.momentum, "--momentum"),
        momentum_convention=args.convention,
        beta=_single(args.beta, "--beta"),
        n_prompts=args.n_prompts,
        p_ref=args.p_ref,
        p_init=args.p_init,
        advantage=args.advantage,
        anchor=args.anchor,
        gradient=args.gradient,
        clip_eps=_clip(args),
        seed=args.seed,
        device=args.device,
        progress=show_progress(args),
    )
    several = len(rates) > 1
    threshold = phase_diagram_check(ds) if several else threshold_check(ds)
    transition = transition_check(ds) if args.transition else None
    if args.output:
        save_runset(ds, args.output, overwrite=args.overwrite)
    if args.png:
        from bayes_grpo._io import write_atomic

        fig = phase_diagram_figure(
            ds, threshold=None if several else threshold, transition=transition
        )
        fmt = figure_format(args.png, "--png")
        write_atomic(
            Path(args.png), lambda tmp: fig.savefig(tmp, format=fmt, dpi=110), overwrite=args.overwrite
        )
    if args.json:
        out = {"threshold": threshold.to_dict()}
        if transition is not None:
            out["transition"] = transition.to_dict()
        print_json(out)
        return 0
    print(threshold.summary)
    print_table(_shown_damping(threshold))
    if transition is not None:
        print()
        print(transition.summary)
        print_table(transition.table)
    return 0
