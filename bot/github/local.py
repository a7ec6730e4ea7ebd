"""LocalOutput: the bot outside GitHub Actions; no network, writes what it would post into a folder."""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict
from pathlib import Path

from bot.errors import GithubError
from bot.github.api import CheckRun
from bot.github.event import PullRequest, Review

COMMENT_FILE = "comment.md"
CHECKS_FILE = "check_runs.json"
SUMMARY_FILE = "summary.md"
OUTPUTS_FILE = "outputs.env"


class LocalOutput:
    """A GithubPort that writes comment.md and check_runs.json; reads answers from the event payload."""

    def __init__(self, output_dir: str | Path, *, pull_requests: tuple[PullRequest, ...] = (),
                 reviews: tuple[Review, ...] = (), permissions: dict[str, str] | None = None) -> None:
        self.dir = Path(output_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._pulls = {p.number: p for p in pull_requests}
        self._reviews = list(reviews)
        self._permissions = dict(permissions or {})
        self._checks: dict[int, CheckRun] = {}
        self.reactions: list[tuple[int, str]] = []
        self.merges: list[tuple[int, str, str]] = []

    # comments --------------------------------------------------------------------------------
    def find_comment(self, number: int, *, marker: str) -> tuple[int, str] | None:
        path = self.dir / COMMENT_FILE
        if path.is_file() and marker in (body := path.read_text(encoding="utf-8")):
            return (number, body)
        return None

    def upsert_comment(self, number: int, body: str, *, marker: str) -> int:
        return self.create_comment(number, body)

    def create_comment(self, number: int, body: str) -> int:
        (self.dir / COMMENT_FILE).write_text(body, encoding="utf-8")
        return number

    def edit_comment(self, comment_id: int, body: str) -> None:
        (self.dir / COMMENT_FILE).write_text(body, encoding="utf-8")

    def add_reaction(self, comment_id: int, content: str) -> None:
        self.reactions.append((comment_id, content))

    # checks ----------------------------------------------------------------------------------
    def create_check(self, check: CheckRun) -> int:
        check_id = len(self._checks) + 1
        self._checks[check_id] = check
        self._write_checks()
        return check_id

    def update_check(self, check_id: int, check: CheckRun) -> None:
        self._checks[check_id] = check
        self._write_checks()

    def check_url(self, check_id: int) -> str | None:
        return None

    def _write_checks(self) -> None:
        rows = [{"id": cid, **asdict(check)} for cid, check in sorted(self._checks.items())]
        (self.dir / CHECKS_FILE).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")

    @property
    def checks(self) -> dict[str, CheckRun]:
        return {c.name: c for c in self._checks.values()}

    # reads -----------------------------------------------------------------------------------
    def list_reviews(self, number: int) -> list[Review]:
        return list(self._reviews)

    def permission(self, username: str) -> str:
        return self._permissions.get(username, "read")

    def is_team_member(self, org: str, team_slug: str, username: str) -> bool:
        return False

    def pull_request(self, number: int) -> PullRequest:
        if number not in self._pulls:
            raise GithubError(f"pull request #{number} is unknown in local mode: the event payload does not "
                              "describe it and meshbot makes no network call here")
        return self._pulls[number]

    def merge_pull(self, number: int, *, method: str, sha: str) -> str:
        self.merges.append((number, method, sha))
        return ""

    def pulls_for_commit(self, sha: str) -> list[PullRequest]:
        return [p for p in self._pulls.values() if p.head_sha == sha]

    def changed_files(self, number: int) -> list[str]:
        return []   # unknown locally: the runner treats an empty list as "assume the project changed"


class StepOutputs:
    """Step outputs and the job summary: GITHUB_OUTPUT / GITHUB_STEP_SUMMARY, or files in a folder."""

    def __init__(self, *, output_file: str | Path | None, summary_file: str | Path | None) -> None:
        self.output_file = Path(output_file) if output_file else None
        self.summary_file = Path(summary_file) if summary_file else None
        self.values: dict[str, str] = {}

    @classmethod
    def in_folder(cls, folder: str | Path) -> StepOutputs:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        return cls(output_file=folder / OUTPUTS_FILE, summary_file=folder / SUMMARY_FILE)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value
        if self.output_file is None:
            return
        with self.output_file.open("a", encoding="utf-8") as handle:
            if "\n" in value:
                delimiter = f"MESHBOT_{uuid.uuid4().hex}"
                handle.write(f"{key}<<{delimiter}\n{value}\n{delimiter}\n")
            else:
                handle.write(f"{key}={value}\n")

    def summary(self, text: str) -> None:
        if self.summary_file is not None:
            with self.summary_file.open("a", encoding="utf-8") as handle:
                handle.write(text.rstrip("\n") + "\n")
