"""Checks of the Python API's arguments at its edges: a seed, a count or a probability that means
nothing is refused with a ``ValueError`` naming the argument, before any work, as the command line's
argument types (``cli._common.non_negative_int``, ``positive_int``, ``open_fraction``) refuse its
flags; not NumPy's or PyMC's own error ("expected non-negative integer", "SeedSequence expects int")
naming none, nor a bool taken as the number 1."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np


def checked_seed(seed: object, name: str = "seed", *, generator: bool = True) -> Any:
    """``seed`` unchanged when it can seed the draws: a whole number >= 0, or (``generator``) None, a
    ``np.random.Generator``, ``BitGenerator`` or ``SeedSequence``; else ``ValueError`` naming the
    argument ``name`` (``seed``, ``rng``, ``random_seed``). ``generator=False`` where the seed is
    recorded or offset (``random_seed + 1``): a whole number only. The one check where a seed
    enters the Python API: ``seed=-1`` failed in NumPy's "expected non-negative integer" naming
    none, ``1.5`` in "SeedSequence expects int", and ``True`` was the seed 1."""
    if generator and (
        seed is None or isinstance(seed, np.random.Generator | np.random.BitGenerator | np.random.SeedSequence)
    ):
        return seed
    whole = isinstance(seed, numbers.Integral) and not isinstance(seed, bool)
    if not whole or int(seed) < 0:
        also = " or a numpy Generator" if generator else ""
        raise ValueError(f"{name} must be a whole number >= 0 (a random seed){also}, got {seed!r}")
    return seed


def is_whole_number(value: object) -> bool:
    """Whether ``value`` is one finite whole number: an int (of any size), or a float such as
    ``100.0``; not a bool (``True`` is no count), not NaN or an infinity, not a string."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    if isinstance(value, numbers.Integral):
        return True
    return math.isfinite(value) and float(value).is_integer()


def whole_count(value: object, name: str) -> int:
    """``value`` as an int when it is a whole number (:func:`is_whole_number`), else ``ValueError``
    naming ``name``: a count of steps, seeds or prompts of a simulator (``steps=2.5`` ran 2 steps
    without a word, NaN failed "cannot convert float NaN to integer"); the caller checks its range."""
    if not is_whole_number(value):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    return int(value)


def checked_count(value: object, name: str, least: int = 1) -> int:
    """``value`` as an int when it is a whole number >= ``least`` (:func:`is_whole_number`), else
    ``ValueError`` naming ``name``: ``draws=1.5`` was sampled as 1 draw, ``chains=0`` failed in
    PyMC naming no argument."""
    if not (is_whole_number(value) and value >= least):
        raise ValueError(f"{name} must be a whole number >= {least}, got {value!r}")
    return int(value)


def checked_probability(value: object, name: str, *, one: bool = False) -> float:
    """``value`` as a float when it lies strictly between 0 and 1 (``one``: or is 1, a share that may
    be the whole), else ``ValueError`` naming ``name``."""
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not (number and 0.0 < float(value) and (float(value) <= 1.0 if one else float(value) < 1.0)):
        interval = "in (0, 1]" if one else "strictly between 0 and 1"
        raise ValueError(f"{name} must lie {interval}, got {value!r}")
    return float(value)
