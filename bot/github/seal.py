"""The project sealed until the event is authorized: a project file read before then is an error, not a load."""

from __future__ import annotations

from typing import Any, Callable

from bot.errors import GithubError


class SealedContext:
    """The project, built only after the event is authorized: any use before `unseal()` is an error, so a
    code path that would read the pull request's files (config.py, macros, models) too early fails loudly."""

    def __init__(self, factory: Callable[[bool, frozenset[str] | None], Any]) -> None:
        self._factory = factory          # factory(read_cache, fresh_files) -> the project's EngineContext
        self._context: Any = None
        self._unsealed = False
        self.read_cache = True
        self.fresh_files: frozenset[str] | None = None

    def unseal(self, *, read_cache: bool = True, fresh_files: frozenset[str] | None = None) -> None:
        """Allow the project to load; `read_cache` False: a deploy, which trusts no cache on disk;
        `fresh_files`: a pull request's own files, which it takes from no cache (load_project)."""
        self._unsealed, self.read_cache, self.fresh_files = True, read_cache, fresh_files

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if not self._unsealed:
            raise GithubError(f"meshbot tried to read the project (`{name}`) before the event was authorized; "
                              "nothing was loaded. This is a bug in meshbot: please report it.")
        if self._context is None:
            self._context = self._factory(self.read_cache, self.fresh_files)
        return getattr(self._context, name)
