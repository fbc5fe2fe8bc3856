"""Stage `pipeline`: rings of asynchronous copies, persistent tile loops, cluster
pairs, versioned bounds checks and programmatic launch, on layout-annotated IR."""
