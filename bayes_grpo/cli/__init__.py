"""The ``bayes-grpo`` command line: a thin layer over the Python API.

Each area of the toolkit owns one module in this package that defines
``register(subparsers)``; this module discovers them in name order, so adding a verb
never touches another verb's file. Every verb that prints results accepts ``--json``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import warnings
from collections.abc import Sequence

from bayes_grpo import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bayes-grpo",
        description=(
            "Bayesian closed-form models of GRPO training dynamics: ingest run logs, fit the "
            "damped-oscillator law, test group-size invariance and stability, predict, "
            "diagnose and report."
        ),
    )
    parser.add_argument("--version", action="version", version=f"bayes-grpo {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bayes-grpo`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _warning_printer(args.command, warnings.showwarning)
        try:
            status = int(args.func(args) or 0)
            sys.stdout.flush()  # a closed pipe fails here, inside the handler below
            return status
        except (FileNotFoundError, FileExistsError, PermissionError, ValueError) as exc:
            print(f"bayes-grpo {args.command}: error: {exc}", file=sys.stderr)
            for note in getattr(exc, "__notes__", ()):  # e.g. what a failed training kept
                print(f"bayes-grpo {args.command}: {note}", file=sys.stderr)
            return 2
        except BrokenPipeError:
            # the reader of stdout stopped (`bayes-grpo ingest ... | head -1`): no traceback;
            # stdout goes to devnull so that the flush at exit does not fail again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1


def _warning_printer(command: str, fallback):
    """``warnings.showwarning`` for the CLI: the package's own ``UserWarning``s (addressed to
    the user: a fit that did not converge, a setting outside the fitted range) as one line
    ``bayes-grpo COMMAND: warning: ...`` on stderr; every other warning as Python shows it."""

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, UserWarning) and f"{os.sep}bayes_grpo{os.sep}" in str(filename):
            print(f"bayes-grpo {command}: warning: {message}", file=sys.stderr)
        else:
            fallback(message, category, filename, lineno, file, line)

    return show


if __name__ == "__main__":
    raise SystemExit(main())
