"""Built-in audits, one per module; BUILT_IN_AUDITS is the registry the audit runner looks names up in."""

from __future__ import annotations

from bot.quality.results import BuiltInAudit
from bot.quality.checks import (accepted_range, accepted_values, at_least_one, forall, not_accepted_values,
                                not_constant, not_empty_string, not_null, number_of_rows,
                                unique_combination_of_columns, unique_values)

BUILT_IN_AUDITS: tuple[BuiltInAudit, ...] = (
    not_null.AUDIT,
    unique_values.AUDIT,
    accepted_values.AUDIT,
    not_accepted_values.AUDIT,
    number_of_rows.AUDIT,
    forall.AUDIT,
    accepted_range.AUDIT,
    at_least_one.AUDIT,
    not_constant.AUDIT,
    unique_combination_of_columns.AUDIT,
    not_empty_string.AUDIT,
)

BY_NAME: dict[str, BuiltInAudit] = {audit.name: audit for audit in BUILT_IN_AUDITS}
