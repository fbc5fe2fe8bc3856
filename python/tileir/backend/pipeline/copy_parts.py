"""Ring slots copied in parts (sm_90a, the kernel option `copy_parts`).

A ring slot's TMA copy is one box per swizzle row of each of its tiles (MLA decode's
(64, 512) bf16 latent tile: 8 boxes of 64 columns, then its (64, 64) RoPE tile: one
more, 72 KB in all).  With one full barrier a slot, the consumers wait for every box
before their first product reads any.  In parts, each box completes a barrier of its
own, and the consumers' wait at the top of the iteration moves to the products: each
k step of a wgmma waits for the boxes it reads just before it is issued
(`backend/gpu/rules/mma.py`), so MLA's score product starts on the first 8 KB of a step
while the rest streams in (as FlashMLA waits on nine barriers a page).  A box waited
for is not waited for again by the products after it in the same block or blocks
inside it (`P c_kv` reads the boxes the scores of its step waited for).

    ring_alloc                       ring_alloc {tile.copy_parts}
    ring_wait(slot, parity)     ->   ring_wait(slot, parity) {tile.copy_parts}   (no code)
    mma(q, transpose(view))          mma: wait(box 0); k steps 0-3; wait(box 1); ...

The pipeliner (`software_pipeline.py`) marks a ring's `tile.ring_alloc` when the kernel
asks, the target has TMA, the loop gets a producer warpgroup (where the consumers
issue the copies too, ptxas serialized every wgmma of MLA decode: C7520), the loop is
not rotated (a rotated loop's second product reads the previous slot through a view
of its own, which no part wait covers), no buffer is shared by a cluster pair, and
every use of the loop's loaded tiles, through reshapes and permutes, is an A or B
operand of a wgmma product in the loop's own block (`products_only`): nothing else
reads a slot without the wait, and every box of a slot is waited for in every
iteration before the slot is released.  It marks the `tile.ring_wait` of such a
ring where the loop's tiles become the slot's views (`consume`); a marked ring's
unmarked wait waits for all its parts.
"""

from __future__ import annotations

from mlir import ir

from tileir.dialect.layout import tile_layout
from tileir.backend.layout.mma_layouts import Mma

# The kernel option `copy_parts` (kernel.py), a bool on the kernel's function
COPY_PARTS_ATTR = "tile.copy_parts"
# unit attribute on a tile.ring_alloc (one full barrier per TMA box) and on the
# tile.ring_wait whose views' products wait per box instead
PARTS_ATTR = "tile.copy_parts"
_VIEWS = frozenset({"tile.reshape", "tile.permute"})
_PRODUCTS = frozenset({"tile.mma", "tile.mma_async"})


def asked(func: ir.Operation, chip: str) -> bool:
    """Whether the kernel asks for parts on a target that copies with TMA."""
    return chip.startswith("sm_90") and COPY_PARTS_ATTR in func.attributes and \
        ir.BoolAttr(func.attributes[COPY_PARTS_ATTR]).value


def boxes_read(order, k_dim: int, ks: tuple[int, int] | None, box_elems: int,
               boxes: int) -> range:
    """The boxes of a ring tile that elements [k0, k1) = `ks` of a product's K read, the
    tile seen as the product's operand (its dim `k_dim` is K; `order`: its shared
    layout's dim order, fastest first).  Boxes cut the fastest dim: a K-major operand's
    k step reads the boxes of its own columns, an M/N-major one's a row of every box
    (so does a product of the whole K: `ks` None)."""
    if ks is None or order[0] != k_dim:
        return range(boxes)
    return range(ks[0] // box_elems, (ks[1] - 1) // box_elems + 1)


def products_only(value: ir.Value, body: ir.Block) -> bool:
    """Whether `value` has uses and every one, through reshapes and permutes, is operand
    A or B of a wgmma product (a `#tile.mma_acc` version 3 result) in `body` itself (the
    loop's block, not a branch inside it): each iteration then runs a product that
    reads, and so waits for, every box of the tile (a product reads its operands
    whole)."""
    uses = list(value.uses)
    for use in uses:
        op = use.owner
        if op.name in _VIEWS:
            if not products_only(op.results[0], body):
                return False
        elif op.name in _PRODUCTS:
            lay = tile_layout(op.results[0].type)
            if use.operand_number > 1 or not isinstance(lay, Mma) or lay.version != 3 or \
                    op.operation.block != body:
                return False
        else:
            return False
    return bool(uses)
