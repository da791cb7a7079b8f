"""The ``offline-scorer`` command line (typer); ``python -m offline_scorer`` runs it too."""

from offline_scorer.cli._app import app, console, main

__all__ = ["app", "console", "main"]
