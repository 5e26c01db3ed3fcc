"""bayes_grpo: Bayesian closed-form models of GRPO training dynamics.

The flow (see ARCHITECTURE.md):

    logs -> RunSet (xarray) -> hierarchical model (PyMC) -> posterior (InferenceData)
         -> invariance / stability / prediction / diagnostics -> report

Each stage is usable on its own from Python and from the ``bayes-grpo`` command line.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("bayes-grpo")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
