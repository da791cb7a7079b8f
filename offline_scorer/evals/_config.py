"""How a run is asked to run (:class:`RunConfig`): one frozen object, built once.

``run_evals`` builds it from its arguments (or takes it whole, ``config=``), the CLI from
its flags, and both backends take it as it is. Every default of a run lives here, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from offline_scorer._exceptions import ConfigurationError
from offline_scorer.evals._data import Fields
from offline_scorer.evals.ray._options import RayOptions


class RunConfig(BaseModel):
    """How ``run_evals`` runs: chunking, failure handling, output, backend and thresholds.

    Example:
        >>> RunConfig(batch_size=32, thresholds={"answer-relevancy": 0.7}).backend
        'local'
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    batch_size: int = Field(
        16,
        ge=1,
        description="Items per chunk: each scorer scores a chunk in one run_batch call (one "
        "judge call per stage). The judge's prompts per forward pass are its own setting.",
    )
    fail_fast: bool = Field(False, description="Stop at the first failed item, by raising.")
    progress: bool = Field(True, description="A progress bar on stderr when it is a terminal.")
    keep_items: bool = Field(
        True,
        description="Keep every item's results in the returned value (False: memory stays "
        "flat; results reach you through on_item_complete).",
    )
    skip_invalid: bool = Field(False, description="Score the valid rows, report invalid ones.")
    fields: Fields = Field(default_factory=Fields, description="Column names of file data.")
    thresholds: Mapping[str, Any] = Field(
        default_factory=dict,
        description="Per scorer id: a minimum mean, (min, max), a Threshold or its fields.",
    )
    backend: Literal["local", "ray"] = Field("local", description="Where items are scored.")
    ray: RayOptions | None = Field(None, description="The Ray cluster's settings (backend='ray').")

    @classmethod
    def merged(cls, config: RunConfig | None, **arguments: Any) -> RunConfig:
        """``config``, or one built from ``run_evals``' own arguments (not both).

        Raises:
            ConfigurationError: both a config and other values than the defaults, or an
                invalid value.
        """
        changed = {
            name: value
            for name, value in arguments.items()
            if value is not None
            and value != cls.model_fields[name].get_default(call_default_factory=True)
        }
        if config is not None:
            if changed:
                raise ConfigurationError(
                    f"Pass either config= or run_evals' own options, not both "
                    f"(also given: {sorted(changed)})."
                )
            return config
        try:
            if isinstance(changed.get("ray"), Mapping):
                changed["ray"] = RayOptions(**changed["ray"])
            return cls(**changed)
        except ValueError as error:
            raise ConfigurationError(f"Invalid run option: {error}") from error
