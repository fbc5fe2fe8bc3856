"""tileir.passes: tile-level passes and the staged pipeline.

    from tileir.passes import run_passes, run_stage
    run_passes(module, ["tile-inline", "tile-canonicalize", "cse"])
    run_stage(module, "tile")

Pass names are tile passes (`PASSES`, one module each in this package) or
upstream MLIR passes, which run through MLIR's PassManager.  `STAGES` lists the
pipeline in order; `registry.py` is the one place it is defined.
"""

from .pipeline import (STAGE_ATTR, InternalError, current_stage, ir_printer, parse_pipeline,
                       run_passes, run_stage, run_stages, validate_pipeline)
from .registry import PASSES, STAGES, PassInfo

__all__ = ["PASSES", "STAGES", "STAGE_ATTR", "InternalError", "PassInfo", "current_stage",
           "ir_printer", "parse_pipeline", "run_passes", "run_stage", "run_stages",
           "validate_pipeline"]
