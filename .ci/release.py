"""What .github/workflows/publish.yml asks before and while it publishes a release: the version, checked.

Standard library only, run as `python3 -I .ci/release.py ...` from the checkout's root before anything is
installed:

    check TAG       exit 1 unless TAG is `v` + bot/__init__.py's __version__ (the package's one version
                    source; pyproject.toml reads it) and CHANGELOG.md has a section for that version;
                    else print `version=`, `major=` (the moving tag, `v1`; empty for a pre-release) and
                    `prerelease=` lines for $GITHUB_OUTPUT
    notes VERSION   print CHANGELOG.md's section for VERSION (the release's text)
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")                            # a release: X.Y.Z
PRERELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(a|b|rc)(\d+)$")            # PEP 440 pre-release: X.Y.ZrcN


def package_version(root: Path = ROOT) -> str:
    """`__version__` of bot/__init__.py, read as data (the file is not imported)."""
    tree = ast.parse((root / "bot" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__version__"]:
            return ast.literal_eval(node.value)
    raise ValueError("bot/__init__.py assigns no __version__")


def changelog_section(text: str, version: str) -> str | None:
    """The body of `## [VERSION] - date` in a Keep a Changelog file, up to the next `## ` heading; None
    when there is no such section.

    >>> changelog_section("# Changelog\\n## [Unreleased]\\n- next\\n## [1.0.0] - 2027-01-02\\n### Added\\n- it\\n"
    ...                   "## [0.9.0] - 2026-12-01\\n- old\\n", "1.0.0")
    '### Added\\n- it'
    >>> changelog_section("## [1.0.0] - 2027-01-02\\n- it\\n", "1.0") is None
    True
    """
    heading = re.compile(rf"^## \[{re.escape(version)}\](?: - \d{{4}}-\d{{2}}-\d{{2}})?[ \t]*$", re.M)
    found = heading.search(text)
    if found is None:
        return None
    rest = text[found.end():]
    following = re.search(r"^## ", rest, re.M)
    body = rest[:following.start()] if following else rest
    body = re.split(r"^\[[^\]]+\]: ", body, maxsplit=1, flags=re.M)[0]   # the link definitions at the end
    return body.strip()


def major_tag(version: str) -> str:
    """The tag that follows the newest release of a major version (`v1` for 1.4.2); '' for a pre-release,
    which moves no tag.

    >>> major_tag("1.4.2"), major_tag("0.1.0"), major_tag("2.0.0rc1")
    ('v1', 'v0', '')
    """
    release = RELEASE.match(version)
    return f"v{release.group(1)}" if release else ""


def check(tag: str, root: Path = ROOT) -> list[str]:
    """The $GITHUB_OUTPUT lines for a release tag; SystemExit with the reason when it cannot be published."""
    version = package_version(root)
    if tag != f"v{version}":
        raise SystemExit(f"the tag {tag} is not the package's version v{version} (bot/__init__.py): "
                         "change __version__, or tag the commit that has it")
    if not (RELEASE.match(version) or PRERELEASE.match(version)):
        raise SystemExit(f"version {version} is neither X.Y.Z nor a pre-release X.Y.Z(a|b|rc)N")
    if not changelog_section((root / "CHANGELOG.md").read_text(encoding="utf-8"), version):
        raise SystemExit(f"CHANGELOG.md has no section `## [{version}] - YYYY-MM-DD` (or it is empty): "
                         "move the Unreleased entries under one")
    major = major_tag(version)
    return [f"version={version}", f"major={major}", f"prerelease={'false' if major else 'true'}"]


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("check", "notes"):
        print(__doc__, file=sys.stderr)
        return 2
    command, value = argv
    if command == "check":
        print("\n".join(check(value)))
        return 0
    section = changelog_section((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), value)
    if section is None:
        raise SystemExit(f"CHANGELOG.md has no section for {value}")
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
