"""How large a project file may be: one limit per kind of file, checked before the file is read."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bot.errors import ConfigError

MB = 1 << 20


@dataclass(frozen=True)
class SizeLimit:
    """The largest file of one kind meshbot reads: `default_mb`, or the MB the variable `variable` gives."""

    kind: str
    variable: str
    default_mb: int

    def bytes(self) -> int:
        """The limit in bytes; a value of the variable that is not a whole number of MB is a ConfigError."""
        chosen = os.environ.get(self.variable, "").strip()
        if not chosen:
            return self.default_mb * MB
        if not chosen.isdigit() or int(chosen) == 0:
            raise ConfigError(f"{self.variable} must be a whole number of MB (at least 1), not {chosen!r}")
        return int(chosen) * MB

    def check(self, path: Path | str, size: int, limit: int | None = None) -> None:
        """A ConfigError naming `path` when `size` (its bytes) is over the limit; `limit` gives the limit's
        bytes when a loop over many files has read them once.

        >>> SizeLimit("seed file", "MESHBOT_TEST_LIMIT_MB", 1).check("seeds/big.csv", 3_000_000)
        Traceback (most recent call last):
        bot.errors.ConfigError: seeds/big.csv: the file has 3,000,000 bytes (2.9 MB), over meshbot's 1 MB limit for a seed file; set MESHBOT_TEST_LIMIT_MB to a larger number of MB to read it
        """
        limit = self.bytes() if limit is None else limit
        if size > limit:
            raise ConfigError(f"the file has {size:,} bytes ({size / MB:.1f} MB), over meshbot's {limit // MB} MB "
                              f"limit for a {self.kind}; set {self.variable} to a larger number of MB to read it",
                              path=path)


# config, models (.sql, .py), macros, audits, unit tests and other YAML files
SOURCE = SizeLimit("project file", "MESHBOT_MAX_FILE_MB", 10)
SEED = SizeLimit("seed file", "MESHBOT_MAX_SEED_MB", 200)


def read_bounded(path: Path | str, limit: SizeLimit = SOURCE) -> bytes:
    """The bytes of the file at `path`; a ConfigError, before it is read, when it is over `limit`."""
    maximum = limit.bytes()
    with open(path, "rb") as handle:
        limit.check(path, os.fstat(handle.fileno()).st_size, maximum)
        data = handle.read(maximum + 1)   # a file that grows while read (or a device) stops past the limit
    limit.check(path, len(data), maximum)
    return data


def check_file(path: Path | str, limit: SizeLimit = SOURCE) -> None:
    """A ConfigError when the file at `path` is over `limit` (for files another library reads)."""
    limit.check(path, os.stat(path).st_size)
