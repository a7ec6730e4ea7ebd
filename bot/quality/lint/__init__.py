"""The model linter: built-in and `linter/*.py` rules, chosen by the `linter:` config, run over every model."""
