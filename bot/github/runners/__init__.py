"""The bot's commands by name (`dispatch` runs one) and BotRun, what every runner gets."""

from __future__ import annotations

from bot.github.runners.base import BotRun
from bot.github.runners.dispatch import COMMANDS, dispatch

__all__ = ["BotRun", "COMMANDS", "dispatch"]
