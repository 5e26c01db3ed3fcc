"""Build the :class:`~bayes_grpo.checks.base.CheckResult` every diagnostic returns.

Convention: ``passed`` is True when the failure mode is *not* detected, False when it is
detected, and None when the run lacks what the mode needs ("not assessable", never a
silent pass). ``values`` always holds ``run``, ``mode``, ``detected``, ``onset_step``,
``strength`` (``{"name", "value", "lower", "upper", "interval_prob", "source"}``) and
``evidence`` (the numbers behind the verdict).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from bayes_grpo.checks.base import CheckResult
from bayes_grpo.diagnostics._series import step_number

#: Mode names, in the order ``diagnose`` runs them.
MODE_TITLES: dict[str, str] = {
    "reward_hacking": "train-eval decoupling (reward hacking)",
    "advantage_degeneracy": "advantage degeneracy",
    "policy_concentration": "policy concentration",
    "instability": "dynamical instability",
}


#: What to try when a mode is detected (said after the evidence; ``values["remedy"]``): the
#: usual GRPO levers for each failure, none of which the diagnostic itself has tested.
REMEDIES: dict[str, str] = {
    "reward_hacking": (
        "read the completions around the onset step: a training reward the evaluation does not "
        "confirm is usually an exploited reward function or verifier; tighten it, raise the KL "
        "weight beta, and keep the checkpoint from before the onset"
    ),
    "advantage_degeneracy": (
        "groups whose completions all score the same give no gradient: drop and resample them "
        "(dynamic sampling), raise G, or move to prompts of matching difficulty; a reward with "
        "partial credit also restores the spread"
    ),
    "policy_concentration": (
        "the policy commits before it has learned: raise the KL weight beta or add an entropy "
        "bonus, raise the sampling temperature, or lower the learning rate"
    ),
    "instability": (
        "the step is too large for the lag: lower the learning rate, K_ref or the momentum "
        "below the threshold eta K K_ref = 1 - mu (`bayes-grpo stability` or `phase-diagram` "
        "with a fitted posterior give it), and resume from a checkpoint before the onset"
    ),
}

#: The remedy of an instability detection on a reward oscillation alone: an underdamped law
#: (zeta < 1) that settles is stable, so the instability remedy (get below the threshold,
#: resume from before the onset) does not apply; what damps it does.
OSCILLATION_REMEDY: str = (
    "swings that settle are the law's underdamped regime, not a failure, and need no restart; to "
    "damp them lower the momentum, the learning rate or K_ref (each raises the damping ratio "
    "zeta), and check the margin to the threshold eta K K_ref = 1 - mu with `bayes-grpo "
    "stability` (a fitted posterior gives it) if the swings grow"
)


def strength(
    name: str,
    value: float,
    lower: float = float("nan"),
    upper: float = float("nan"),
    *,
    prob: float,
    source: str,
) -> dict[str, Any]:
    """A strength with its interval; ``source`` is "posterior", "bootstrap" or "estimate"."""
    return {
        "name": name,
        "value": float(value),
        "lower": float(lower),
        "upper": float(upper),
        "interval_prob": float(prob),
        "source": source,
    }


def not_assessable(mode: str, run_id: str, reason: str) -> CheckResult:
    """Result for a run that lacks what ``mode`` needs."""
    return CheckResult(
        name=mode,
        passed=None,
        summary=f"{run_id}: not assessable: {reason}",
        values={
            "run": run_id,
            "mode": mode,
            "detected": None,
            "onset_step": None,
            "strength": None,
            "evidence": {},
            "reason": reason,
            "badge": "not assessable",
            "title": f"{MODE_TITLES[mode]}: {run_id}",
        },
    )


def assessed(
    mode: str,
    run_id: str,
    *,
    detected: bool,
    summary: str,
    onset_step: float | None,
    strength_: dict[str, Any] | None,
    evidence: dict[str, Any],
    table: pd.DataFrame | None = None,
    figure: Any | None = None,
    remedy: str | None = None,
) -> CheckResult:
    """Result for a run the mode could assess; a detection's summary ends with ``remedy``
    (default ``REMEDIES[mode]``)."""
    figures = {} if figure is None else {f"{MODE_TITLES[mode]}: {run_id}": figure}
    remedy = (remedy or REMEDIES[mode]) if detected else None
    if remedy is not None:
        summary = f"{summary.rstrip()} What to try: {remedy}."
    return CheckResult(
        name=mode,
        passed=not detected,
        summary=f"{run_id}: {summary}",
        table=table,
        figures=figures,
        values={
            "run": run_id,
            "mode": mode,
            "detected": bool(detected),
            "onset_step": step_number(onset_step),
            "strength": strength_,
            "evidence": evidence,
            "badge": "detected" if detected else "not detected",
            "title": f"{MODE_TITLES[mode]}: {run_id}",
            "remedy": remedy,
        },
    )


#: How an interval that bounds nothing, ``[0, inf]``, reads (a damping ratio the run does not
#: identify, :func:`~bayes_grpo.diagnostics.instability.zeta_interval_limits`): in diagnose's
#: table (``cli.diagnose.printable_diagnosis_table``) and in the results' sentences.
NOT_IDENTIFIED: str = "not identified"


def bounds_nothing(lower: Any, upper: Any) -> Any:
    """True where the interval ``[lower, upper]`` is ``[0, inf]`` (scalars or arrays): one open
    end alone bounds something, and keeps its ``0`` or ``inf``."""
    return (lower == 0.0) & (upper == float("inf"))


def interval_text(lower: float, upper: float, digits: int = 3) -> str:
    """``"[0.31, 0.55]"``; ``"[not identified]"`` for ``[0, inf]`` (:func:`bounds_nothing`),
    which read as a bound at 0 beside the summary's "not identified"."""
    if bounds_nothing(lower, upper):
        return f"[{NOT_IDENTIFIED}]"
    return f"[{lower:.{digits}g}, {upper:.{digits}g}]"


def fmt_interval(s: dict[str, Any] | None, digits: int = 3) -> str:
    """``"0.42 [0.31, 0.55] (90% bootstrap)"``; an interval that bounds nothing reads
    ``[not identified]`` (:func:`interval_text`)."""
    if not s:
        return "n/a"
    v, lo, hi = s["value"], s["lower"], s["upper"]
    if lo != lo or hi != hi:  # NaN
        return f"{v:.{digits}g} ({s['source']})"
    return f"{v:.{digits}g} {interval_text(lo, hi, digits)} ({s['interval_prob']:.0%} {s['source']})"
