"""Model fingerprints: data and metadata hashes plus a Merkle tree of parents' hashes over the DAG."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from bot.project.model import Model
from bot.snapshot import Fingerprint, hash_parts


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _statements_sql(model: Model) -> list[list[str]]:
    return [[s.sql(dialect="spark", comments=False) for s in model.pre_statements],
            [s.sql(dialect="spark", comments=False) for s in model.post_statements]]


def data_hash(model: Model, rendered_sql: str) -> str:
    """Hash of everything that decides the model's data.

    `rendered_sql` must be the canonical rendered query (no comments, normalized whitespace), so
    comment and whitespace edits leave the hash unchanged.
    """
    parts = {
        "query": rendered_sql,
        "kind": model.kind.data_properties(),
        "partitioned_by": list(model.partitioned_by),
        "columns": [list(c) for c in model.columns],
        "statements": _statements_sql(model),
        "seed": model.seed_content_hash,
        "python": [model.python_source, model.python_entrypoint],
    }
    if model.blueprint_variables:   # absent otherwise, so models without blueprints keep their hashes
        parts["blueprint"] = [list(pair) for pair in model.blueprint_variables]
    return hash_parts(_canonical(parts))


def metadata_hash(model: Model) -> str:
    """Hash of what changes how or when the model runs, or how it is described, not its data."""
    parts = {
        "owner": model.owner,
        "description": model.description,
        "column_descriptions": [list(c) for c in model.column_descriptions],
        "cron": model.cron,
        "start": model.start,
        "end": model.end,
        "tags": list(model.tags),
        "grains": list(model.grains),
        "audits": [[a.name, [list(arg) for arg in a.args], a.blocking] for a in model.audits],
        "kind": model.kind.metadata_properties(),
        "physical_properties": [list(p) for p in model.physical_properties],
        "enabled": model.enabled,
    }
    if model.session_properties:
        parts["session_properties"] = [list(p) for p in model.session_properties]
    if model.jinja_query is not None or model.jinja_macros:
        # As in SQLMesh, an edit of the Jinja text or of a macro it calls is a change even when the
        # rendered query stays the same (a comment): then only a metadata change.
        parts["jinja"] = [model.jinja_query, [list(m) for m in model.jinja_macros]]
    return hash_parts(_canonical(parts))


def fingerprint_models(
    models: Mapping[str, Model],
    dag_order: Sequence[str],
    rendered: Mapping[str, str],
) -> dict[str, Fingerprint]:
    """Fingerprints of every model in `dag_order` (parents first), in one linear pass.

    Parents outside `models` (plain source tables) do not enter the hashes. A parent's
    contribution is its own hash and its parent hash, so any ancestor change reaches the
    descendants (Merkle tree).
    """
    result: dict[str, Fingerprint] = {}
    for name in dag_order:
        model = models[name]
        parents = sorted(p for p in model.depends_on if p in models)
        unordered = [p for p in parents if p not in result]
        if unordered:
            raise ValueError(f"dag_order lists {name} before its parents {', '.join(unordered)}")
        parent_fps = [result[p] for p in parents]
        result[name] = Fingerprint(
            data_hash=data_hash(model, rendered.get(name, "")),
            metadata_hash=metadata_hash(model),
            parent_data_hash=hash_parts(*(h for fp in parent_fps
                                          for h in (fp.data_hash, fp.parent_data_hash)))
            if parent_fps else "0",
            parent_metadata_hash=hash_parts(*(h for fp in parent_fps
                                              for h in (fp.metadata_hash, fp.parent_metadata_hash)))
            if parent_fps else "0",
        )
    missing = set(models) - set(result)
    if missing:
        raise ValueError(f"dag_order misses models: {', '.join(sorted(missing))}")
    return result
