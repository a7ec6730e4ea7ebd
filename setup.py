"""templates/ stays at the checkout's top level (where template authors look for it) and is installed as
the package data of `bot.templates`: pyproject.toml's package finder cannot map a folder outside bot/."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["bot*"]), "bot.templates"], package_dir={"bot.templates": "templates"})
