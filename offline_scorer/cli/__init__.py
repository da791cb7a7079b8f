"""The ``offline-scorer`` command line (typer); ``python -m offline_scorer`` runs it too."""

from offline_scorer.cli._app import app, main

__all__ = ["app", "main"]
