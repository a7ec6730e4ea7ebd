"""The job's git checkout, asked with plain `git` commands: its HEAD, a file or folder at another ref, ancestry."""

from __future__ import annotations

import io
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GitCheckout:
    """A folder inside a git work tree; every answer is None when git or the repository cannot tell."""

    path: Path

    def _git(self, *args: str) -> subprocess.CompletedProcess[bytes] | None:
        try:
            # a bare-repository layout committed inside the folder must not pass for the checkout
            return subprocess.run(["git", "-c", "safe.bareRepository=explicit", "-C", str(self.path), *args],
                                  capture_output=True, timeout=60, check=False)
        except (OSError, subprocess.SubprocessError):
            return None

    def head(self) -> str | None:
        """The commit checked out, or None outside a git work tree."""
        return self.commit_of("HEAD")

    def commit_of(self, ref: str) -> str | None:
        """The commit `ref` names, or None when it names none here."""
        done = self._git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        return done.stdout.decode().strip() if done is not None and done.returncode == 0 else None

    def root(self) -> Path | None:
        done = self._git("rev-parse", "--show-toplevel")
        return Path(done.stdout.decode().strip()) if done is not None and done.returncode == 0 else None

    def has_ref(self, ref: str) -> bool:
        done = self._git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        return done is not None and done.returncode == 0

    def size_at(self, ref: str, relative: str) -> int | None:
        """The bytes of `relative` (from the repository root) at `ref`; None when either does not exist."""
        done = self._git("cat-file", "-s", f"{ref}:{relative}")
        if done is None or done.returncode != 0 or not done.stdout.strip().isdigit():
            return None
        return int(done.stdout)

    def file_at(self, ref: str, relative: str) -> str | None:
        """The text of `relative` (from the repository root) at `ref`; None when either does not exist."""
        done = self._git("show", f"{ref}:{relative}")
        if done is None or done.returncode != 0:
            return None
        return done.stdout.decode("utf-8", errors="replace")

    def is_ancestor(self, sha: str, ref: str) -> bool | None:
        """Whether commit `sha` is reachable from `ref`; None when git cannot tell (unknown commit or ref)."""
        done = self._git("merge-base", "--is-ancestor", sha, ref)
        if done is None:
            return None
        return {0: True, 1: False}.get(done.returncode)

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor of two commits; None when git cannot tell (a shallow clone without it)."""
        done = self._git("merge-base", a, b)
        return done.stdout.decode().strip() if done is not None and done.returncode == 0 and done.stdout else None

    def export(self, ref: str, destination: Path) -> bool:
        """Write the files of this folder as they are at `ref` into `destination`; False when git cannot.
        Links and special files are skipped."""
        root, prefix = self.root(), self._git("rev-parse", "--show-prefix")
        if root is None or prefix is None or prefix.returncode != 0:
            return False
        done = GitCheckout(root)._git("archive", "--format=tar", f"{ref}:{prefix.stdout.decode().strip()}")
        if done is None or done.returncode != 0:
            return False
        try:
            with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
                archive.extractall(destination, filter="data",
                                   members=[m for m in archive.getmembers() if m.isfile() or m.isdir()])
        except (tarfile.TarError, OSError):
            return False
        return True
