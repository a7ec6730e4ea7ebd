"""LocalOutput: the bot outside GitHub Actions; no network, writes what it would post into a folder.

What it would read from GitHub comes from the event payload and, optionally, an answers file (JSON,
`meshbot github --answers FILE`), in the shapes GitHub's REST API returns, so `gh api` output can be
pasted in; every key is optional:

    {"pulls": [<GET /repos/{owner}/{repo}/pulls/{n}>, ...],
     "reviews": {"<n>": [<GET /repos/{owner}/{repo}/pulls/{n}/reviews item>, ...]},
     "permissions": {"<login>": "admin|maintain|write|triage|read"},
     "teams": {"<org>/<team-slug>": ["<login>", ...]},
     "files": {"<n>": ["models/orders.sql", ...]}}

A pull request belongs to a commit when the commit is its head or its `merge_commit_sha`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bot.errors import GithubError
from bot.github.ports import CheckRun
from bot.github.event import PullRequest, Review, parse_pull_request, parse_review, read_json
from bot.redact import redact
from bot.report.comment_state import has_comment_marker
from bot.report.media import WrittenMarkdown, markdown_text

COMMENT_FILE = "comment.md"
REPLIES_FILE = "replies.md"   # the bot's replies to commands, one after another
CHECKS_FILE = "check_runs.json"
SUMMARY_FILE = "summary.md"
OUTPUTS_FILE = "outputs.env"


@dataclass(frozen=True)
class Answers:
    """What GitHub would answer in local mode (see the module docstring for the file's shape)."""

    pulls: tuple[PullRequest, ...] = ()
    commits: dict[str, tuple[int, ...]] = field(default_factory=dict)   # sha -> pull numbers
    reviews: dict[int, tuple[Review, ...]] = field(default_factory=dict)
    permissions: dict[str, str] = field(default_factory=dict)
    teams: dict[str, tuple[str, ...]] = field(default_factory=dict)
    files: dict[int, tuple[str, ...]] = field(default_factory=dict)


def load_answers(path: str | Path) -> Answers:
    """Read an answers file; a missing file or a wrong shape is a GithubError naming the file."""
    where = f"answers file {path} (--answers)"
    raw = read_json(path, what="answers (--answers)")
    if not isinstance(raw, dict):
        raise GithubError(f"{where} must hold a JSON object with pulls, reviews, permissions, teams, files")
    unknown = sorted(set(raw) - {"pulls", "reviews", "permissions", "teams", "files"})
    if unknown:
        raise GithubError(f"{where}: unknown key(s) {', '.join(unknown)}; known: pulls, reviews, "
                          "permissions, teams, files")
    try:
        pulls, commits = [], {}
        for item in raw.get("pulls") or []:
            pull = parse_pull_request(item)
            pulls.append(pull)
            for sha in {pull.head_sha, str(item.get("merge_commit_sha") or "")} - {""}:
                commits[sha] = commits.get(sha, ()) + (pull.number,)
        return Answers(
            pulls=tuple(pulls), commits=commits,
            reviews={int(n): tuple(parse_review(r) for r in items)
                     for n, items in (raw.get("reviews") or {}).items()},
            permissions={str(k): str(v) for k, v in (raw.get("permissions") or {}).items()},
            teams={str(k): tuple(str(u).lower() for u in v) for k, v in (raw.get("teams") or {}).items()},
            files={int(n): tuple(map(str, names)) for n, names in (raw.get("files") or {}).items()})
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise GithubError(f"{where} has an entry of the wrong shape ({type(error).__name__}: {error}); "
                          "pulls and reviews take the objects GitHub's REST API returns") from None


class LocalOutput:
    """A GithubPort that writes comment.md, replies.md and check_runs.json; reads from the payload and Answers."""

    def __init__(self, output_dir: str | Path, *, pull_requests: tuple[PullRequest, ...] = (),
                 answers: Answers = Answers()) -> None:
        self.dir = Path(output_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.answers = answers
        self._pulls = {p.number: p for p in pull_requests} | {p.number: p for p in answers.pulls}
        self._checks: dict[int, CheckRun] = {}
        self.reactions: list[tuple[int, str]] = []
        self.merges: list[tuple[int, str, str]] = []

    # comments --------------------------------------------------------------------------------
    def find_comment(self, number: int, *, marker: str) -> tuple[int, str] | None:
        path = self.dir / COMMENT_FILE
        if path.is_file() and marker in (body := path.read_text(encoding="utf-8")):
            return (number, body)
        return None

    def create_comment(self, number: int, body: str) -> int:
        if not has_comment_marker(body):   # a reply: the PR comment stays, as on GitHub
            with (self.dir / REPLIES_FILE).open("a", encoding="utf-8") as handle:
                handle.write(body.rstrip("\n") + "\n\n")
            return number
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
        return list(self.answers.reviews.get(number, ()))

    def permission(self, username: str) -> str:
        return self.answers.permissions.get(username, "read")

    def is_team_member(self, org: str, team_slug: str, username: str) -> bool:
        return username.lower() in self.answers.teams.get(f"{org}/{team_slug}", ())

    def pull_request(self, number: int) -> PullRequest:
        if number not in self._pulls:
            raise GithubError(f"pull request #{number} is unknown in local mode: the event payload does not "
                              "describe it and meshbot makes no network call here; add it to the `pulls` of "
                              "an answers file (--answers)")
        return self._pulls[number]

    def merge_pull(self, number: int, *, method: str, sha: str) -> str:
        self.merges.append((number, method, sha))
        return ""

    def pulls_for_commit(self, sha: str) -> list[PullRequest]:
        numbers = self.answers.commits.get(sha, ())
        return [p for p in self._pulls.values() if p.number in numbers or p.head_sha == sha]

    def changed_files(self, number: int) -> list[str]:
        # unknown locally unless answered: the runner treats an empty list as "assume the project changed"
        return list(self.answers.files.get(number, ()))


class StepOutputs:
    """Step outputs and the job summary: GITHUB_OUTPUT / GITHUB_STEP_SUMMARY, or files in a folder;
    every known secret is redacted from what is written."""

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
        value = redact(value)
        self.values[key] = value
        if self.output_file is None:
            return
        with self.output_file.open("a", encoding="utf-8") as handle:
            if "\n" in value or "\r" in value:   # a lone CR ends a line for the runner's parser too
                delimiter = f"MESHBOT_{uuid.uuid4().hex}"
                handle.write(f"{key}<<{delimiter}\n{value}\n{delimiter}\n")
            else:
                handle.write(f"{key}={value}\n")

    def summary(self, text: str) -> None:
        """Append to the job summary (GitHub Markdown): text not rendered for Markdown is shown as text."""
        text = redact(text) if isinstance(text, WrittenMarkdown) else markdown_text(redact(text))
        if self.summary_file is not None:
            with self.summary_file.open("a", encoding="utf-8") as handle:
                handle.write(text.rstrip("\n") + "\n")
