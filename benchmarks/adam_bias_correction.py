"""How far Adam's bias correction moves the EMA law's slow start (NumPy only, deterministic).

The EMA convention of the law (DESIGN.md section 1, ``momentum_convention = "ema"``) is Adam's
first moment without its bias correction: ``m <- b1 m + (1 - b1) g``, ``theta <- theta + eta m``,
from rest (``m_0 = 0``). torch's Adam divides by ``1 - b1^t``, so its first steps are full steps
of ``eta g`` and the momentum adds no inertia at the start. This script runs the linearised
mean recursion (``g = K (p* - x)`` read ``K_ref`` steps late, ``p* = 1``, ``x_0 = 0``) three ways:

* ``ema``: the law (buffer from rest, no correction);
* ``adam``: the buffer divided by ``1 - b1^t`` (torch's Adam; the second moment, which makes
  Adam's step sign-like, is left out: it changes the curvature a learning rate acts on, which
  the law's ``K`` absorbs);
* ``warm``: the law with the buffer started at the first gradient (``m_0 = g_0``), i.e. the law
  from a non-zero initial velocity,

and prints the step at half the rise and the largest difference from ``adam`` (reward units,
on a rise of 1). Usage: ``python benchmarks/adam_bias_correction.py``.
"""

from __future__ import annotations

import numpy as np


def mean_recursion(eta_k: float, b1: float, k_ref: int, mode: str, steps: int = 3000) -> np.ndarray:
    """The policy's mean reward ``x_t``, ``t = 0..steps``, shape ``(steps + 1,)``.

    ``eta_k``: learning rate times stiffness (per step, in units of the gradient's buffer);
    ``mode``: ``"ema"``, ``"adam"`` or ``"warm"`` (see the module docstring).
    """
    x = np.zeros(steps + 1)
    m = 0.0
    for t in range(1, steps + 1):
        g = 1.0 - x[(t - 1) // k_ref * k_ref]
        m = g if (mode == "warm" and t == 1) else b1 * m + (1.0 - b1) * g
        step = m / (1.0 - b1**t) if mode == "adam" else m
        x[t] = x[t - 1] + eta_k * step
    return x


def half_rise_step(x: np.ndarray) -> int:
    return int(np.argmax(x >= 0.5))


def main() -> None:
    print("| b1 | eta K (law gain a = eta K (1 - b1)) | K_ref | half rise: law (ema) | Adam (bias-corrected) | law, buffer warm | max |law - Adam| | max |warm - Adam| |")
    print("|---|---|---|---|---|---|---|---|")
    for b1 in (0.9, 0.95, 0.99):
        for eta_k in (0.002, 0.01, 0.05):
            for k_ref in (1, 4):
                runs = {mode: mean_recursion(eta_k, b1, k_ref, mode) for mode in ("ema", "adam", "warm")}
                dev = {mode: float(np.abs(runs[mode] - runs["adam"]).max()) for mode in ("ema", "warm")}
                print(
                    f"| {b1:g} | {eta_k:g} | {k_ref} | {half_rise_step(runs['ema'])} | {half_rise_step(runs['adam'])} | "
                    f"{half_rise_step(runs['warm'])} | {dev['ema']:.3f} | {dev['warm']:.3f} |"
                )


if __name__ == "__main__":
    main()
