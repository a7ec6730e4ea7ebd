"""meshbot: SQLMesh-compatible transformations on Spark with virtual data environments."""

__version__ = "0.1.0"
