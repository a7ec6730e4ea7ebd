"""The model each stored snapshot was built from: the project's own when unchanged, else its stored definition."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

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
