"""Which tensor-core instruction an `mma` uses, and the layouts of its operands.

`plan(...)` decides, for one `tile.mma` and the kernel's warps, between
* wgmma (`Mma` version 3, sm_90a): accumulator M a multiple of 64; A from shared
  memory or registers, B from shared memory;
* mma.sync (`Mma` version 2, sm_80 and as the small-tile path on sm_90a):
  accumulator M a multiple of 16; A and B in registers (from shared memory
  through ldmatrix when they were loaded there);
and returns None when no tensor-core instruction fits the shapes or types (the
product then runs on the FMA units: tiles too small, f64, i8, and fp8 on sm_80).

Operand element types and the K step of one instruction:
f16, bf16 -> k16 (v2, v3); f32 as tf32 -> k8 (v2: mma.sync.m16n8k8, register
fragments of one f32 per K element, `DotOperand.kwidth` 1; v3: wgmma reads tf32
only K-major); f8E4M3FN, f8E5M2 -> k32 (v3, K-major only; the two may mix).  The
accumulator is f32 (an f16 one is widened before planning: `assign.widen_accumulator`).
"""

from __future__ import annotations

import dataclasses

from .mma_layouts import DotOperand, Mma, Shared, choose_swizzle

# operand element type -> K of one instruction
K_STEP = {"f16": 16, "bf16": 16, "f32": 8, "f8E4M3FN": 32, "f8E5M2": 32}
WGMMA_ONLY = ("f8E4M3FN", "f8E5M2")
# what mma.sync is lowered for (m16n8k16; f32 as tf32: m16n8k8; fp8 on sm_80 takes
# the FMA path)
MMA_SYNC_TYPES = ("f16", "bf16", "f32")
# wgmma can read these from shared memory in either major order (others: K-major only)
WGMMA_TRANSPOSABLE = ("f16", "bf16")
ACC_TYPES = {"f16": ("f32", "f16"), "bf16": ("f32",), "f32": ("f32",), "f8E4M3FN": ("f32",),
             "f8E5M2": ("f32",)}
MAX_WGMMA_N = 256


@dataclasses.dataclass(frozen=True)
class MmaPlan:
    acc: Mma
    k_step: int
    elem: str                      # operand element type (MLIR spelling)

    @property
    def version(self) -> int:
        return self.acc.version

    @property
    def kwidth(self) -> int:
        """K elements per 32-bit register of a register operand (DotOperand.kwidth):
        1 for tf32 on mma.sync; wgmma's register A takes 16-bit types only."""
        return 1 if self.elem == "f32" and self.version == 2 else 2

    def operand_a(self) -> DotOperand:
        return DotOperand(0, self.acc, self.kwidth)

    def operand_b(self) -> DotOperand:
        return DotOperand(1, self.acc, self.kwidth)

    def smem_ok(self, layout: Shared, index: int, shape, elem_bytes: int) -> bool:
        """Whether wgmma reads operand `index` straight from shared memory in `layout`."""
        if self.version != 3 or layout.swizzle == 0:
            return False
        k_dim = 1 if index == 0 else 0
        k_major = layout.order[0] == k_dim
        if not k_major and self.elem not in WGMMA_TRANSPOSABLE:
            return False
        # a box row must hold whole instructions along the fastest dim
        row = layout.box_elems(shape, elem_bytes)
        need = self.k_step if k_major else 8
        return row % need == 0 and layout.row_bytes(shape, elem_bytes) == layout.swizzle

    def steps_from_smem_ok(self, layout: Shared, shape, elem_bytes: int) -> bool:
        """Whether mma.sync reads this shared operand one k step at a time where it
        is: with ldmatrix for 16-bit elements in rows of at least 8 contiguous ones,
        with 4-byte loads for tf32."""
        if elem_bytes == 4:
            return self.elem == "f32"
        return elem_bytes == 2 and layout.box_elems(shape, elem_bytes) >= 8

    def smem_for_b(self, shape, elem_bytes: int) -> Shared:
        """A shared layout wgmma reads operand B (K x N) from: N fastest where the type
        allows it (what a row-major B already is) and N's rows hold a swizzle (32 bytes
        or more), else K fastest (a narrow N of 8 or 16 bf16 columns: a GEMV's rows)."""
        k, n = shape
        if self.elem in WGMMA_TRANSPOSABLE and choose_swizzle(n * elem_bytes):
            return Shared(choose_swizzle(n * elem_bytes), (1, 0))
        return Shared(choose_swizzle(k * elem_bytes), (0, 1))

    def smem_for_a(self, shape, elem_bytes: int) -> Shared:
        m, k = shape
        return Shared(choose_swizzle(k * elem_bytes), (1, 0))


def default_warps(acc_shape, version: int) -> int:
    """Warps for an accumulator tile when the kernel does not say: wgmma gives each
    warpgroup 64 x N rows (two warpgroups from 128 rows); mma.sync aims at 64 x 32
    per warp."""
    m, n = acc_shape
    if version == 3:
        return 8 if m >= 128 else 4
    return max(1, min(8, (m * n) // (64 * 32)))


def plan(acc_shape, acc_elem: str, elem: str, chip: str, num_warps: int | None,
         k: int) -> MmaPlan | None:
    """The tensor-core plan for an accumulator of `acc_shape`, or None (FMA units)."""
    if elem not in K_STEP or acc_elem not in ACC_TYPES[elem] or len(acc_shape) != 2:
        return None
    m, n = acc_shape
    step = K_STEP[elem]
    if k % step:
        return None
    if chip.startswith("sm_90") and m % 64 == 0 and n % 8 == 0:
        acc = _wgmma_layout(m, n, num_warps)
        if acc is not None:
            return MmaPlan(acc, step, elem)
    if elem not in MMA_SYNC_TYPES or m % 16 or n % 8:
        return None
    acc = _mma_sync_layout(m, n, num_warps)
    return MmaPlan(acc, step, elem) if acc is not None else None


def _wgmma_layout(m: int, n: int, num_warps: int | None) -> Mma | None:
    nw = num_warps or default_warps((m, n), 3)
    if nw % 4:
        return None
    groups = nw // 4
    gm = min(groups, m // 64)
    gn = groups // gm
    if gm * gn != groups or n % (gn * 8):
        return None
    bn = n // gn
    return Mma(3, (4 * gm, gn), (64, min(bn, MAX_WGMMA_N)))


def _mma_sync_layout(m: int, n: int, num_warps: int | None) -> Mma | None:
    """Warps wm x wn over (M, N) with whole 16 x 8 instructions per warp, the warp's
    block as square as the tile allows."""
    nw = num_warps or default_warps((m, n), 2)
    best = None
    wm = 1
    while wm <= nw:
        wn = nw // wm
        if m % (wm * 16) == 0 and n % (wn * 8) == 0:
            skew = abs((m // wm).bit_length() - (n // wn).bit_length())
            if best is None or skew < best[0]:
                best = (skew, wm, wn)
        wm *= 2
    return None if best is None else Mma(2, (best[1], best[2]), (16, 8))
