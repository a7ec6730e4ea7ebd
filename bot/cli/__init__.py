"""Command line: argument parsing and wiring to the Context; every BotError exits 1 without a traceback."""

from bot.cli.app import cli, main

__all__ = ["cli", "main"]
