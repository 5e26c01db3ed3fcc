"""Learning-rate schedules: the per-update multiplier of the nominal rate, and its clock.

GRPO trainers rarely run at a constant rate: TRL's default is a linear decay to 0 over the
training steps, often after a warm-up, and cosine decay is common. The law's gain
``a = eta K`` scales with the rate of each update, so a run on a schedule follows the
recursion with a gain ``a m[n]`` at update ``n`` (:func:`bayes_grpo.dynamics.simulate.simulate_recursion`
with ``lr_multipliers``), where ``m[n] = lr[n] / eta`` and ``eta`` is the nominal (peak)
rate. Without inertia that run is the constant-rate run re-timed by the clock
``tau(t) = sum_{n < t} m[n]`` (:func:`schedule_clock`; the same clock
:mod:`bayes_grpo.runset.clock` reads off a logged ``lr``).

The schedules follow Hugging Face ``transformers`` (``get_scheduler``), which TRL uses:
update ``n`` (0-based) runs at ``eta * lambda(n)`` with

* warm-up (``n < W``): ``lambda(n) = n / W``, so the first update of a warmed-up run has rate 0;
* ``"constant"``: 1 after the warm-up. With a warm-up this is transformers'
  ``"constant_with_warmup"``: its plain ``"constant"`` ignores ``warmup_steps`` (a TRL run
  configured ``lr_scheduler_type="constant"`` with a warm-up ran at the full rate from update
  0; ``bayes-grpo train`` runs such a setting as ``"constant_with_warmup"``);
* ``"linear"``: ``max(0, (T - n) / (T - W))``, reaching 0 at ``T`` (the decay length, the
  planned number of training steps);
* ``"cosine"``: ``(1 + cos(pi p)) / 2`` with ``p = min(1, (n - W) / (T - W))``: 0 at ``T`` and
  after it (transformers' cosine does not stop at ``T``: past it the rate rises again, which a
  trainer never reaches, as it stops at ``T``).
"""

from __future__ import annotations

import numpy as np

from bayes_grpo._arguments import is_whole_number

#: Schedule names understood by :func:`lr_multipliers` (Hugging Face's names).
SCHEDULES: tuple[str, ...] = ("constant", "linear", "cosine")


def lr_multipliers(
    kind: str,
    n_updates: int,
    *,
    warmup_steps: int = 0,
    decay_steps: int | None = None,
) -> np.ndarray:
    """Multiplier ``lr[n] / eta`` of each update ``n = 0 .. n_updates - 1``.

    Parameters
    ----------
    kind
        One of :data:`SCHEDULES`.
    n_updates
        Number of updates (optimizer steps) to describe, ``>= 1``.
    warmup_steps
        Linear warm-up length ``W >= 0`` (updates).
    decay_steps
        ``T``, the update at which "linear" and "cosine" reach 0 (the planned training
        length; default ``n_updates``); must exceed ``warmup_steps``. None for "constant".

    Returns
    -------
    numpy.ndarray ``(n_updates,)`` in ``[0, 1]``.
    """
    if kind not in SCHEDULES:
        raise ValueError(f"unknown learning-rate schedule {kind!r}; expected one of {SCHEDULES}")
    # int(n_updates) described 10.5 updates as 10 and True as 1, NaN failed "cannot convert float
    # NaN to integer"; warmup_steps=True (== 1) was a warm-up of one update, decay_steps=True one
    if not is_whole_number(n_updates) or n_updates < 1:
        raise ValueError(
            f"n_updates must be a whole number: a schedule needs at least 1 update, got {n_updates!r}"
        )
    n_updates = int(n_updates)
    if not is_whole_number(warmup_steps) or warmup_steps < 0:
        raise ValueError(f"warmup_steps must be a whole number >= 0, got {warmup_steps!r}")
    warm = int(warmup_steps)
    n = np.arange(n_updates, dtype=float)
    if kind == "constant":
        # it does not decay: a decay length was ignored, and the default one (n_updates) refused
        # a warm-up that outlasts the horizon, which is a valid run
        if decay_steps is not None:
            raise ValueError("decay_steps applies to the linear and cosine schedules; constant does not decay")
        after = np.ones_like(n)
    else:
        if decay_steps is None and n_updates <= warm:
            # the message named decay_steps, which was not given, with n_updates as its value
            raise ValueError(
                f"warmup_steps ({warm}) must end before n_updates ({n_updates}), where the decay ends "
                "by default; give decay_steps (the planned training length) above the warm-up"
            )
        total = n_updates if decay_steps is None else decay_steps
        if not is_whole_number(total) or total <= warm:
            raise ValueError(
                f"decay_steps must be a whole number of updates above the warm-up ({warm}), got {total!r}"
            )
        total = int(total)
        progress = np.clip((n - warm) / (total - warm), 0.0, 1.0)
        after = 1.0 - progress if kind == "linear" else 0.5 * (1.0 + np.cos(np.pi * progress))
    return np.where(n < warm, n / max(warm, 1), after)


def schedule_clock(multipliers) -> np.ndarray:
    """Clock ``tau(t) = sum_{n < t} m[n]`` at steps ``t = 0 .. len(m)``.

    ``(n_updates,)`` multipliers in, ``(n_updates + 1,)`` clock steps out (the clock of step
    ``t`` counts the updates before it, each weighted by its rate).
    """
    m = np.asarray(multipliers, dtype=float)
    if m.ndim != 1:
        raise ValueError(f"multipliers must be 1-d, got shape {m.shape}")
    return np.concatenate([[0.0], np.cumsum(m)])


def check_multipliers(multipliers, n_updates: int) -> np.ndarray:
    """``multipliers`` as a float array of at least ``n_updates`` finite values ``>= 0``.

    Raises ValueError naming the problem otherwise.
    """
    m = np.asarray(multipliers, dtype=float)
    if m.ndim != 1:
        raise ValueError(f"learning-rate multipliers must be 1-d, got shape {m.shape}")
    if m.size < n_updates:
        raise ValueError(
            f"the learning-rate schedule covers {m.size} updates, fewer than the {n_updates} needed"
        )
    bad = ~(np.isfinite(m) & (m >= 0))
    if bad.any():
        raise ValueError(
            f"learning-rate multipliers must be finite and >= 0; update {int(np.argmax(bad))} has {float(m[bad][0])!r}"
        )
    return m


__all__ = ["SCHEDULES", "check_multipliers", "lr_multipliers", "schedule_clock"]
