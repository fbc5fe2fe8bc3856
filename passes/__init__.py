"""tileir.passes: tile-level passes and pipelines."""
