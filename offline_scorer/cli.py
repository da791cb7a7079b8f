"""The ``offline-scorer`` command line: a thin layer over the public Python API."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

app = typer.Typer(
    help="LLM-as-judge scorers on a local open-weights model, fully offline.",
    no_args_is_help=True,
    add_completion=False,
)

DEMO_ITEMS: list[dict[str, Any]] = [
    {
        "input": "What is the capital of France?",
        "output": "The capital of France is Paris.",
        "ground_truth": "Paris is the capital of France.",
    },
    {
        "input": "What is the capital of France?",
        "output": "Paris. I also really enjoy football on Sundays.",
        "ground_truth": "Paris",
    },
    {
        "input": "How do I boil an egg?",
        "output": "The stock market fell sharply yesterday.",
        "ground_truth": "Put the egg in boiling water for about eight minutes.",
    },
]


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


@app.command()
def demo(
    model: str = typer.Option("smollm2-135m-instruct", envvar="OFFLINE_SCORER_MODEL",
                              help="Model card name, HF model directory or .gguf file."),
    as_json: bool = typer.Option(False, "--json", help="Print results as JSON lines."),
) -> None:
    """Score a small built-in dataset with both scorers on the local model."""
    from offline_scorer import (
        OfflineScorerError,
        create_answer_relevancy_scorer,
        create_answer_similarity_scorer,
    )

    try:
        scorers = [
            create_answer_relevancy_scorer(model=model),
            create_answer_similarity_scorer(model=model),
        ]
        typer.echo(f"Loading {model} (offline) and scoring {len(DEMO_ITEMS)} items...", err=True)
        for scorer in scorers:
            for item, result in zip(DEMO_ITEMS, scorer.run_batch(DEMO_ITEMS), strict=True):
                if as_json:
                    typer.echo(result.model_dump_json())
                    continue
                shown = "-" if result.score is None else f"{result.score:.2f}"
                typer.echo(f"\n[{scorer.id}] score {shown}  ({result.status})")
                typer.echo(f"  question: {item['input']}")
                typer.echo(f"  answer:   {item['output']}")
                typer.echo(f"  reason:   {result.reason or result.error}")
    except OfflineScorerError as error:
        _fail(str(error))


@app.command()
def models(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the model cards, whether each is on this machine, its size and checksum."""
    from offline_scorer._models import card_status, list_model_cards

    rows = []
    for card in list_model_cards():
        status = card_status(card)
        rows.append(
            {
                "name": card.name,
                "present": status.path is not None,
                "path": str(status.path) if status.path else None,
                "size_bytes": status.size_bytes,
                "checksum": status.checksum,
                "license": card.license,
                "install": card.source.install,
            }
        )
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    for row in rows:
        size = f"{row['size_bytes'] / 1e6:.0f} MB" if row["size_bytes"] else "-"
        where = row["path"] or f"not installed ({row['install']})"
        typer.echo(f"{row['name']}  {size}  checksum {row['checksum']}  {where}")


def main() -> None:
    """Entry point of the ``offline-scorer`` console script."""
    app(prog_name="offline-scorer")


if __name__ == "__main__":
    sys.exit(main())
