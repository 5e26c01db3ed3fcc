"""One definition of the formulas for NumPy and PyTensor.

Each formula in :mod:`bayes_grpo.dynamics` takes an ``ops`` namespace (``NUMPY`` or
``PYTENSOR``) so that the array code evaluated by NumPy and the symbolic graph NUTS
differentiates come from the same lines.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

NUMPY = SimpleNamespace(
    name="numpy",
    where=np.where,
    sqrt=np.sqrt,
    exp=np.exp,
    log=np.log,
    cos=np.cos,
    sin=np.sin,
    abs=np.abs,
    minimum=np.minimum,
    maximum=np.maximum,
    clip=np.clip,
    concatenate=np.concatenate,
    asarray=lambda x: np.asarray(x, dtype=float),
)


def _pytensor_ops() -> SimpleNamespace:
    import pytensor.tensor as pt

    return SimpleNamespace(
        name="pytensor",
        where=pt.switch,
        sqrt=pt.sqrt,
        exp=pt.exp,
        log=pt.log,
        cos=pt.cos,
        sin=pt.sin,
        abs=pt.abs,
        minimum=pt.minimum,
        maximum=pt.maximum,
        clip=pt.clip,
        concatenate=pt.concatenate,
        asarray=pt.as_tensor_variable,
    )


_PYTENSOR: SimpleNamespace | None = None


def pytensor_ops() -> SimpleNamespace:
    """The PyTensor namespace (imported lazily: NumPy users need not pay for PyTensor)."""
    global _PYTENSOR
    if _PYTENSOR is None:
        _PYTENSOR = _pytensor_ops()
    return _PYTENSOR


def ops_for(*values: object) -> SimpleNamespace:
    """``PYTENSOR`` if any value is a PyTensor variable, else ``NUMPY``."""
    for v in values:
        if type(v).__module__.startswith("pytensor"):
            return pytensor_ops()
    return NUMPY


def as_numbers(*values):
    """``values`` with each list or tuple made a float array (others unchanged), so that the
    formulas' arithmetic works on them: ``error_trajectory([0, 1, 2], ...)`` failed "can't
    multiply sequence by non-int of type 'float'". Returns a tuple, in order."""
    return tuple(np.asarray(v, dtype=float) if isinstance(v, (list, tuple)) else v for v in values)
