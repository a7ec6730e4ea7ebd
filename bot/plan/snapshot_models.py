"""The model each stored snapshot was built from: the project's own when unchanged, else its stored definition."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from bot.project.model import Model
from bot.project.serialize import model_from_dict, model_to_dict
from bot.snapshot import Snapshot


@dataclass
class SnapshotModels:
    """Callable snapshot -> Model, each built once per identifier; reads no Spark and no state."""

    local: Mapping[str, Model]
    _built: dict[str, Model] = field(default_factory=dict)

    def __call__(self, snapshot: Snapshot) -> Model:
        if snapshot.identifier not in self._built:
            local = self.local.get(snapshot.name)
            if local is not None and model_to_dict(local) == snapshot.definition:
                self._built[snapshot.identifier] = local
            else:
                self._built[snapshot.identifier] = model_from_dict(snapshot.definition)
        return self._built[snapshot.identifier]


_SEED_CONTENT_LIMIT = 1_000_000  # bytes of CSV kept in state for seed categorization


def stored_forms(models: Mapping[str, Model], rendered: Mapping[str, str]) -> dict[str, tuple[dict[str, Any], str]]:
    """Each model's definition and rendered query as a new snapshot of it stores them (a migration's re-key
    compares stored snapshots with these)."""
    return {name: (model_definition(model), rendered.get(name, "")) for name, model in models.items()}


def model_definition(model: Model) -> dict[str, Any]:
    """The model as stored with its snapshot; small seeds keep their CSV so later plans can categorize."""
    definition = model_to_dict(model)
    if model.seed_abs_path is not None:
        try:
            if model.seed_abs_path.stat().st_size <= _SEED_CONTENT_LIMIT:
                definition["seed_content"] = model.seed_abs_path.read_text(encoding="utf-8")
        except OSError:
            pass
    return definition
