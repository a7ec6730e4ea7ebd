"""bot.github.trusted: gate settings read as data from the default branch (a template there is an error).

That a pull request's own files never decide them is tried end to end in test_github_trust.py."""

from __future__ import annotations

import pytest


def test_gate_settings_read_as_data_name_a_template_and_the_file():
    from bot.github.trusted import read_trusted_config

    class Files:
        branch = "main"

        def read(self, relative: str) -> str | None:
            return "cicd_bot:\n  enable_deploy_command: \"{{ env_var('X') }}\"\n" if relative == "config.yaml" else None

    with pytest.raises(Exception, match=r"config.yaml on the default branch `main`: `cicd_bot` uses a template"):
        read_trusted_config(input_text=None, default_branch=Files())
