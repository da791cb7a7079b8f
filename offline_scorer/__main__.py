"""``python -m offline_scorer``: the command line."""

from offline_scorer.cli import console

console()
