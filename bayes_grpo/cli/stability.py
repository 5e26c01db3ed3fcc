"""``bayes-grpo stability``: is a hyperparameter setting stable, and in which regime?

Two modes:

* point mode (``--eta-k A --momentum MU --k-ref L``): regime, damping ratio, ``M/C/K_eff``,
  both stability criteria, both thresholds and the critical ``K_ref``, from
  :func:`bayes_grpo.dynamics.stability_summary`;
* posterior mode (``--posterior FILE --lr X ...``): the same questions with posterior
  uncertainty, from :func:`bayes_grpo.checks.stability.stability_from_posterior`.
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings

from bayes_grpo.cli._common import (
    RawWrappedDescriptionFormatter,
    add_json_flag,
    finite_float,
    non_negative_float,
    number_text,
    positive_float,
    print_json,
)
from bayes_grpo.constants import EMA, HEAVY_BALL, MOMENTUM_CONVENTIONS

EPILOG = """\
criteria (every line says which one it uses):
  closed form  the paper's threshold: stable iff C_eff = (1 - mu) - a K_ref > 0,
               threshold a* = (1 - mu) / K_ref; exact at K_ref = 1, conservative beyond
  exact        the discrete recursion e[n+1] - e[n] = mu (e[n] - e[n-1]) - a e[n-K_ref] is
               stable iff every root of z^(K_ref-1) (z - 1)(z - mu) + a lies inside the
               unit circle (spectral radius < 1); needs an integer K_ref
  regime       from the continuum coefficients: overdamped (zeta > 1), critical,
               underdamped / oscillatory (zeta < 1), unstable (C_eff <= 0); and from the
               discrete recursion (exact, integer K_ref): unstable (spectral radius >= 1),
               else by its dominant root: underdamped (complex or negative: the error
               oscillates), overdamped (real positive: monotone decay), critical (double)

gain: a = eta K for heavy-ball momentum; with --convention ema (Adam beta1) the recursion has
step eta (1 - beta1), so a = eta K (1 - beta1) is used, mu = beta1.

--json: JSON has no infinity, so an infinite number is written null: threshold_a_closed_form
at K_ref 0 (no closed-form threshold: C_eff = 1 - mu > 0 at every gain) and critical_k_ref_*
(with --posterior critical_k_ref_*_median / _lo / _hi) when no lag below the largest float
(1.8e308) is unstable: a gain too small (the text says "none" or "inf" there); the keys
critical_k_ref_note and threshold_a_closed_form_note name those nulls and say why. Any other null
is a number not computed (spectral_radius, stable_exact, regime_exact, threshold_a_exact: a
fractional K_ref or one beyond the roots' limit; "note" says which, with --posterior
spectral_radius_note for spectral_radius_median, computed up to K_ref 128).

examples:
  bayes-grpo stability --eta-k 0.0123 --momentum 0.9 --k-ref 10
  bayes-grpo stability --eta-k 0.05 --momentum 0.9 --k-ref 4 --convention ema --json
  bayes-grpo stability --posterior models/fit.nc --lr 1e-6 --momentum 0.9 --convention ema --k-ref 2
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "stability",
        help="stability and regime of a hyperparameter setting (closed-form and exact criteria)",
        description=(
            "Say whether GRPO with gain a = eta K, momentum mu and lag K_ref converges, and how: "
            "regime and damping ratio zeta, the oscillator coefficients M_eff, C_eff, K_eff, "
            "stability by the closed-form criterion (C_eff > 0) and by the exact discrete one "
            "(spectral radius < 1), the threshold gain a* by both, and the first K_ref at which the "
            "setting becomes unstable by both. With --posterior, answer with posterior uncertainty "
            "for a learning rate instead of a known gain."
        ),
        epilog=EPILOG,
        formatter_class=RawWrappedDescriptionFormatter,
    )
    p.add_argument(
        "--eta-k",
        type=float,
        metavar="A",
        help="eta * K: learning rate times curvature K (point mode); for --convention ema the "
        "gain used is A (1 - momentum)",
    )
    p.add_argument(
        "--momentum",
        type=finite_float,
        metavar="MU",
        default=None,
        help="heavy-ball momentum mu or Adam beta1, in [0, 1) (default 0 in point mode; "
        "required with --posterior)",
    )
    p.add_argument(
        "--k-ref",
        type=non_negative_float,
        metavar="L",
        default=None,
        help="lag K_ref in optimizer steps (integer for the exact criterion; default 1 in point "
        "mode; required with --posterior)",
    )
    p.add_argument(
        "--convention",
        "--momentum-convention",
        dest="convention",
        choices=MOMENTUM_CONVENTIONS,
        default=None,
        help=f"momentum convention (default {HEAVY_BALL} in point mode; required with --posterior)",
    )
    p.add_argument(
        "--posterior",
        metavar="FILE",
        help="posterior netCDF saved by `bayes-grpo fit`: answer with posterior uncertainty",
    )
    p.add_argument("--lr", type=positive_float, metavar="X", help="learning rate eta (posterior mode)")
    p.add_argument(
        "--model",
        metavar="M",
        default=None,
        help="LLM name in the posterior (posterior mode; default: the fit's LLM when it has only one, "
        "else a new model, population level)",
    )
    p.add_argument(
        "--model-size",
        type=positive_float,
        metavar="N",
        default=None,
        help="parameter count of a new LLM (posterior mode; needed when the fit regresses the "
        "curvature on model size)",
    )
    add_json_flag(p)
    p.set_defaults(func=run)


#: Largest K_ref the verb takes: the spectral radius and the recursion's regime come from the
#: dominant characteristic roots, found in time ~ K_ref (~10-20 s at this K_ref;
#: :data:`bayes_grpo.dynamics.stability.MAX_ROOT_LAG`). The companion eigenvalues it took before
#: (time ~ K_ref^3) held it to 2000 (~20 s), and 100000 asked for 75 GiB.
MAX_K_REF: int = 100_000

#: Largest K_ref of posterior mode, which computes no roots beyond
#: ``checks.stability.AUTO_BISECTION_MAX_LAG`` (the exact verdict is by the threshold): the exact
#: criterion needs a whole number of steps, and floats hold every whole number only up to 2**53.
#: It was refused beyond MAX_K_REF for the point mode's reason, the spectral radius's roots.
MAX_POSTERIOR_K_REF: float = 2.0**53


def run(args: argparse.Namespace) -> int:
    if args.k_ref is not None and args.posterior is None and args.k_ref > MAX_K_REF:
        raise ValueError(
            f"--k-ref {args.k_ref:g} is too large: the spectral radius of the exact criterion needs "
            f"the dominant roots of a degree K_ref + 1 polynomial; this command takes K_ref <= {MAX_K_REF} "
            "(the closed-form threshold (1 - mu)/K_ref needs no tool)"
        )
    if args.k_ref is not None and args.posterior is not None and args.k_ref > MAX_POSTERIOR_K_REF:
        raise ValueError(
            f"--k-ref {args.k_ref:g} is too large: the exact criterion needs a whole number of steps, "
            f"and floats hold every whole number only up to 2^53 = {MAX_POSTERIOR_K_REF:.4g}"
        )
    if args.momentum is not None and not 0.0 <= args.momentum < 1.0:
        # before the EMA step eta (1 - beta1): a beta1 >= 1 read as a non-positive gain; in
        # posterior mode it was a numpy RuntimeWarning and an error naming no flag
        raise ValueError(
            f"--momentum {args.momentum:g} must be in [0, 1) (heavy-ball mu or Adam beta1)"
        )
    if args.posterior is not None:
        return _run_posterior(args)
    if args.eta_k is None:
        raise ValueError("give --eta-k A (point mode) or --posterior FILE --lr X (posterior mode)")
    if args.lr is not None or args.model is not None or args.model_size is not None:
        raise ValueError(
            "--lr, --model and --model-size belong to posterior mode; give --posterior FILE too"
        )
    if not (math.isfinite(args.eta_k) and args.eta_k > 0):
        # --eta-k inf said "a, momentum and k_ref must be finite, got inf, 0.0, 1.0", naming
        # no option (and with --convention ema the gain it named was not the number given)
        raise ValueError(
            f"--eta-k {args.eta_k:g}: the gain a = eta K must be a positive number, and finite "
            "(learning rate times the reward's curvature)"
        )
    from bayes_grpo.dynamics import effective_step, stability_summary

    momentum = 0.0 if args.momentum is None else args.momentum
    k_ref = 1.0 if args.k_ref is None else args.k_ref
    convention = args.convention or HEAVY_BALL
    a = float(effective_step(args.eta_k, momentum, convention))
    summary = stability_summary(a, momentum, k_ref)
    summary = {"eta_k": args.eta_k, "convention": convention} | summary
    if args.json:
        print_json(summary)
        return 0
    for line in format_summary(summary):
        print(line)
    return 0


def _yes(flag: object) -> str:
    return "n/a" if flag is None else ("yes" if flag else "NO")


def _closed_form_threshold(s: dict) -> str:
    """The closed-form threshold gain, or why there is none (no lag: ``C_eff = 1 - mu > 0``)."""
    value = s["threshold_a_closed_form"]
    if value is not None and math.isinf(float(value)):
        return f"none (K_ref = {s['k_ref']:g}: C_eff = 1 - mu > 0 at every gain)"
    return number_text(value)


def _marginal(s: dict) -> bool:
    """Is the summary's ``C_eff`` 0 up to rounding (``dynamics.stability.closed_form_marginal``)?"""
    from bayes_grpo.dynamics.stability import closed_form_marginal

    if any(s.get(key) is None for key in ("a", "momentum", "k_ref")):
        return False
    return bool(closed_form_marginal(float(s["a"]), float(s["momentum"]), float(s["k_ref"])))


def _damping(s: dict) -> str:
    """``C_eff``, as 0 where it is 0 up to rounding: at ``--eta-k 0.05 --momentum 0.9 --k-ref 2``
    (``a K_ref = 1 - mu``) it read "C_eff = -2.77556e-17", at ``--eta-k 0.3 --momentum 0.1
    --k-ref 3`` "C_eff = 1.11022e-16"."""
    if _marginal(s):
        return "0 (on the threshold, up to rounding)"
    return number_text(s["C_eff"])


def _on_the_threshold(s: dict) -> str:
    """Why ``C_eff`` is not stable on the threshold: it is 0 up to rounding (``closed_form_stable``).
    At ``--eta-k 0.3 --momentum 0.1 --k-ref 3`` the lines read "C_eff = 1.11022e-16" and then
    "closed form (C_eff > 0): NO", with nothing to say why."""
    if s["stable_closed_form"] or not float(s["a"]) > 0 or not _marginal(s):
        return ""
    return " (C_eff is 0 up to rounding: the setting is on the threshold)"


def _critical_k_ref(value: object) -> str:
    """The first unstable lag, or that none is a float (a gain too small: ``critical_k_ref`` inf)."""
    if value is not None and math.isinf(float(value)):
        return f"none below the largest float ({sys.float_info.max:.3g}): the gain is too small"
    return number_text(value, "g")


def _radius_line(s: dict) -> str:
    """The exact verdict's line: the spectral radius as a number that reads against 1.

    ``.8f`` printed a radius of 1e150 (``--eta-k 1e300``) with 150 digits, and one within
    float rounding of 1 (``--eta-k 1e-20``: 1 - 2e-20 is 1.0) as "1.00000000 < 1): yes".
    """
    verdict = _yes(s["stable_exact"])
    r = s["spectral_radius"]
    if r is None or not math.isfinite(float(r)):
        return f"stable         exact (spectral radius {number_text(r)} < 1): {verdict}"
    r = float(r)
    # at the threshold itself (--eta-k 0.1 --momentum 0.9 --k-ref 1: a = 1 - mu, radius 1) the
    # roots came out 1 - 2.2e-16, and the line read "spectral radius 1 - 2.22e-16 < 1): NO"
    off_by_rounding = abs(r - 1.0) < 1e-9 and s["stable_exact"] is not None and (r < 1.0) != bool(s["stable_exact"])
    if r == 1.0 or off_by_rounding:
        return (
            "stable         exact (spectral radius < 1; here 1 to float precision, judged by "
            f"a < a*): {verdict}"
        )
    if abs(r - 1.0) < 5e-9:  # .8f would print 1.00000000
        text = f"1 {'-' if r < 1.0 else '+'} {abs(r - 1.0):.3g}"
    elif r >= 1e6:
        text = format(r, ".6g")
    else:
        text = format(r, ".8f")
    return f"stable         exact (spectral radius {text} < 1): {verdict}"


def format_summary(s: dict) -> list[str]:
    """Human-readable lines of a :func:`stability_summary` dict (with ``convention``)."""
    conv = s.get("convention", HEAVY_BALL)
    gain = "a = eta K" if conv == HEAVY_BALL else "a = eta K (1 - beta1)"
    lines = [
        # :g printed --momentum 0.9999999 as "mu = 1", outside [0, 1)
        f"setting        {gain} = {number_text(s['a'])}, mu = {s['momentum']:.10g} ({conv}), "
        f"K_ref = {s['k_ref']:g}",
        f"coefficients   M_eff = {number_text(s['M_eff'])}, C_eff = {_damping(s)}, "
        f"K_eff = {number_text(s['K_eff'])}   [continuum model]",
        f"regime         {s['regime']}, zeta = {number_text(s['zeta'], '.4g')}   [continuum model]",
        f"regime         {s['regime_exact'] or 'n/a'}   [exact: the discrete recursion's dominant root]",
        f"stable         closed form (C_eff > 0): {_yes(s['stable_closed_form'])}{_on_the_threshold(s)}",
        _radius_line(s),
        f"threshold a*   closed form (1 - mu)/K_ref: {_closed_form_threshold(s)}",
        f"threshold a*   exact (spectral radius = 1): {number_text(s['threshold_a_exact'])}",
        f"critical K_ref closed form: first unstable K_ref = {_critical_k_ref(s['critical_k_ref_closed_form'])}",
        f"critical K_ref exact: first unstable K_ref = {_critical_k_ref(s['critical_k_ref_exact'])}",
    ]
    if s.get("note"):
        lines.append(f"note           {s['note']}")
    return lines


def _run_posterior(args: argparse.Namespace) -> int:
    if args.convention is None and args.momentum == 0:
        # at momentum 0 the conventions are one optimizer step (eta (1 - 0) = eta), as the fit
        # and predict take it (model.prepare.convention_without_momentum)
        args.convention = HEAVY_BALL
    missing = [
        flag
        for flag, value in (
            ("--lr", args.lr),
            ("--momentum", args.momentum),
            ("--k-ref", args.k_ref),
            ("--convention", args.convention),
        )
        if value is None
    ]
    if missing:
        raise ValueError(f"posterior mode needs {', '.join(missing)}")
    if args.eta_k is not None:
        raise ValueError("--eta-k belongs to point mode; posterior mode takes --lr")
    try:
        from bayes_grpo.checks.stability import stability_from_posterior
    except ImportError as exc:  # the checks area may be absent in a partial install
        raise ValueError(
            f"posterior mode needs bayes_grpo.checks.stability.stability_from_posterior ({exc})"
        ) from exc
    from bayes_grpo.model.core import UnusedModelSizeWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedModelSizeWarning)  # said below, as --model-size
        result = stability_from_posterior(
            args.posterior,
            learning_rate=args.lr,
            momentum=args.momentum,
            momentum_convention=args.convention,
            k_ref=args.k_ref,
            model=args.model,
            model_size=args.model_size,
        )
    if args.model_size is not None:
        unused = None
        if not result.values.get("new_model", False):
            unused = f"{result.values.get('model')!r} is a fitted LLM, whose curvature is its own"
        elif result.values.get("size_regression") is False:
            unused = "this fit has no regression of the curvature on model size"
        if unused is not None:
            print(
                f"bayes-grpo stability: warning: --model-size {args.model_size:g} is not used: {unused}",
                file=sys.stderr,
            )
    if result.values.get("scheduled_runs"):
        from bayes_grpo.model.prepare import scheduled_fit_warning

        warning = scheduled_fit_warning(result.values["scheduled_runs"])
        print(f"bayes-grpo stability: warning: {warning}", file=sys.stderr)
    if args.json:
        out = result.to_dict()
        # the saved fit's own warnings (stderr has them too), where `predict --json` gives them:
        # they were on stderr only
        out["posterior_warnings"] = out["values"].pop("posterior_warnings", [])
        print_json(out)
        return 0
    print(result.summary)
    if result.table is not None:
        from bayes_grpo.cli._common import print_table

        print_table(_intervals_shown(result.table))
    return 0


def _intervals_shown(table):
    """The posterior table as read: a quantity with a value and no interval (a probability)
    leaves ``lo`` / ``hi`` blank, where they read "NaN" as if they had failed to compute; the
    numbers to 6 significant digits (a critical K_ref of 755, not 755.000000)."""
    import math

    def cell(v: float) -> str:
        return "NaN" if math.isnan(v) else f"{v:.6g}"

    no_interval = table["value"].notna() & table["lo"].isna() & table["hi"].isna()
    shown = table.map(cell)
    shown.loc[no_interval, ["lo", "hi"]] = ""
    return shown


__all__ = ["register", "run", "format_summary", "EMA"]
