"""tileir: tile-based GPU programming in Python on MLIR."""
