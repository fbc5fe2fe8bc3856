"""Stage `gpu`: layout-annotated Tile IR -> per-thread code in a `gpu.module`, one
lowering rule per op (`rules/`)."""
