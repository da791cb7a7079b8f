"""Prompt templates: Jinja2 files in ``prompts/<scorer>/<language>/<step>.jinja``.

Each template defines two blocks: ``system`` (the instruction, identical for every item, so
batches stay uniform and a serving stack can reuse its prefix) and ``user`` (the task of
one item), and optionally ``focus`` (the part of the item under judgment, a second user
message, so that the reads of one item share everything before it) and ``prefill`` (how
the model's answer must begin; the model continues it). Templates render with ``StrictUndefined`` in Jinja2's sandbox, so a user template
folder can neither read an undefined variable silently nor reach Python internals, and
template names cannot leave their folder.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import FileSystemLoader, StrictUndefined, TemplateNotFound, UndefinedError
from jinja2.sandbox import SandboxedEnvironment

from offline_scorer._exceptions import ConfigurationError
from offline_scorer._resources import data_folder
from offline_scorer.judges._keys import Prompt

LANGUAGES = ("en", "fr")
DEFAULT_LANGUAGE = LANGUAGES[0]
"""The language of prompts and reasons when none is named."""


@lru_cache(maxsize=8)
def _environment(folder: str) -> Any:

    return SandboxedEnvironment(
        loader=FileSystemLoader(folder),
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def template_folder(custom: str | os.PathLike[str] | None = None) -> Path:
    """The folder templates come from: ``custom`` when given, else the shipped one."""
    if custom is None:
        return data_folder("prompts")
    folder = Path(custom)
    if not folder.is_dir():
        raise ConfigurationError(f"Prompt template folder {folder} does not exist.")
    return folder


def render_prompt(
    scorer: str,
    language: str,
    step: str,
    variables: dict[str, Any],
    *,
    folder: str | os.PathLike[str] | None = None,
) -> Prompt:
    """Render one step's template into chat messages (system, then user).

    Raises:
        ConfigurationError: unknown language, or no such template in the folder.
    """

    root = template_folder(folder)
    name = f"{scorer}/{language}/{step}.jinja"
    try:
        template = _environment(str(root)).get_template(name)
    except TemplateNotFound as error:
        raise ConfigurationError(
            f"No prompt template '{name}' in {root}. Known languages: {', '.join(LANGUAGES)}."
        ) from error
    try:
        context = template.new_context(dict(variables))
        system = "".join(template.blocks["system"](context)).strip()
        user = "".join(template.blocks["user"](context)).strip()
    except KeyError as error:
        raise ConfigurationError(
            f"Prompt template {name} must define the blocks 'system' and 'user'."
        ) from error
    except UndefinedError as error:
        raise ConfigurationError(f"Prompt template {name}: {error}") from error
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    if "focus" in template.blocks:
        # The part of the item under judgment, in a message of its own after the item: every
        # prompt of one item then starts with the same tokens (system and item), which the
        # judge computes once (``judges/transformers/_labels.py``).
        focus = "".join(template.blocks["focus"](template.new_context(dict(variables)))).strip()
        if focus:  # a template may leave it empty (nothing narrower than the item to judge)
            messages.append({"role": "user", "content": focus})
    if "prefill" in template.blocks:
        # The start of the answer, fixed by us; the model continues it.
        prefill = "".join(template.blocks["prefill"](template.new_context(dict(variables))))
        messages.append({"role": "assistant", "content": prefill.strip()})
    return messages


def check_language(language: str) -> None:
    """Raise a clear error for a language with no shipped prompts."""
    if language not in LANGUAGES:
        raise ConfigurationError(
            f"language must be one of {', '.join(LANGUAGES)}; got {language!r}."
        )
