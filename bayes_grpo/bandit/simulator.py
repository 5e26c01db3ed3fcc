"""Softmax-bandit GRPO in torch, batched over runs: the exact reduction of DESIGN.md section 2.

One tensor program simulates many runs at once (dims ``run x group``): every seed and every
hyperparameter setting of a call is a row. CPU by default; ``device="cuda"`` (or ``"auto"``)
runs the same code on a GPU. Randomness comes from one ``torch.Generator`` seeded by ``seed``.

The GRPO step (per run, optimizer step ``n``)
---------------------------------------------
* The *behaviour* policy is the policy ``L = K_ref`` steps old, ``theta_b = theta[n - L]``
  (``theta[m] = theta[0]`` for ``m < 0``: the run starts at rest). It generates ``B`` groups
  (prompts) of ``G`` actions; arm 1 pays reward 1, arm 0 pays 0, so a group is summarised by
  its successes ``k ~ Binomial(G, p_b)``.
* Advantages per group: see :mod:`bayes_grpo.bandit.mean_field` (``"loo"`` default,
  ``"group"`` = TRL's ``(r - mean)/(std + 1e-4)`` with zero-std groups at advantage 0,
  ``"batch"``, ``"none"``).
* Importance ratios ``rho = pi_n(a) / pi_b(a)`` of the current policy to the behaviour
  policy, and PPO clipping with ``clip_eps``: a sample whose ratio has left
  ``[1 - eps, 1 + eps]`` in the direction its advantage pushes is masked (zero gradient),
  exactly where the gradient of ``min(rho A, clip(rho) A)`` vanishes. The fraction masked is
  logged as ``clip_ratio``.
* The ascent direction ``g = mean over samples of m A d log pi(a)/dtheta - beta anchor``.
  ``gradient="behaviour"`` (default) evaluates the score and the anchor at the behaviour
  policy; ``gradient="importance"`` evaluates them at the current policy with the ratio
  ``rho`` (the true gradient of the clipped surrogate: full importance reweighting).
* Optimizer: heavy ball ``v <- mu v + g; theta <- theta + eta v`` or EMA (Adam's beta1
  without the second moment) ``v <- mu v + (1 - mu) g; theta <- theta + eta v``.

Why the gradient is taken at the behaviour policy (the lag)
-----------------------------------------------------------
With full importance reweighting the expected gradient at stale samples *equals* the
current policy's gradient (``E_b[rho A grad log pi_n] = grad J(pi_n)``), so the lag would
vanish from the mean dynamics; that is ``gradient="importance"``, kept for comparison. With
``gradient="behaviour"`` the expected step is ``g(theta[n - L])`` (the ratios only mask, and
within the clip range the mask is 1), so with ``e = p - p*`` the linearised mean field is
exactly DESIGN.md's recursion

    e[n+1] - e[n] = mu (e[n] - e[n-1]) - a e[n-L],   a = eta_eff K,

``eta_eff = eta`` (heavy ball) or ``eta (1 - mu)`` (EMA), ``K`` the stiffness of
:func:`bayes_grpo.bandit.mean_field.fixed_point` (reward units, per unit step), and
``L = k_ref``. This is the delayed-gradient model of asynchronous / off-policy training: the
optimizer applies a gradient computed on, and at, rollouts ``K_ref`` steps old.

What is logged (per optimizer step, TRL names)
----------------------------------------------
``reward`` (mean of the ``B G`` rewards of the step; they come from the behaviour policy, as
in TRL where the logged reward is that of the rollouts used), ``reward_std`` (mean over groups
of the unbiased group std), ``frac_reward_zero_std``, ``kl`` (``anchor="kl"``: exact
``KL(pi || pi_ref)`` of the policy the gradient is evaluated at; ``"k3"``: sample mean of k3
there), ``entropy`` (exact entropy of the current policy, nats), ``grad_norm`` (``|g|``, logit
units), ``clip_ratio``, and ``expected_reward`` (``p_b``: the exact expectation of ``reward``
given the history; not available in a real run, the ground truth of the bandit).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Sequence

import numpy as np
import torch
import xarray as xr

from bayes_grpo._arguments import whole_count
from bayes_grpo.bandit.mean_field import (
    ADVANTAGES,
    ANCHORS,
    check_advantage,
    fixed_point,
    group_advantages,
)
from bayes_grpo.constants import HEAVY_BALL, MOMENTUM_CONVENTIONS
from bayes_grpo.dynamics.coefficients import damping_ratio, effective_step, oscillator_coefficients
from bayes_grpo.dynamics.schedule import check_multipliers
from bayes_grpo.dynamics.simulate import check_fits_in_memory
from bayes_grpo.dynamics.stability import (
    MAX_ROOT_LAG,
    closed_form_regime,
    closed_form_stable,
    recursion_regime,
    spectral_radius,
)
from bayes_grpo.runset import runset_from_arrays
from bayes_grpo.runset.names import LOGGED_LR_VAR

#: Format tag of ``attrs["truth"]`` (same layout as the SDE simulator's: settings + runs).
TRUTH_FORMAT: str = "bayes_grpo.bandit_truth/1"
#: Model label of bandit runs in the run set.
BANDIT_MODEL: str = "softmax-bandit"
#: Metrics logged per step, in order.
LOGGED_METRICS: tuple[str, ...] = (
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "kl",
    "entropy",
    "grad_norm",
    "clip_ratio",
    "expected_reward",
)
GRADIENTS: tuple[str, ...] = ("behaviour", "importance")
_DT = torch.float64
#: Probabilities are kept in [eps, 1 - eps] so that a diverging run stays finite.
_P_EPS = 1e-12


def resolve_device(device: str | torch.device = "cpu") -> torch.device:
    """``"cpu"``, ``"cuda"`` (error if absent) or ``"auto"`` (CUDA when present)."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as exc:  # torch's own message lists every device type it knows
        raise ValueError(f"unknown device {str(device)!r}; use cpu, cuda or auto") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but torch sees no CUDA device; use --device cpu")
    return dev


def _as_list(value, name: str) -> list:
    if isinstance(value, str | bytes):
        raise ValueError(f"{name} must be a number or a sequence of numbers, got {value!r}")
    if isinstance(value, Sequence | np.ndarray):
        out = list(value)
        if not out:
            raise ValueError(f"{name} is empty")
        return out
    return [value]


def simulate_bandit_arrays(
    *,
    k_ref: np.ndarray,
    group_size: np.ndarray,
    learning_rate: np.ndarray,
    momentum: np.ndarray,
    beta: np.ndarray,
    p_init: np.ndarray,
    steps: int,
    momentum_convention: str = HEAVY_BALL,
    n_prompts: int = 16,
    p_ref: float = 0.5,
    clip_eps: float = 0.2,
    advantage: str = "loo",
    anchor: str = "kl",
    gradient: str = "behaviour",
    seed: int = 0,
    device: str | torch.device = "cpu",
    progress: Callable[[int], None] | None = None,
    lr_multipliers: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Run the batched simulation; one row per run.

    Parameters
    ----------
    k_ref, group_size, learning_rate, momentum, beta, p_init
        Per-run settings, 1-d arrays of equal length ``R`` (``k_ref`` and ``group_size``
        integers >= 0 and >= 2; ``p_init`` the initial policy's success probability).
    steps
        Optimizer steps ``T``.
    progress
        Called with the number of steps done after each step (e.g. a tqdm ``update``).
    lr_multipliers
        Optional learning-rate schedule shared by all runs: update ``n`` moves the logits by
        ``learning_rate * lr_multipliers[n]`` times the momentum buffer (the buffer itself does
        not see the rate, as in torch's SGD); ``(>= T,)``, finite, ``>= 0``.

    Returns
    -------
    dict
        ``{metric: float64 array (R, T)}`` for every name in :data:`LOGGED_METRICS`, and
        ``lr`` (the rate of each update) on a schedule.
    """
    check_advantage(advantage)
    if anchor not in ANCHORS:
        raise ValueError(f"unknown anchor {anchor!r}; expected one of {ANCHORS}")
    if gradient not in GRADIENTS:
        raise ValueError(f"unknown gradient mode {gradient!r}; expected one of {GRADIENTS}")
    if momentum_convention not in MOMENTUM_CONVENTIONS:
        raise ValueError(
            f"unknown momentum convention {momentum_convention!r}; expected one of {MOMENTUM_CONVENTIONS}"
        )
    # steps=2.5 failed in torch.empty's TypeError, steps=True ran one step and n_prompts=2.5 two
    # prompts, without a word (simulate_bandit refuses them)
    steps, n_prompts = whole_count(steps, "steps"), whole_count(n_prompts, "n_prompts")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    # seed=1.5 ran as the seed 1 and True as 1, without a word (simulate_bandit refuses them)
    seed = whole_count(seed, "seed")
    if not 0 <= seed < 2**63:
        raise ValueError(f"seed must be a whole number in [0, 2**63), got {seed}")
    if n_prompts < 1:
        raise ValueError(f"n_prompts must be >= 1, got {n_prompts}")
    if not 0.0 < p_ref < 1.0:
        raise ValueError(f"p_ref must lie in (0, 1), got {p_ref}")
    dev = resolve_device(device)
    lag = np.asarray(k_ref)
    if np.any(lag < 0) or np.any(lag != np.round(lag)):
        raise ValueError(f"k_ref must be non-negative integers, got {sorted(set(lag.tolist()))}")
    gs = np.asarray(group_size)
    if np.any(gs < 2) or np.any(gs != np.round(gs)):
        raise ValueError(
            f"group_size must be integers >= 2 (a group std needs two samples), got {sorted(set(gs.tolist()))}"
        )
    pi = np.asarray(p_init, dtype=float)
    if np.any(~((pi > 0) & (pi < 1))):
        raise ValueError("p_init must lie in (0, 1)")
    mom = np.asarray(momentum, dtype=float)
    if np.any(~((mom >= 0) & (mom < 1))):
        raise ValueError("momentum must lie in [0, 1)")
    # a NaN learning rate made every logit NaN: reward 0 from step 2 on, written as a run
    lr = np.asarray(learning_rate, dtype=float)
    if np.any(~(np.isfinite(lr) & (lr > 0))):
        raise ValueError(
            f"learning_rate must be finite numbers > 0, got {sorted(set(lr[~(np.isfinite(lr) & (lr > 0))].tolist()))}"
        )
    # beta was checked only by the truth, after the whole simulation had run; a NaN made every
    # logit NaN and 0 (or inf) leaves no interior plateau
    bt = np.asarray(beta, dtype=float)
    if np.any(~(np.isfinite(bt) & (bt > 0))):
        raise ValueError(
            "beta must be finite numbers > 0 (an interior plateau p* < 1), got "
            f"{sorted(set(bt[~(np.isfinite(bt) & (bt > 0))].tolist()))}"
        )
    if not clip_eps > 0:  # a clip range <= 0 masks every sample: no update at all
        raise ValueError(f"clip_eps must be > 0 (inf: no clipping), got {clip_eps}")
    schedule = None if lr_multipliers is None else check_multipliers(lr_multipliers, steps)[:steps]

    def t(x):
        return torch.as_tensor(np.asarray(x, dtype=float), dtype=_DT, device=dev)

    R, B = len(lag), int(n_prompts)
    L = torch.as_tensor(lag.astype(np.int64), device=dev)
    G = t(gs)[:, None]  # (R, 1)
    eta, mu, beta_t = t(learning_rate), t(mom), t(beta)
    gscale = torch.ones_like(mu) if momentum_convention == HEAVY_BALL else 1.0 - mu
    theta = torch.log(t(pi)) - torch.log1p(-t(pi))
    vel = torch.zeros(R, dtype=_DT, device=dev)
    width = int(lag.max()) + 1
    hist = theta[:, None].repeat(1, width).contiguous()
    rows = torch.arange(R, device=dev)
    gmax = int(gs.max())
    kk = torch.arange(gmax + 1, dtype=_DT, device=dev)[None, :]  # (1, Gmax+1)
    log_comb = (
        torch.lgamma(G + 1) - torch.lgamma(kk + 1) - torch.lgamma(torch.clamp(G - kk, min=0) + 1)
    )
    log_comb = torch.where(kk <= G, log_comb, torch.full_like(log_comb, -math.inf))
    n_samples = B * G[:, 0]
    gen = torch.Generator(device=dev)
    gen.manual_seed(seed)
    try:
        out = {m: torch.empty(R, steps, dtype=_DT, device=dev) for m in LOGGED_METRICS}
    except (RuntimeError, MemoryError) as exc:  # torch reports a failed allocation as RuntimeError
        need = R * steps * len(LOGGED_METRICS) * 8 / 1e9
        raise ValueError(
            f"{R} runs x {steps} steps do not fit in memory ({need:.3g} GB for the logged metrics on "
            f"{dev}); use fewer steps, seeds or settings"
        ) from exc
    lo, hi = 1.0 - clip_eps, 1.0 + clip_eps
    log_pr1, log_pr0 = math.log(p_ref), math.log1p(-p_ref)

    # Per-step tensors are small ((runs, groups)): intra-op threading costs more than it
    # saves (and collapses on a loaded machine), so CPU runs use one thread.
    saved_threads = torch.get_num_threads()
    if dev.type == "cpu":
        torch.set_num_threads(1)
    try:
        for n in range(steps):
            hist[:, n % width] = theta
            theta_b = hist[rows, (n - L) % width]
            p_b = torch.sigmoid(theta_b).clamp(_P_EPS, 1.0 - _P_EPS)
            p_n = torch.sigmoid(theta).clamp(_P_EPS, 1.0 - _P_EPS)
            k = _sample_successes(p_b, G, log_comb, kk, B, gen)  # (R, B)
            batch_std = None
            if advantage == "batch":
                tot = k.sum(1, keepdim=True)
                nn = n_samples[:, None]
                batch_std = torch.sqrt(torch.clamp(tot * (nn - tot) / (nn * (nn - 1)), min=0.0))
            a1, a0 = group_advantages(k, G, p_b[:, None], advantage, batch_std=batch_std)
            rho1 = (p_n / p_b)[:, None]
            rho0 = ((1 - p_n) / (1 - p_b))[:, None]
            m1 = ~(((a1 > 0) & (rho1 > hi)) | ((a1 < 0) & (rho1 < lo)))
            m0 = ~(((a0 > 0) & (rho0 > hi)) | ((a0 < 0) & (rho0 < lo)))
            if gradient == "behaviour":
                p_g = p_b
                s1, s0 = (1 - p_b)[:, None], (-p_b)[:, None]
            else:
                p_g = p_n
                s1, s0 = rho1 * (1 - p_n)[:, None], rho0 * (-p_n)[:, None]
            pg = (k * m1 * a1 * s1 + (G - k) * m0 * a0 * s0).sum(1) / n_samples
            if anchor == "kl":
                anc = p_g - p_ref
                kl = p_g * (torch.log(p_g) - log_pr1) + (1 - p_g) * (torch.log1p(-p_g) - log_pr0)
            else:
                c1 = (1 - p_ref / p_g) * (1 - p_g)
                c0 = -(1 - (1 - p_ref) / (1 - p_g)) * p_g
                ksum = k.sum(1)
                anc = (ksum * c1 + (n_samples - ksum) * c0) / n_samples
                r1 = p_ref / p_g
                r0 = (1 - p_ref) / (1 - p_g)
                k31 = r1 - torch.log(r1) - 1
                k30 = r0 - torch.log(r0) - 1
                kl = (ksum * k31 + (n_samples - ksum) * k30) / n_samples
            g = pg - beta_t * anc
            clipped = (k * (~m1) + (G - k) * (~m0)).sum(1) / n_samples
            std_g = torch.sqrt(torch.clamp(k * (G - k) / (G * (G - 1)), min=0.0))
            out["reward"][:, n] = k.sum(1) / n_samples
            out["reward_std"][:, n] = std_g.mean(1)
            out["frac_reward_zero_std"][:, n] = ((k == 0) | (k == G)).to(_DT).mean(1)
            out["kl"][:, n] = kl
            out["entropy"][:, n] = -(p_n * torch.log(p_n) + (1 - p_n) * torch.log1p(-p_n))
            out["grad_norm"][:, n] = g.abs()
            out["clip_ratio"][:, n] = clipped
            out["expected_reward"][:, n] = p_b
            vel = mu * vel + gscale * g
            theta = theta + (eta if schedule is None else eta * float(schedule[n])) * vel
            if progress is not None:
                progress(1)
    finally:
        torch.set_num_threads(saved_threads)
    logged = {m: v.cpu().numpy() for m, v in out.items()}
    if schedule is not None:
        logged[LOGGED_LR_VAR] = lr[:, None] * schedule[None, :]
    return logged


def _allocation_failure(exc: BaseException) -> bool:
    """Is ``exc`` a failed allocation? (torch reports one as a RuntimeError, CUDA's as a subclass.)"""
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or "alloc" in text or "out of memory" in text


def _sample_successes(p, G, log_comb, kk, n_groups: int, gen: torch.Generator) -> torch.Tensor:
    """``Binomial(G_r, p_r)`` draws, ``n_groups`` per run, by inverse CDF (exact).

    One uniform per group against the run's binomial CDF (``Gmax + 1`` values): a few
    vectorised comparisons, several times faster than ``torch.binomial`` on CPU.
    """
    logp = torch.log(p)[:, None]
    log1mp = torch.log1p(-p)[:, None]
    pmf = torch.exp(log_comb + kk * logp + (G - kk) * log1mp)  # (R, Gmax+1), 0 beyond G
    cdf = torch.cumsum(pmf, dim=1)
    u = torch.rand(p.shape[0], n_groups, dtype=_DT, device=p.device, generator=gen)
    k = (u[:, :, None] > cdf[:, None, :-1]).sum(-1).to(_DT)
    return torch.minimum(k, G)


def bandit_truth(
    *,
    group_size: int,
    learning_rate: float,
    momentum: float,
    momentum_convention: str,
    k_ref: int,
    beta: float,
    n_prompts: int = 16,
    p_ref: float = 0.5,
    advantage: str = "loo",
    anchor: str = "kl",
    p_init: float | None = None,
) -> dict[str, float | str]:
    """Known truth of one bandit setting (exact mean field; no simulation, no fit).

    Returns ``plateau`` (p*), ``stiffness`` (K, reward units per unit step), ``a = eta_eff K``,
    ``M_eff, C_eff, K_eff, zeta, regime`` of DESIGN.md's oscillator, ``spectral_radius`` and
    ``regime_exact`` (:func:`~bayes_grpo.dynamics.stability.recursion_regime`) of the exact
    recursion, ``noise_d`` (D, so that the per-step state noise variance in reward
    units is ``D / G``), ``stationary_var`` (``D / (2 G C K_eff)``, None where the closed form
    is not stable: ``C <= 0``, or 0 up to rounding; ``regime`` is then ``"unstable"``),
    ``measurement_sd`` (sd of the logged reward around the expected one),
    ``initial_reward`` and the method used for ``K``.

    The lag-dependent numbers (``M_eff``, ``C_eff``, ``zeta``, ``regime``, ``regime_exact``,
    ``spectral_radius``, ``stationary_var``) describe the default ``gradient="behaviour"``
    simulator, whose linearised mean field is the lagged recursion; with
    ``gradient="importance"`` the lag largely drops out of the mean dynamics and they do not
    apply (``plateau``, ``stiffness`` and ``noise_d`` still do).
    """
    fp = fixed_point(
        group_size=group_size,
        beta=beta,
        p_ref=p_ref,
        advantage=advantage,
        n_prompts=n_prompts,
        anchor=anchor,
    )
    eta_eff = float(effective_step(learning_rate, momentum, momentum_convention))
    a = eta_eff * fp.stiffness
    mass, damp, k_eff = oscillator_coefficients(a, momentum, k_ref)
    zeta = float(damping_ratio(mass, damp, k_eff)) if a > 0 else float("nan")
    noise_d = eta_eff * eta_eff * fp.noise_d_per_eta2
    # C_eff within rounding of 0 (a K_ref = 1 - mu, as K = 0.25 at beta 1, p_ref 0.5) is marginal,
    # as the sweep's closed-form threshold says: it read "underdamped" with a variance of 2.3e9
    stable_cf = bool(closed_form_stable(a, momentum, k_ref))
    stat_var = noise_d / (2.0 * group_size * damp * k_eff) if stable_cf else None
    return {
        "plateau": fp.plateau,
        "initial_reward": float(p_ref if p_init is None else p_init),
        "stiffness": fp.stiffness,
        "a": a,
        "M_eff": float(mass),
        "C_eff": float(damp),
        "K_eff": float(k_eff),
        "zeta": zeta if math.isfinite(zeta) else None,
        "regime": closed_form_regime(a, momentum, k_ref),
        "spectral_radius": float(spectral_radius(a, momentum, k_ref)),
        "regime_exact": recursion_regime(a, momentum, k_ref),
        "noise_d": noise_d,
        "stationary_var": stat_var,
        "measurement_sd": fp.measurement_sd,
        "stiffness_method": fp.method,
    }


#: Memory a run takes besides its logged metrics (its id, coordinates, truth and settings in
#: Python objects and in the run set): about 3.7 kB measured at 20000 runs.
RUN_OVERHEAD_BYTES: int = 4000


def _check_finite_truth(grid, group_size: float, beta: float, fp, convention: str) -> None:
    """``ValueError`` naming a learning rate whose gain ``a = eta_eff K`` or noise
    ``D = eta_eff^2 D_1`` at ``(G, beta)`` is no finite number (``--lr 1e300`` ran the whole
    simulation and then failed in the truth with an OverflowError traceback)."""
    for _, G, lr, mu, b, _ in grid:
        if float(G) != group_size or float(b) != beta:
            continue
        try:
            eta_eff = float(effective_step(float(lr), float(mu), convention))
        except (TypeError, ValueError):
            continue  # a setting the simulator refuses in its own words
        a, noise = eta_eff * fp.stiffness, eta_eff * eta_eff * fp.noise_d_per_eta2
        if math.isfinite(eta_eff) and not (math.isfinite(a) and math.isfinite(noise)):
            raise ValueError(
                f"learning rate {float(lr):g} at group size {int(G)}, beta {beta:g} gives a gain "
                f"a = eta_eff K = {a:g} and a noise D = {noise:g}: not both finite numbers; use a "
                "smaller learning rate or KL weight beta"
            )


class StepBar:
    """A simulator's ``progress``: a tqdm bar over optimizer steps (on stderr) that appears with
    the first step (a setting refused before it showed an empty "0/5" bar above the error).
    :meth:`close` it when the simulation ends, whether or not it began."""

    def __init__(self, total: int, desc: str) -> None:
        self.total, self.desc, self._bar = int(total), desc, None

    def __call__(self, n: int) -> None:
        if self._bar is None:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.total, desc=self.desc, unit="step")
        self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def simulate_bandit(
    *,
    k_ref: int | Sequence[int] = 1,
    group_size: int | Sequence[int] = 8,
    learning_rate: float | Sequence[float] = 0.1,
    momentum: float | Sequence[float] = 0.0,
    momentum_convention: str = HEAVY_BALL,
    beta: float | Sequence[float] = 1.0,
    seeds: int = 8,
    steps: int = 1000,
    n_prompts: int = 16,
    p_ref: float = 0.5,
    p_init: float | None = None,
    clip_eps: float = 0.2,
    advantage: str = "loo",
    anchor: str = "kl",
    gradient: str = "behaviour",
    seed: int = 0,
    device: str = "cpu",
    progress: Callable[[int], None] | None = None,
    lr_multipliers: np.ndarray | None = None,
    lr_schedule_label: str | None = None,
) -> xr.Dataset:
    """Simulate softmax-bandit GRPO runs and return them as a run set.

    Every combination of the (scalar or sequence) settings ``k_ref x group_size x
    learning_rate x momentum x beta`` is run with ``seeds`` replicates, all in one batched
    tensor program. See the module docstring for the update and the lag.

    Parameters
    ----------
    k_ref
        Lag ``L`` in optimizer steps (0 = on-policy).
    group_size
        ``G``, actions per prompt (>= 2).
    learning_rate
        ``eta`` (logit units per unit gradient).
    momentum, momentum_convention
        ``mu`` and ``"heavy_ball"`` or ``"ema"``.
    beta
        Weight of the anchor to the reference policy (> 0: interior plateau ``p* < 1``).
    seeds
        Replicates per setting; their ``seed`` coordinate is ``seed + replicate``.
    steps
        Optimizer steps per run (logged steps ``0 .. steps-1``; step 0 is the start).
    n_prompts
        Groups ``B`` per step.
    p_ref, p_init
        Success probability of the reference policy and of the initial policy (default
        ``p_ref``: training starts from the reference).
    clip_eps
        PPO clip range.
    advantage, anchor, gradient
        Estimator choices (module docstrings of :mod:`.simulator` and :mod:`.mean_field`).
    seed
        Seed of the ``torch.Generator`` of this call. A run's random stream depends on the
        whole call (its seed and the batch layout): the same call reproduces it exactly.
    device
        ``"cpu"``, ``"cuda"`` or ``"auto"``.
    progress
        Optional callback, called with 1 after each step.
    lr_multipliers, lr_schedule_label
        Optional learning-rate schedule of every run (multiplier of ``learning_rate`` per
        update, :func:`bayes_grpo.dynamics.schedule.lr_multipliers`) and its name; the runs
        then log ``lr``, so ``clock_runset`` can re-time them. The truth's lag-dependent
        numbers are those of the nominal rate.

    Returns
    -------
    xarray.Dataset
        Run set (dims ``run, step``) with the metrics of :data:`LOGGED_METRICS`, coordinates
        ``model="softmax-bandit"``, ``group_size``, ``learning_rate``, ``momentum``,
        ``momentum_convention``, ``k_ref``, ``beta``, ``seed``, ``source="bandit"``, and in
        ``attrs["truth"]`` a JSON string ``{"format": TRUTH_FORMAT, "settings": {simulator
        settings}, "runs": {run_id: bandit_truth(...)}}`` with the known truth of every run.
    """
    if momentum_convention not in MOMENTUM_CONVENTIONS:
        raise ValueError(
            f"unknown momentum convention {momentum_convention!r}; expected one of {MOMENTUM_CONVENTIONS}"
        )
    for label, value in (("seeds", seeds), ("steps", steps), ("n_prompts", n_prompts), ("seed", seed)):
        # steps=2.5 ran 2 steps and seeds=1.5 one seed, without a word (simulate_sde_runset
        # refuses them); NaN failed "cannot convert float NaN to integer"
        whole_count(value, label)
    if int(seeds) < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds}")
    # torch's generator takes a 64-bit seed (a larger one was "Overflow when unpacking long
    # long"), and the run set stores the seed coordinates seed .. seed + seeds - 1 as float64,
    # exact up to 2**53 (2**63 - 2 and 2**63 - 1 were written as one seed)
    if not 0 <= int(seed) <= 2**53 - int(seeds):
        raise ValueError(f"seed must be a whole number in [0, 2**53 - seeds], got {seed}")
    settings = [
        _as_list(value, name)
        for value, name in (
            (k_ref, "k_ref"),
            (group_size, "group_size"),
            (learning_rate, "learning_rate"),
            (momentum, "momentum"),
            (beta, "beta"),
        )
    ]
    for values, name in zip(settings, ("k_ref", "group_size", "learning_rate", "momentum", "beta")):
        # a repeated value ran the whole simulation, then failed "run set has duplicate run ids"
        seen: set[float] = set()
        for value in values:
            try:
                key = float(value)
            except (TypeError, ValueError):
                continue  # not a number: the simulator's checks say so in their own words
            if key in seen:
                raise ValueError(
                    f"{name} lists {key:.15g} more than once: each setting is one set of runs (their "
                    "run ids would repeat); give each value once"
                )
            seen.add(key)
    check_fits_in_memory(
        math.prod(len(v) for v in settings) * int(seeds),
        int(steps),
        bytes_per_point=(len(LOGGED_METRICS) + 1) * 8,
        bytes_per_run=RUN_OVERHEAD_BYTES,
    )
    grid = list(itertools.product(*settings, range(int(seeds))))
    cols = list(zip(*grid))
    start = p_ref if p_init is None else p_init
    lags = [float(L) for L in cols[0] if isinstance(L, int | float | np.number) and math.isfinite(float(L))]
    if lags and max(lags) > MAX_ROOT_LAG:
        # found by the truth's spectral radius after the whole simulation, whose history of
        # K_ref + 1 policies a run (800 MB a run at --k-ref 1e8) was allocated for nothing
        raise ValueError(
            f"K_ref = {int(max(lags))}: the characteristic roots of the exact criterion, which every run's "
            f"truth needs (spectral radius, regime of the recursion), are not computed beyond K_ref = "
            f"{MAX_ROOT_LAG}; simulate K_ref <= {MAX_ROOT_LAG}"
        )
    # the truth needs the fixed point of every (G, beta); one that cannot be located (a beta
    # so small that p* is within float reach of 1) was found only after the whole simulation.
    # Settings the simulator refuses are left to its checks and messages.
    try:
        if advantage in ADVANTAGES and anchor in ANCHORS and 0.0 < p_ref < 1.0:
            for G, b in sorted({(float(G), float(b)) for _, G, _, _, b, _ in grid}):
                if G >= 2 and G == round(G) and math.isfinite(b) and b > 0:
                    fp = fixed_point(
                        group_size=int(G),
                        beta=b,
                        p_ref=p_ref,
                        advantage=advantage,
                        n_prompts=n_prompts,
                        anchor=anchor,
                    )
                    _check_finite_truth(grid, G, b, fp, momentum_convention)
        arrays = simulate_bandit_arrays(
            k_ref=np.asarray(cols[0], dtype=float),
            group_size=np.asarray(cols[1], dtype=float),
            learning_rate=np.asarray(cols[2], dtype=float),
            momentum=np.asarray(cols[3], dtype=float),
            beta=np.asarray(cols[4], dtype=float),
            p_init=np.full(len(grid), float(start)),
            steps=int(steps),
            momentum_convention=momentum_convention,
            n_prompts=n_prompts,
            p_ref=p_ref,
            clip_eps=clip_eps,
            advantage=advantage,
            anchor=anchor,
            gradient=gradient,
            seed=seed,
            device=device,
            progress=progress,
            lr_multipliers=lr_multipliers,
        )
    except (RuntimeError, MemoryError) as exc:
        # --n-prompts 1e11 or --group-size 1e11 was an allocator RuntimeError traceback
        if not _allocation_failure(exc):
            raise
        gmax = max(int(g) for _, g, *_ in grid if math.isfinite(g))
        raise ValueError(
            f"{len(grid)} runs x {n_prompts} groups of up to {gmax} actions per step do not fit in "
            f"memory on {device} (a step holds about runs x groups x (G + 1) values); use fewer "
            "seeds or settings, fewer prompts (n_prompts) or a smaller group size"
        ) from exc
    truth_cache: dict[tuple, dict] = {}
    run_ids: list[str] = []
    meta: dict[str, dict[str, object]] = {}
    truth: dict[str, dict] = {}
    for L, G, lr, mu, b, rep in grid:
        # 15 digits: settings that differ in the 7th digit got one id (":g") and the run set
        # was refused as "duplicate run ids" after the whole simulation
        run_id = f"bandit/K_ref={int(L)}/G={int(G)}/lr={lr:.15g}/mu={mu:.15g}/beta={b:.15g}/seed={int(seed) + rep}"
        run_ids.append(run_id)
        meta[run_id] = {
            "model": BANDIT_MODEL,
            "group_size": int(G),
            "completions_per_step": int(n_prompts) * int(G),
            "learning_rate": float(lr),
            "momentum": float(mu),
            "momentum_convention": momentum_convention,
            "k_ref": int(L),
            "beta": float(b),
            "seed": int(seed) + rep,
            "source": "bandit",
        }
        key = (int(L), int(G), float(lr), float(mu), float(b))
        if key not in truth_cache:
            truth_cache[key] = bandit_truth(
                group_size=int(G),
                learning_rate=float(lr),
                momentum=float(mu),
                momentum_convention=momentum_convention,
                k_ref=int(L),
                beta=float(b),
                n_prompts=n_prompts,
                p_ref=p_ref,
                advantage=advantage,
                anchor=anchor,
                p_init=start,
            )
        truth[run_id] = truth_cache[key]
    config = {
        "n_prompts": int(n_prompts),
        "p_ref": float(p_ref),
        "p_init": float(start),
        "clip_eps": float(clip_eps),
        "advantage": advantage,
        "anchor": anchor,
        "gradient": gradient,
        "seed": int(seed),
        "steps": int(steps),
        "momentum_convention": momentum_convention,
    }
    if lr_multipliers is not None:
        config["lr_schedule"] = lr_schedule_label or "custom"
    payload = {"format": TRUTH_FORMAT, "settings": config, "runs": truth}
    n_steps = next(iter(arrays.values())).shape[1]
    return runset_from_arrays(
        run_ids, np.arange(n_steps), arrays, meta, attrs={"truth": json.dumps(payload)}
    )


__all__ = [
    "BANDIT_MODEL",
    "StepBar",
    "TRUTH_FORMAT",
    "GRADIENTS",
    "LOGGED_METRICS",
    "bandit_truth",
    "resolve_device",
    "simulate_bandit",
    "simulate_bandit_arrays",
]
