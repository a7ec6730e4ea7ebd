"""bot.github.refusals: each sentence the gate says is a typed value worded by templates/refusals.md.j2, and what
meshbot did not write (a fork's name, a branch, a login) shows exactly as it is, never as Markdown or a mention."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from bot.github import refusals
from bot.github.refusals import (CheckoutMismatch, DispatchByApproverOnly, ForkDeploy, OffDefaultBranch,
                                 OptionsByApproverOnly, QueueBaseMismatch, Said)
from rendered import shown

SENTENCES = [cls for _, cls in inspect.getmembers(refusals, inspect.isclass) if issubclass(cls, Said) and cls is not Said]
SAMPLE = {"int": 7, "str": "main", "bool": False, "str | None": "abc1234", "tuple[str, ...]": ("--allow-drift",)}


@pytest.mark.parametrize("cls", SENTENCES, ids=lambda cls: cls.__name__)
def test_every_sentence_has_its_macro_and_reads_as_one_line(cls):
    values = {f.name: SAMPLE[f.type] for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING}
    text = cls(**values).text
    assert text and "\n" not in text and "{{" not in text


def test_values_meshbot_did_not_write_show_as_themselves():
    fork = ForkDeploy(3, "evil/*bold* @org/team [x](https://evil.example)").text
    assert shown(fork).startswith("deploy refused: #3 comes from evil/*bold* @org/team [x](https://evil.example). ")
    assert "@org/team" not in fork and "[x](" not in fork          # no mention, no link
    assert shown(QueueBaseMismatch(3, "main", "we`ird").text) == \
        "#3 targets main, but the merge queue entry is for we`ird.\n"
    assert "@octo" not in DispatchByApproverOnly("octo").text       # names who dispatched it, pings no one


def test_sentences_say_what_was_refused_and_what_to_do():
    assert shown(OptionsByApproverOnly(("--allow-drift", "--allow-large-backfill")).text) == \
        "deploy refused: --allow-drift, --allow-large-backfill can be given by a required approver only.\n"
    assert CheckoutMismatch("abc1234def", None, "the merge queue's commit", action="merge queue check").text == (
        "merge queue check refused: the checked-out commit cannot be read (not a git checkout), but the merge "
        "queue's commit is abc1234; meshbot deploys exactly that commit. Check out `abc1234def`")
    assert CheckoutMismatch("abc1234def", "1234567aa", "the head of #2", from_authorize_job=True).text.endswith(
        "is abc1234; meshbot deploys exactly that commit. Check out `abc1234def` (the `sha` output of the authorize job).")
    assert OffDefaultBranch("fedcba987", "main", unknown=True, action="rollback", what="the checked-out commit").text == (
        "rollback refused: meshbot could not tell whether the checked-out commit fedcba9 is on the default branch "
        "`main`, and rollbacks only from commits that are.")
