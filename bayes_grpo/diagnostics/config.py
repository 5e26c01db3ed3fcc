"""Named, documented thresholds of the failure-mode diagnostics.

Every number a diagnostic compares against lives here, in one frozen dataclass per mode,
gathered in :class:`DiagnosticsConfig`. Override any of them from Python
(``DiagnosticsConfig.from_mapping({"degeneracy": {"flag_fraction": 0.6}})``) or from the
command line (``bayes-grpo diagnose runs.nc --set degeneracy.flag_fraction=0.6``).

Fractions of a run (``late_fraction``, ``edge_fraction`` ...) are fractions of the run's
logged step span; levels of a metric are in that metric's own units unless the name says
"relative".
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Metric names each mode looks for, first present wins: the canonical names of
#: ``bayes_grpo.runset.names`` (``eval_<name>`` for evaluation metrics, other metrics
#: sanitised: ``clip_ratio/region_mean`` -> ``clip_ratio_region_mean``)
#: and a few aliases for run sets built by hand.
EVAL_REWARD_NAMES: tuple[str, ...] = (
    "eval_reward",
    "eval_accuracy",
    "eval_acc",  # PyTorch Lightning's self.log("val_acc"), Keras' val_acc
    "eval_answer_accuracy",
    "eval_score",
    "eval/reward",
    "eval/accuracy",
)
#: verl's validation reward, tried when none of :data:`EVAL_REWARD_NAMES` is logged (and
#: ``hacking.eval_metrics`` is left at its default): ``val-core/<data_source>/<var>/mean@<N>``
#: (``trainer/ppo/ray_trainer.py``, ``_validate``: ``<var>`` is ``acc`` when the reward function
#: returns one, else ``reward``) is ingested as ``eval_<data_source>_<var>_mean_<N>``, and verl
#: before 0.3's ``val/test_score/<data_source>`` as ``eval_test_score_<data_source>``
#: (``mean_at_<N>`` too: verl's MLflow logger writes ``@`` as ``_at_``, ``_MlflowLoggingAdapter``).
#: Of one data source the ``acc`` curve is taken before the ``reward`` one and the largest ``N``
#: first (verl's own ``val-core`` choice); with several data sources none is chosen.
VERL_EVAL_REWARD = re.compile(
    r"^eval_(?P<source>.+)_(?P<var>acc|reward|score|scores)_mean_(?:at_)?(?P<n>\d+)$"
    r"|^eval_test_score_(?P<old_source>.+)$"
)
ENTROPY_NAMES: tuple[str, ...] = ("entropy", "token_entropy", "policy_entropy")
ZERO_STD_NAMES: tuple[str, ...] = ("frac_reward_zero_std",)
REWARD_STD_NAMES: tuple[str, ...] = ("reward_std", "rollout_std_reward")
GRAD_NORM_NAMES: tuple[str, ...] = ("grad_norm", "actor_grad_norm")
#: The PPO importance ratio ``pi_theta / pi_old`` (the policy being updated over the one that
#: sampled the batch), whose growth is a step too large for the lag. Never one of
#: :data:`SAMPLER_RATIO_NAMES`.
IMPORTANCE_RATIO_NAMES: tuple[str, ...] = (
    "dynamics_is_ratio_max",  # bayes-grpo train's callback: pi_theta / pi_old, every step
    "importance_ratio_max",
    "importance_ratio",
)
#: TRL's ``sampling/importance_sampling_ratio/{min,mean,max}`` (GRPOTrainer generating with vLLM,
#: ``vllm_importance_sampling_correction``): ``exp(old_logp - sampler_logp)`` per token, the training
#: engine's probability of the sampled token over the vLLM sampler's (truncated importance sampling
#: of the two engines' mismatch, not a policy update), capped at ``vllm_importance_sampling_cap``
#: (2 or 3; its ``*_mask`` modes set a ratio above the cap to 0). Not the PPO ratio, and its max
#: cannot grow past the cap: the instability mode does not read it as the importance ratio and
#: says so where a run logs it (the engines' mismatch is
#: ``sampling/sampling_logp_difference/*``, uncapped, which no mode reads either).
SAMPLER_RATIO_NAMES: tuple[str, ...] = (
    "sampling_importance_sampling_ratio_max",
    "sampling_importance_sampling_ratio_mean",
    "sampling_importance_sampling_ratio_min",
)
CLIP_RATIO_NAMES: tuple[str, ...] = ("clip_ratio", "clip_ratio_region_mean", "clip_fraction")
#: KL divergence to the reference policy (TRL ``kl``; verl's ``actor/kl_loss`` and the other
#: aliases of ``bayes_grpo.runset.names`` are ingested as ``kl``).
KL_NAMES: tuple[str, ...] = ("kl",)


#: Allowed values of the numeric settings, ``{section: {field: (low, high, low_open,
#: high_open)}}`` (an integer field is also refused when not integral): a setting outside its
#: range means nothing (a probability of 2, no bootstrap replicate, a window of no points) and
#: is refused naming it, before any run is read.
RANGES: dict[str, dict[str, tuple[float, float, bool, bool]]] = {
    "common": {
        "min_points": (1, float("inf"), False, True),
        "smooth_fraction": (0.0, 1.0, True, False),
        "n_boot": (1, float("inf"), False, True),
        "block_fraction": (0.0, 1.0, True, False),
        "interval_prob": (0.0, 1.0, True, True),
        "sustain_fraction": (0.0, 1.0, True, False),
        "seed": (0, float("inf"), False, True),
    },
    "hacking": {
        "eval_saturation_level": (0.0, 1.0, True, False),
        "min_window_fraction": (0.0, 1.0, True, True),
        "decoupling_threshold": (-float("inf"), float("inf"), True, True),
        "min_train_gain": (-float("inf"), float("inf"), True, True),
        "min_eval_points": (2, float("inf"), False, True),
    },
    "degeneracy": {
        "flag_fraction": (0.0, 1.0, False, True),
        "late_fraction": (0.0, 1.0, True, False),
        "min_duration_fraction": (0.0, 1.0, True, False),
        "std_ddof": (0, 1, False, False),
    },
    "concentration": {
        "drop_fraction": (0.0, 1.0, True, True),
        "progress_threshold": (0.0, 1.0, True, False),
        "collapse_fraction": (0.0, 1.0, True, True),
        "start_fraction": (0.0, 1.0, True, True),
    },
    "instability": {
        "edge_fraction": (0.0, 0.5, True, False),
        "growth_factor": (1.0, float("inf"), True, True),
        "kl_growth_factor": (1.0, float("inf"), True, True),
        "clip_min_level": (0.0, 1.0, True, False),
        "zeta_threshold": (0.0, float("inf"), True, True),
        "min_overshoot": (0.0, 1.0, False, True),
        "prob_threshold": (0.0, 1.0, True, False),
        "min_bic_gain": (-float("inf"), float("inf"), True, True),
        "min_amplitude_noise": (0.0, float("inf"), False, True),
        "min_period_points": (0.0, float("inf"), False, True),
        "max_zeta_interval_ratio": (1.0, float("inf"), True, True),
        "collapse_sd": (0.0, float("inf"), True, True),
        "spike_alpha": (0.0, 1.0, True, True),
    },
}


def _check_ranges(config: Any, section: str) -> None:
    """Refuse a setting of ``config`` (one section) outside :data:`RANGES`, naming it."""
    for name, (low, high, low_open, high_open) in RANGES[section].items():
        value = getattr(config, name)
        where = f"diagnostics setting {section}.{name}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{where}: expected a number, got {value!r}")
        if isinstance(getattr(type(config), name, None), int) and value != int(value):
            raise ValueError(f"{where}: expected an integer, got {value!r}")
        below = value <= low if low_open else value < low
        above = value >= high if high_open else value > high
        if value != value or below or above:  # NaN, or outside
            interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
            raise ValueError(f"{where} must lie in {interval}; got {value!r}")


@dataclass(frozen=True)
class CommonConfig:
    """Settings shared by all modes.

    Attributes
    ----------
    min_points
        Fewest finite points a series needs before a mode looks at it; below that the mode
        is "not assessable".
    smooth_fraction
        Width of the centred moving median used to smooth a series, as a fraction of its
        number of points (at least 3 points).
    n_boot
        Bootstrap replicates for intervals when no posterior is given (moving-block
        bootstrap of residuals around the smoothed series).
    block_fraction
        Length of a bootstrap block, as a fraction of the series length; blocks keep the
        serial correlation of the residuals. Every bootstrap caps it at a quarter of the
        smoothing window (at least 1 point): residuals about a moving median are correlated
        over its window by the smoother itself, and blocks that long take the noise's slow
        variation out of the replicates (``_series.residual_bootstrap_parts``).
    interval_prob
        Probability mass of reported intervals (central bootstrap percentiles or posterior
        equal-tailed intervals).
    sustain_fraction
        An onset is the first step after which the condition holds for at least this
        fraction of the remaining points ("sustained", not a single spike).
    seed
        Seed of the bootstrap random generator (results are reproducible).
    figures
        Draw a matplotlib evidence figure for each result.
    """

    min_points: int = 10
    smooth_fraction: float = 0.1
    n_boot: int = 200
    block_fraction: float = 0.1
    interval_prob: float = 0.9
    sustain_fraction: float = 0.8
    seed: int = 0
    figures: bool = True

    def __post_init__(self) -> None:
        _check_ranges(self, "common")


@dataclass(frozen=True)
class HackingConfig:
    """Train-eval decoupling (reward hacking).

    The late window starts when the smoothed evaluation reward first covers
    ``eval_saturation_level`` of its rise from its start to its maximum (or at the last
    ``min_window_fraction`` of the run if that is later). In it, each reward's gain (OLS
    slope times window length) is expressed as a fraction of that reward's own range
    (max - min of its smoothed curve), so train and eval rewards on different scales
    compare.

    Attributes
    ----------
    eval_metrics
        Names of the evaluation reward, first present wins. At the default, a run that logs
        none of them but verl's validation reward of one data set gets that one
        (:data:`VERL_EVAL_REWARD`).
    eval_saturation_level
        Fraction of the evaluation reward's rise that marks its saturation (window start).
    min_window_fraction
        The late window covers at least this fraction of the run.
    decoupling_threshold
        Flagged when the lower interval bound of (train gain - eval gain) in the late
        window exceeds this (fractions of each reward's range).
    min_train_gain
        ...and the training reward still gains at least this fraction of its range over the
        window ("training keeps rising").
    min_eval_points
        Fewest evaluation points in the late window (and overall) to assess the mode.
    """

    eval_metrics: tuple[str, ...] = EVAL_REWARD_NAMES
    eval_saturation_level: float = 0.9
    min_window_fraction: float = 0.25
    decoupling_threshold: float = 0.1
    min_train_gain: float = 0.1
    min_eval_points: int = 4

    def __post_init__(self) -> None:
        _check_ranges(self, "hacking")


@dataclass(frozen=True)
class DegeneracyConfig:
    """Advantage degeneracy: groups whose rewards are all equal carry no gradient signal.

    Attributes
    ----------
    zero_std_metrics
        Names of the logged share of groups with zero reward spread.
    reward_std_metrics
        Names of the mean within-group reward standard deviation (used to derive the share
        when it is not logged; needs the group size G and rewards in ``reward_range``).
    flag_fraction
        "Most groups carry no signal": flagged when the zero-signal share over the final
        window, or over a sustained stretch of at least ``min_duration_fraction`` of the run,
        exceeds this.
    late_fraction
        Final window, as a fraction of the run.
    min_duration_fraction
        Shortest sustained stretch above ``flag_fraction`` that counts.
    reward_range
        ``(low, high)`` of a binary per-completion reward, for the binomial expectation
        ``p^G + (1-p)^G`` at ``p = (reward - low) / (high - low)``; None infers ``(0, 1)``
        when every logged reward lies in ``[0, 1]`` and otherwise skips the expectation.
    std_ddof
        Delta degrees of freedom of the logged within-group std (TRL: torch.std, 1).
    """

    zero_std_metrics: tuple[str, ...] = ZERO_STD_NAMES
    reward_std_metrics: tuple[str, ...] = REWARD_STD_NAMES
    flag_fraction: float = 0.5
    late_fraction: float = 0.25
    min_duration_fraction: float = 0.25
    reward_range: tuple[float, float] | None = None
    std_ddof: int = 1

    def __post_init__(self) -> None:
        _check_ranges(self, "degeneracy")
        pair = self.reward_range
        if pair is not None:
            try:
                low, high = (float(v) for v in pair)  # type: ignore[union-attr]
            except (TypeError, ValueError):
                raise ValueError(
                    f"diagnostics setting degeneracy.reward_range: expected two numbers "
                    f"(low, high), got {pair!r}"
                ) from None
            if not (np.isfinite(low) and np.isfinite(high) and high > low):
                raise ValueError(
                    f"diagnostics setting degeneracy.reward_range must have finite low < high; "
                    f"got {pair!r}"
                )


@dataclass(frozen=True)
class ConcentrationConfig:
    """Policy concentration: entropy falling fast while the reward is far from its plateau.

    Reward progress is ``phi(t) = (R(t) - R_start) / (p* - R_start)`` with ``p*`` from a
    single-exponential fit (or the posterior plateau); entropy drop is
    ``1 - H(t) / H_start`` on the smoothed curves. The onset is the first step at which the
    entropy drop reaches ``drop_fraction`` (sustained).

    Attributes
    ----------
    entropy_metrics
        Names of the policy entropy, first present wins.
    drop_fraction
        Relative entropy loss that counts as "fallen".
    progress_threshold
        Flagged when the entropy has fallen by ``drop_fraction`` before the reward covered
        this fraction of its way to the plateau (including a reward that never moved).
    collapse_fraction
        Also flagged when the smoothed entropy ends below this fraction of its start
        (collapse: a near-deterministic policy, whatever the reward did).
    start_fraction
        Leading fraction of the run (at least 3 points) whose median defines the starting
        levels ``H_start`` and ``R_start``.
    """

    entropy_metrics: tuple[str, ...] = ENTROPY_NAMES
    drop_fraction: float = 0.5
    progress_threshold: float = 0.5
    collapse_fraction: float = 0.1
    start_fraction: float = 0.05

    def __post_init__(self) -> None:
        _check_ranges(self, "concentration")


@dataclass(frozen=True)
class InstabilityConfig:
    """Dynamical instability: growing side quantities, reward oscillation, negative damping.

    Attributes
    ----------
    grad_norm_metrics, importance_ratio_metrics, clip_ratio_metrics
        Names of the side quantities whose sustained growth is checked. The importance ratio is
        the PPO ratio ``pi_theta / pi_old``; TRL's ``sampling/importance_sampling_ratio/*`` (the
        vLLM sampler's correction, capped: :data:`SAMPLER_RATIO_NAMES`) is not among the
        defaults, and a run that logs it is told it was not read.
    kl_metrics
        Names of the KL divergence to the reference policy. It starts at 0 (the policy starts
        as the reference) and builds up while the policy learns, so its growth is measured
        from the central ``edge_fraction`` of the run to the last, against ``kl_growth_factor``
        (see the module docstring of ``instability``).
    edge_fraction
        Early and late windows (fractions of the run) whose medians are compared.
    growth_factor
        Flagged when late median / early median of grad_norm or the importance ratio
        exceeds this and its interval excludes 1 (sustained growth).
    kl_growth_factor
        Flagged when the KL's late median / central median exceeds this and its interval
        excludes 1. ``1.75^3 = 5.36``: over the default windows (medians at 87.5% and 50% of the
        run) a KL growing like ``t^3``; a steady drift from the reference (``t^2``: ratio 3.06
        from the first step, 4.3 from 15% of the run, 5.1 from 20%) stays below it, a drift whose
        speed grows (``t^4``, 9.4, and faster) passes it.
    clip_min_level
        Flagged when the clip ratio averages at least this over some window of
        ``edge_fraction`` of the run (with its bootstrap lower bound above half of it):
        sustained clipping. Healthy on-policy GRPO clips well under 1% of tokens.
    zeta_threshold
        A fitted damping ratio below this means oscillation.
    min_overshoot
        Oscillation must be visible: the relative overshoot ``exp(-pi zeta / sqrt(1 -
        zeta^2))`` of the fitted curve must reach this.
    prob_threshold
        With a posterior: flagged when P(C_eff < 0) or P(zeta < zeta_threshold) (with a
        visible overshoot) reaches this. Without one: the upper bound of the fit's
        ``interval_prob`` interval of zeta must lie below ``zeta_threshold``.
    min_bic_gain
        Without a posterior, the oscillator fit must beat the single exponential by this
        much in BIC (10: "very strong"; residuals are autocorrelated, so a margin well
        above 2 guards against fitting noise).
    min_amplitude_noise
        ...and its overshoot amplitude ``overshoot * |p* - R0|``, as far as the fitted curve
        shows it at the logged steps, must reach this many noise standard deviations (first
        differences).
    min_period_points
        ...and its period must span at least this many logging intervals.
    fit_oscillation
        Fit the oscillator law to the reward (``bayes_grpo.dynamics.lsq``, about a second
        per run); False skips the reward-oscillation part.
    max_zeta_interval_ratio
        A fitted damping ratio whose Gauss-Newton interval is wider than this (upper / lower
        end) is reported as not identified by the run, with the interval ``[0, inf]``
        instead of a local approximation that spans many decades.
    collapse_sd
        Reward collapse: the mean reward over the last ``edge_fraction`` of the run ends below
        the first's, the best window of that length lies at least this many within-window
        standard deviations (pooled over the best window and the last, the last's about its
        best one-fall fit, so that a collapse inside it is not its spread) above the last, and at
        least as many above the first (the reward rose before it fell). See the module
        docstring of ``instability`` for the noise band.
    spike_alpha
        Spikes of grad_norm or the importance ratio (a step above ``growth_factor`` times both
        its moving median and the early window's median) grow more frequent: flagged when a
        one-sided Fisher exact test of the last ``edge_fraction``'s spike count against the
        first's has a p-value at most this (0.01, the level of ``bayes_grpo.metrics.has_trend``).
    process_noise_check
        Without a posterior, an oscillation that passes every test above must also hold
        when the reward may wander about its curve: the state-space law (process noise
        through the run's own dynamics plus measurement noise,
        ``diagnostics._fits.state_space_damping_test``) must put ``zeta`` below
        ``zeta_threshold`` at ``interval_prob`` (likelihood ratio against the best fit with
        ``zeta >= zeta_threshold`` at least the chi-square(1) quantile, and reached by no more
        than a one-sided ``(1 - interval_prob) / 2`` share of the runs simulated from that
        best fit: a parametric bootstrap of 19 replicates at the default 0.9,
        ``diagnostics._fits.state_space_null_pvalue``; the chi-square calibration alone let
        19% of wandering 30-60 point runs through). About 0.1 s for 200 logged points (3 s
        for 5000), and up to 20 times that when the ratio passes the chi-square quantile,
        only for runs the other tests flag; False skips it.
    """

    grad_norm_metrics: tuple[str, ...] = GRAD_NORM_NAMES
    importance_ratio_metrics: tuple[str, ...] = IMPORTANCE_RATIO_NAMES
    clip_ratio_metrics: tuple[str, ...] = CLIP_RATIO_NAMES
    kl_metrics: tuple[str, ...] = KL_NAMES
    edge_fraction: float = 0.25
    growth_factor: float = 3.0
    kl_growth_factor: float = 1.75**3
    clip_min_level: float = 0.05
    zeta_threshold: float = 1.0
    min_overshoot: float = 0.05
    prob_threshold: float = 0.9
    min_bic_gain: float = 10.0
    min_amplitude_noise: float = 1.0
    min_period_points: float = 4.0
    fit_oscillation: bool = True
    max_zeta_interval_ratio: float = 1e4
    collapse_sd: float = 3.0
    spike_alpha: float = 0.01
    process_noise_check: bool = True

    def __post_init__(self) -> None:
        _check_ranges(self, "instability")


@dataclass(frozen=True)
class DiagnosticsConfig:
    """All thresholds of the four failure-mode diagnostics (see each mode's config)."""

    common: CommonConfig = field(default_factory=CommonConfig)
    hacking: HackingConfig = field(default_factory=HackingConfig)
    degeneracy: DegeneracyConfig = field(default_factory=DegeneracyConfig)
    concentration: ConcentrationConfig = field(default_factory=ConcentrationConfig)
    instability: InstabilityConfig = field(default_factory=InstabilityConfig)

    def __post_init__(self) -> None:
        # DiagnosticsConfig(degeneracy={"flag_fraction": 0.6}) was taken, and diagnose() died
        # in "'dict' object has no attribute 'reward_range'"
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            kind = type(f.default_factory())  # type: ignore[misc]
            if not isinstance(value, kind):
                raise TypeError(
                    f"DiagnosticsConfig {f.name}= takes a {kind.__name__}, got {type(value).__name__}; "
                    f"from a mapping: DiagnosticsConfig.from_mapping({{{f.name!r}: {{field: value, ...}}}})"
                )

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Mapping[str, Any]] | None) -> DiagnosticsConfig:
        """Defaults overridden by ``{section: {field: value}}``; unknown names raise ValueError."""
        base = cls()
        if not mapping:
            return base
        changes: dict[str, Any] = {}
        for section, values in mapping.items():
            if section not in {f.name for f in dataclasses.fields(cls)}:
                raise ValueError(
                    f"unknown diagnostics config section {section!r}; known: {[f.name for f in dataclasses.fields(cls)]}"
                )
            if not isinstance(values, Mapping):
                raise ValueError(
                    f"diagnostics config section {section!r} is an object {{field: value, ...}}; got {values!r:.80}"
                )
            current = getattr(base, section)
            known = {f.name: f for f in dataclasses.fields(current)}
            unknown = set(values) - set(known)
            if unknown:
                raise ValueError(
                    f"unknown {section} settings {sorted(unknown)}; known: {sorted(known)}"
                )
            coerced = {
                k: _coerce(v, getattr(current, k), f"{section}.{k}") for k, v in values.items()
            }
            changes[section] = dataclasses.replace(current, **coerced)
        return dataclasses.replace(base, **changes)

    @classmethod
    def from_assignments(cls, assignments: list[str] | None) -> DiagnosticsConfig:
        """Defaults overridden by ``["section.field=value", ...]`` (values parsed as JSON when possible)."""
        mapping: dict[str, dict[str, Any]] = {}
        for item in assignments or []:
            key, sep, raw = item.partition("=")
            section, dot, name = key.strip().partition(".")
            if not sep or not dot or not name:
                raise ValueError(
                    f"config assignment {item!r}: expected SECTION.FIELD=VALUE, e.g. degeneracy.flag_fraction=0.6"
                )
            try:
                value: Any = json.loads(raw)
            except json.JSONDecodeError:
                value = raw
            mapping.setdefault(section, {})[name] = value
        return cls.from_mapping(mapping)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """JSON-ready ``{section: {field: value}}``."""
        return {f.name: dataclasses.asdict(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _coerce(value: Any, default: Any, name: str) -> Any:
    """Coerce an override to the type of the default (tuples from lists, floats from ints)."""
    if isinstance(default, bool):
        if isinstance(value, str):
            if value.lower() in {"true", "1", "yes"}:
                return True
            if value.lower() in {"false", "0", "no"}:
                return False
            raise ValueError(f"{name}: expected true/false, got {value!r}")
        # bool(2), bool(0.5), bool([0]) are True: a number other than 0 / 1 (or a list) is no
        # switch setting and was taken as "on"
        if isinstance(value, bool) or (isinstance(value, int | float) and value in (0, 1)):
            return bool(value)
        raise ValueError(f"{name}: expected true/false, got {value!r}")
    if default is None and isinstance(value, str) and "," in value:
        # a pair given on the command line without JSON brackets (reward_range=-1,1): numbers,
        # not the string's characters
        try:
            return tuple(float(v) for v in value.split(","))
        except ValueError:
            raise ValueError(
                f"{name}: expected numbers separated by commas, got {value!r}"
            ) from None
    if isinstance(default, tuple) or (default is None and isinstance(value, list | tuple)):
        if isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if not isinstance(value, list | tuple):  # --set hacking.eval_metrics=5: JSON's 5
            value = [value]
        if default and all(isinstance(v, str) for v in default):  # metric names
            return tuple(str(v) for v in value)
        return tuple(value)
    if isinstance(default, int):
        # int(1.5) would be 1: a seed or a count given as a fraction is refused, not truncated
        try:
            number = float(value)
            if number != int(number):
                raise ValueError
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{name}: expected an integer, got {value!r}") from None
        return int(number)
    if isinstance(default, float):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected a number, got {value!r}") from None
    return value


__all__ = [
    "CommonConfig",
    "ConcentrationConfig",
    "DegeneracyConfig",
    "DiagnosticsConfig",
    "HackingConfig",
    "InstabilityConfig",
]
