"""bot.github.checkout: GitCheckout answers from a real git checkout (HEAD, files and folders at a ref, ancestry,
merge base) and answers None, never raises, where git cannot tell. Its uses (the trusted default branch, the
checked-out commit, the base commit) are tried in test_github_trust.py and test_github_base_changes.py."""

from __future__ import annotations

from bot.github.checkout import GitCheckout
from github_support import git_checkout, git_commit



def test_a_checkout_answers_head_files_ancestry_and_merge_base(tmp_path):
    root = tmp_path / "repo"
    first = git_checkout(root, {"proj/config.yaml": "cicd_bot: {}\n", "proj/models/a.sql": "SELECT 1\n"})
    second = git_commit(root, {"proj/models/b.sql": "SELECT 2\n"})
    checkout = GitCheckout(root / "proj")
    assert checkout.head() == second and checkout.commit_of("origin/master") == first
    assert checkout.root() == root.resolve() and checkout.has_ref("origin/master") and not checkout.has_ref("nope")
    assert checkout.file_at("origin/master", "proj/config.yaml") == "cicd_bot: {}\n"
    assert checkout.file_at("origin/master", "proj/models/b.sql") is None
    assert checkout.is_ancestor(first, "HEAD") is True and checkout.is_ancestor(second, "origin/master") is False
    assert checkout.is_ancestor("0" * 40, "HEAD") is None
    assert checkout.merge_base(second, "origin/master") == first

    (root / "proj" / "link.sql").symlink_to("models/a.sql")
    git_commit(root, {})
    exported = tmp_path / "exported"
    assert checkout.export("HEAD", exported)
    assert sorted(str(p.relative_to(exported)) for p in exported.rglob("*") if p.is_file()) == [
        "config.yaml", "models/a.sql", "models/b.sql"]          # the folder's files at HEAD, links skipped
    assert not checkout.export("nope", tmp_path / "none")


def test_outside_a_git_work_tree_every_answer_is_none(tmp_path):
    checkout = GitCheckout(tmp_path)
    assert checkout.head() is None and checkout.root() is None and checkout.commit_of("HEAD") is None
    assert checkout.file_at("HEAD", "config.yaml") is None and checkout.is_ancestor("a" * 40, "HEAD") is None
    assert checkout.merge_base("HEAD", "origin/master") is None and not checkout.export("HEAD", tmp_path / "out")
