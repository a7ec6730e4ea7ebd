"""`python -m bot` runs the meshbot command line."""

from bot.cli import main

main()
