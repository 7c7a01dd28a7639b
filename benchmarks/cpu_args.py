"""The command-line handling every CPU engine benchmark shares: ``--threads``, and torch pinned to it.

Why pinned: a figure measured with every core is not comparable with one measured with one, so each benchmark
states its thread count and holds torch to it (scripts import this as ``from cpu_args import ...``).
"""

from __future__ import annotations

import argparse

import torch


def parse_cpu_args(ap: argparse.ArgumentParser, **int_options: int) -> argparse.Namespace:
    """Add each ``--name`` integer option with its default (``budget_mib`` -> ``--budget-mib``) and ``--threads``
    (default 1), parse the command line and set torch's CPU thread count to it."""
    for name, default in int_options.items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    return args
