"""``bayes-grpo simulate sde``: runs of the damped-oscillator SDE itself, with known truth.

The law's own ground truth (:func:`bayes_grpo.dynamics.simulate.simulate_sde_runset`: the
SDE sampled exactly, no Euler error), for checking a fit's recovery and calibration on data
the law describes exactly; ``simulate bandit`` is the exact GRPO reduction. The ``simulate``
verb is made in ``cli/bandit.py``, which adds this kind through :func:`add_simulate_sde`.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from bayes_grpo.checks.base import counted
from bayes_grpo.cli._common import (
    RawWrappedDescriptionFormatter,
    add_json_flag,
    add_overwrite_flag,
    check_output_paths,
    checked_values,
    finite_float,
    fraction_below_one,
    momentum_value,
    non_negative_float,
    non_negative_int,
    positive_int,
    print_json,
    read_json_object,
)
from bayes_grpo.constants import EMA, MOMENTUM_CONVENTIONS

EPILOG = """\
the law (DESIGN.md section 1): per run, gain a = eta_eff K (eta_eff = eta for heavy ball,
eta (1 - mu) for EMA), M_eff, C_eff, K_eff from a, mu and K_ref, and the SDE
  M e'' + C e' + K_eff e = sqrt(D / G^alpha) xi,   e(0) = R0 - p*,  e'(0) = 0,
sampled exactly at the logged steps; reward = p* + e + measurement noise of sd
measurement_sd * G^(-exponent/2). Every combination of LLM x G x learning rate x K_ref is run
--seeds times. Logged per step: reward and true_mean_reward (the noise-free mean p* + e_mean);
the truth of every run (a, M_eff, C_eff, K_eff, zeta, regime, D, stationary variance, ...) is in
the file's attrs["truth"] (Python: bayes_grpo.dynamics.truth_frame).

--models FILE: a JSON object {name: {"stiffness": K, "plateau": p*, "initial_reward": R0,
"noise_d": D, "model_size": N (optional)}}; without it, one LLM from --stiffness, --plateau,
--initial-reward, --noise-d (named --model), which do not combine with --models.

examples:
  bayes-grpo simulate sde --k-ref 1,2,4 --group-size 4,16 --seeds 4 --steps 300 -o sde.nc
  bayes-grpo simulate sde --models llms.json --lr 5e-4,1e-3 --measurement-sd 0.2 --measurement-g-exponent 1 -o sde.nc
"""


#: The one LLM of ``simulate sde`` without --models: (option, attribute, model key, default).
_ONE_LLM: tuple[tuple[str, str, str, object], ...] = (
    ("--model", "model", "", "sim"),
    ("--stiffness", "stiffness", "stiffness", 40.0),
    ("--plateau", "plateau", "plateau", 0.7),
    ("--initial-reward", "initial_reward", "initial_reward", 0.2),
    ("--noise-d", "noise_d", "noise_d", 4e-6),
)
_DEFAULT = {attr: default for _, attr, _, default in _ONE_LLM}


def add_simulate_sde(kinds: argparse._SubParsersAction) -> None:
    """Add the ``sde`` kind to the ``simulate`` verb's subparsers."""
    p = kinds.add_parser(
        "sde",
        help="the damped-oscillator SDE itself (the law's exact ground truth)",
        description=(
            "Simulate runs of the damped-oscillator SDE, sampled exactly, for every combination of "
            "the given LLMs, group sizes, learning rates and K_ref, --seeds times each, and write "
            "the run set (netCDF) with the known truth of every run."
        ),
        epilog=EPILOG,
        formatter_class=RawWrappedDescriptionFormatter,
    )
    p.add_argument("--models", metavar="FILE", default=None, help="JSON file of LLMs (see below)")
    # the one LLM's values default to None so that, given beside --models (which they would not
    # change), they are refused rather than ignored; _ONE_LLM holds the defaults
    p.add_argument(
        "--model",
        default=None,
        help=f"name of the one LLM without --models (default {_DEFAULT['model']})",
    )
    p.add_argument(
        "--stiffness",
        type=finite_float,
        default=None,
        help=f"curvature K (default {_DEFAULT['stiffness']:g})",
    )
    p.add_argument(
        "--plateau", type=finite_float, default=None, help=f"p* (default {_DEFAULT['plateau']:g})"
    )
    p.add_argument(
        "--initial-reward",
        type=finite_float,
        default=None,
        help=f"R0 (default {_DEFAULT['initial_reward']:g})",
    )
    p.add_argument(
        "--noise-d",
        type=non_negative_float,
        default=None,
        help=f"process-noise D at G = 1 (default {_DEFAULT['noise_d']:g})",
    )
    p.add_argument(
        "--group-size", default="4,16", metavar="G", help='group sizes >= 2 (list; default "4,16")'
    )
    p.add_argument("--lr", default="0.001", metavar="ETA", help="learning rates (list; default 1e-3)")
    p.add_argument("--k-ref", default="1", metavar="L", help="lags K_ref (list of integers; default 1)")
    p.add_argument(
        "--momentum", type=momentum_value, default=0.9, help="momentum mu or Adam beta1 (default 0.9)"
    )
    p.add_argument(
        "--convention",
        "--momentum-convention",
        dest="convention",
        choices=MOMENTUM_CONVENTIONS,
        default=EMA,
        help="momentum convention (default ema: --momentum is Adam's beta1, as in TRL's default AdamW; "
        "predict, stability and simulate bandit default to heavy_ball)",
    )
    p.add_argument("--seeds", type=positive_int, default=2, help="runs per setting (default 2)")
    p.add_argument(
        "--steps",
        type=positive_int,
        default=300,
        metavar="T",
        help="optimizer steps per run: steps 0 .. T-1 logged, as simulate bandit's (default 300)",
    )
    p.add_argument(
        "--log-every",
        type=positive_int,
        default=1,
        help="steps between logged points: steps 0, k, 2k, ... below T (an even grid; default 1)",
    )
    p.add_argument(
        "--measurement-sd",
        type=non_negative_float,
        default=0.0,
        help="measurement-noise sd at G = 1 (default 0)",
    )
    p.add_argument(
        "--measurement-g-exponent",
        type=finite_float,
        default=0.0,
        help="measurement sd scales as G^(-exponent/2) (default 0)",
    )
    p.add_argument(
        "--noise-g-exponent",
        type=finite_float,
        default=1.0,
        help="alpha in the process noise D / G^alpha (theory 1; default 1)",
    )
    p.add_argument(
        "--ragged",
        type=fraction_below_one,
        default=0.0,
        help="runs last a random number of steps in ((1 - ragged) T, T], as interrupted logs (default 0)",
    )
    p.add_argument(
        "--missing-frac",
        type=fraction_below_one,
        default=0.0,
        help="share of logged points dropped at random (default 0)",
    )
    p.add_argument(
        "--allow-unstable",
        action="store_true",
        help="simulate settings that are not stable (refused by default)",
    )
    p.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        help="random seed (default 0); one stream for the whole call, so a run's data depend on every "
        "setting and seed of the call: the same run id from two calls with other settings (or --seeds) "
        "holds other draws, and is no replicate to merge",
    )
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="run-set netCDF to write")
    add_overwrite_flag(p, "replace the output file if it exists")
    add_json_flag(p)
    p.set_defaults(func=run_simulate_sde)


#: What each list option must hold: (test, requirement). The simulator checks the same, but its
#: messages name its parameters ("learning rate must be ...", "k_ref must be >= 0"), not the
#: options (`simulate sde --lr nan` named no option; `simulate bandit` names its own).
_REQUIRED = {
    "--group-size": (lambda v: v >= 2, "group sizes >= 2 (a group std needs two samples)"),
    "--lr": (lambda v: math.isfinite(v) and v > 0, "finite learning rates > 0"),
    "--k-ref": (lambda v: v >= 0, "lags >= 0"),
}


def _values(text: str, flag: str) -> list:
    """The values of a list option (whole numbers but for ``--lr``), each checked against
    :data:`_REQUIRED` (:func:`~bayes_grpo.cli._common.checked_values`)."""
    return checked_values(text, flag, *_REQUIRED[flag], whole=flag != "--lr")


def run_simulate_sde(args: argparse.Namespace) -> int:
    from bayes_grpo.dynamics.simulate import simulate_sde_runset
    from bayes_grpo.runset import save_runset

    check_output_paths({"--output": args.output}, overwrite=args.overwrite, netcdf=("--output",))
    if args.steps > 1 and args.log_every >= args.steps:  # the Python message names log_every and n_steps
        raise ValueError(
            f"--log-every {args.log_every} is not below --steps {args.steps}: only step 0 would be logged"
        )
    given = [flag for flag, attr, _, _ in _ONE_LLM if getattr(args, attr) is not None]
    if args.models and given:
        # they were ignored without a word: the LLMs are the file's
        verb = "describes" if len(given) == 1 else "describe"
        raise ValueError(
            f"{', '.join(given)} {verb} the one LLM simulated without --models; the LLMs of "
            f"--models {args.models} are the file's (give their values there)"
        )
    if args.models:
        from bayes_grpo.dynamics.simulate import check_models

        models = read_json_object(Path(args.models), "--models")
        for name, spec in models.items():
            if not isinstance(spec, dict):
                raise ValueError(f"{args.models}: LLM {name!r} must be a JSON object of its values")
        try:
            check_models(models)
        except ValueError as exc:
            raise ValueError(f"{args.models}: {exc}") from None
    else:
        value = {
            attr: _DEFAULT[attr] if getattr(args, attr) is None else getattr(args, attr)
            for attr in _DEFAULT
        }
        models = {value["model"]: {key: value[attr] for _, attr, key, _ in _ONE_LLM if key}}
    ds = simulate_sde_runset(
        models=models,
        group_sizes=_values(args.group_size, "--group-size"),
        learning_rates=_values(args.lr, "--lr"),
        momentum=args.momentum,
        convention=args.convention,
        k_refs=_values(args.k_ref, "--k-ref"),
        n_seeds=args.seeds,
        n_steps=args.steps,
        log_every=args.log_every,
        measurement_sd=args.measurement_sd,
        measurement_g_exponent=args.measurement_g_exponent,
        noise_g_exponent=args.noise_g_exponent,
        ragged=args.ragged,
        missing_frac=args.missing_frac,
        allow_unstable=args.allow_unstable,
        random_seed=args.seed,
    )
    path = save_runset(ds, args.output, overwrite=args.overwrite)
    info = {
        "output": str(path),
        "runs": int(ds.sizes["run"]),
        "steps": int(ds.sizes["step"]),
        "models": sorted(models),
    }
    if args.json:
        print_json(info)
    else:
        print(f"wrote {counted(info['runs'], 'run')} x {counted(info['steps'], 'logged step')} to {path}")
    return 0
