"""Layout assignment: give every tile of a kernel a layout encoding (stage `layout`).

Strategy (predictable, good for the memory-bound kernels users write):
1. Every tile shape that is loaded or stored gets a *home* layout: coalesced
   16-byte accesses for the narrowest element type accessed at that shape.
   Other shapes get a coalesced layout for 4-byte elements.
2. Walking the kernel in order, each op's result layout follows from its
   operands: element-wise ops and broadcasts keep their first operand's layout,
   reductions give `slice(parent, axis)`, reshapes that add or drop unit dims
   derive the matching layout, permutes permute it, constants/splats/iotas and
   general reshapes take the home layout of their shape.
3. Where an operand's layout differs from what its consumer needs (a second
   element-wise operand, a stored tile that is not in its store's home layout,
   a loop-carried value), a `tile.convert_layout` is inserted.  Conversions
   between layouts that are equal as linear maps are free in the `gpu` stage.

Tensor-core products (`tile.mma`; `tile.matmul` is first rewritten as an mma
into a zero accumulator and a cast) get the layouts `backend.layout.mma_plan` picks for
the module's target: an `#tile.mma_acc` accumulator, which the loop that carries
it, the splat that starts it and the ops that read it keep (`preferred`
layouts, propagated through `scf.for` before the walk); operands loaded only to
feed the product (through transposes) are loaded straight into shared memory
(`#tile.shared`), which wgmma reads as is and mma.sync through ldmatrix
(`#tile.mma_operand`).

Precondition: the `tile` stage ran (helpers inlined).
"""

from __future__ import annotations

import math

from mlir import ir

from mlir.dialects import arith, tensor

from tileir.dialect import TileIRError
from tileir.dialect.layout import ConvertLayoutOp, tile_layout, with_layout
from tileir.dialect.tile import FAST_ACC_ATTR, SCOPE_ATTR, MmaOp
from tileir.dialect.verifier import DEFAULT_CHIP, arg_has, kernel_functions, module_chip
from tileir.dialect.types import bitwidth, is_power_of_two
from . import layouts as L
from . import mma_plan, tma_store
from .encodings import is_distributed
from .retile import note_grid_rewrite, unit_dims_only
from .split import small_grid
from .mma_layouts import Mma, Shared, choose_swizzle
from .warpgroup_split import OWNER_ATTR

NUM_WARPS_ATTR = "tile.num_warps"
DEFAULT_MAX_WARPS = 16
WARPGROUP = 4                      # warps of a warpgroup (wgmma)
# On a small grid (at most one block for every two SMs: decode) a kernel without
# loops whose block streams 32 KB or more takes up to 32 warps: nothing else runs on
# its SM, and a shorter chain a thread is what shortens the kernel.  Fused add +
# RMSNorm over 8192 columns at 64 / 16 / 1 rows ran 2.55 / 2.40 / 2.33 us on 32
# warps against 2.89 / 2.59 / 2.46 on 16 (H100, bench/RESULTS.md); with 16 KB (4096
# columns) 32 warps lost 30 %, which the floor keeps out.  Recorded as a grid
# rewrite (`small-grid-warps`): the kernel then differs from the one for large grids.
SMALL_GRID_MAX_WARPS = 32
SMALL_GRID_WARPS_FLAG = "small-grid-warps"


def element_bytes(t: ir.Type) -> int:
    return max(1, bitwidth(t) // 8)


class MmaAssignment:
    """The mma part of layout assignment (a mixin of LayoutAssigner)."""

    def collect_mma(self) -> None:
        """Plans every mma; records the preferred layouts of accumulators, of what
        loops carry along with them, and of the loads that only feed operands."""
        for op in _ops_named(self.func, "tile.matmul"):
            decompose_matmul(op)
        for op in _ops_named(self.func, "tile.mma"):
            widen_accumulator(op)
        for op in _ops_named(self.func, "tile.mma"):
            a, b, acc = op.operands
            k = a.type.shape[-1]
            p = mma_plan.plan(tuple(acc.type.shape), str(acc.type.element_type),
                              str(a.type.element_type), self.chip, self._mma_warps(op), k)
            if p is None and a.type.rank != 2:
                raise TileIRError(
                    f"a batched (3-d) mma is not lowered to the GPU: operands {_shape(a)} x "
                    f"{_shape(b)}; index the batch with a block id and reshape the tiles to "
                    f"2-d", op.location)
            self.plans[op] = p
            # no tensor-core instruction fits: the FMA units, on the home layout,
            # operands read from row-major shared tiles
            lay = p.acc if p is not None else self.home_of(tuple(acc.type.shape))
            self.preferred[acc] = self.preferred[op.results[0]] = lay
            # a widened f16 accumulator (`widen_accumulator`): its f16 value too, so a
            # loop carries it in the accumulator's layout and the casts are free
            if _defining_name(acc) == "arith.extf":
                self.preferred[acc.owner.operands[0]] = lay
            for use in op.results[0].uses:
                if use.owner.name == "arith.truncf":
                    self.preferred[use.owner.results[0]] = lay
            for index in (0, 1):
                self.operand_source(op.operands[index], swizzled=p is not None)
        self.propagate_through_loops()
        while self.propagate_forward():
            self.propagate_through_loops()

    def _mma_warps(self, op: ir.Operation) -> int:
        """The warps a product is planned for: the kernel's, or one warpgroup's for a
        product tile-split-warpgroups gave to an owner (`tile.owner`): its layout then
        covers four warps and the other warpgroup holds replicas."""
        if OWNER_ATTR in op.attributes and self.num_warps == 2 * WARPGROUP:
            return WARPGROUP
        return self.num_warps

    def propagate_forward(self) -> bool:
        """What is computed from a product's result prefers the layout it gets from it
        for free: element-wise ops the layout of their operands, a reduction the
        slice of its source's, a reshape of unit dims the derived one.  So a loop
        carries an online softmax's row max and sum (attention) in the accumulator's
        row layout, with no exchange each iteration.  Returns whether any was added."""
        added = False

        def visit(op):
            nonlocal added
            if not op.results or not isinstance(op.results[0].type, ir.RankedTensorType) \
                    or op.results[0] in self.preferred:
                return ir.WalkResult.ADVANCE
            res, name = op.results[0], op.name
            lay = None
            if name == "scf.if":                      # what a branch yields
                for i, r in enumerate(op.results):
                    yields = [list(region.blocks[0].operations)[-1]
                              for region in op.regions if len(region.blocks)]
                    got = next((self.preferred[y.operands[i]] for y in yields
                                if y.operands[i] in self.preferred), None)
                    if r not in self.preferred and got is not None and is_distributed(got):
                        self.preferred[r] = got
                        added = True
                return ir.WalkResult.ADVANCE
            if name.startswith(("arith.", "math.")) and name != "arith.constant":
                shape = list(res.type.shape)
                lay = next((self.preferred[v] for v in op.operands
                            if v in self.preferred and isinstance(v.type, ir.RankedTensorType)
                            and list(v.type.shape) == shape
                            and is_distributed(self.preferred[v])), None)
            elif name == "tile.reduce":
                src = self.preferred.get(op.operands[0])
                if isinstance(src, (L.Blocked, Mma)):
                    lay = L.Slice(ir.IntegerAttr(op.attributes["axis"]).value, src)
            elif name == "tile.reshape":
                src = self.preferred.get(op.operands[0])
                if src is not None and is_distributed(src):
                    lay = reshape_layout(src, tuple(op.operands[0].type.shape),
                                         tuple(res.type.shape))
            if lay is not None:
                self.preferred[res] = lay
                added = True
            return ir.WalkResult.ADVANCE

        self.func.walk(visit)
        return added

    def operand_source(self, v: ir.Value, swizzled: bool = True) -> None:
        """A load that only feeds this operand (through permutes) loads into shared memory
        (with the widest swizzle its rows allow for tensor cores, plain row-major for
        the FMA path)."""
        while _feeds_only_mma(v) and (_defining_name(v) == "tile.permute" or (
                _defining_name(v) == "tile.reshape" and unit_dims_only(
                    list(v.owner.operands[0].type.shape), list(v.type.shape)))):
            v = v.owner.operands[0]          # transposes and unit dims (a batch index)
        if _defining_name(v) != "tile.load" or not _feeds_only_mma(v) or \
                SCOPE_ATTR in v.owner.attributes:     # (relaxed loads: into registers)
            return
        t = v.type
        # a 2-d tile with unit dims anywhere but the last: one head's (1, 1, M, D) of a
        # (batch, heads, seq, D) array, or (M, 1, D) of a packed (tokens, heads, D) one
        if t.rank < 2 or t.shape[-1] == 1 or sum(d != 1 for d in t.shape) > 2:
            return
        inner = t.shape[-1] * element_bytes(t.element_type)
        self.preferred[v] = Shared(choose_swizzle(inner) if swizzled else 0,
                                   tuple(reversed(range(t.rank))))

    def propagate_through_loops(self) -> None:
        """A loop carries a value in the layout its consumers prefer: init, region
        argument, yielded value and result share one preference."""
        changed = True
        while changed:
            changed = False
            for loop in _ops_named(self.func, "scf.for"):
                body = loop.regions[0].blocks[0]
                yield_op = list(body.operations)[-1]
                for i, res in enumerate(loop.results):
                    group = [loop.operands[3 + i], body.arguments[i + 1], yield_op.operands[i],
                             res]
                    lay = next((self.preferred[v] for v in group if v in self.preferred), None)
                    if lay is None:
                        continue
                    for v in group:
                        if self.preferred.get(v) is None:
                            self.preferred[v] = lay
                            changed = True

    def rule_tile_mma(self, op):
        p = self.plans[op]
        if p is None:                     # the FMA path: row-major shared operands
            acc_lay = self.home_of(tuple(op.operands[2].type.shape))
            self.require(op, 2, acc_lay)
            self.set_layout(op.results[0], acc_lay)
            for index in (0, 1):
                lay = self.layout_of(op.operands[index])
                order = lay.order if isinstance(lay, Shared) else (1, 0)
                self.require(op, index, Shared(0, order))
            return
        self.require(op, 2, p.acc)
        self.set_layout(op.results[0], p.acc)
        for index in (0, 1):
            v = op.operands[index]
            lay = self.layout_of(v)
            shape = tuple(v.type.shape)
            eb = element_bytes(v.type.element_type)
            if p.version == 3 and isinstance(lay, Shared) and p.smem_ok(lay, index, shape, eb):
                continue                                   # wgmma reads it where it is
            if p.version == 2 and isinstance(lay, Shared) and p.steps_from_smem_ok(lay, shape, eb):
                continue                                   # read one k step at a time
            if p.version == 3 and index == 1:
                self.require(op, 1, p.smem_for_b(shape, eb))
            elif p.version == 3 and eb != 2:
                # wgmma's register A takes 16-bit types: a computed tf32 or fp8 A (a
                # promoted f16 x f32 product) goes to shared memory, K-major
                self.require(op, 0, p.smem_for_a(shape, eb))
            else:
                self.require(op, index, p.operand_a() if index == 0 else p.operand_b())


class LayoutAssigner(MmaAssignment):
    def __init__(self, func: ir.Operation, num_warps: int, chip: str = DEFAULT_CHIP):
        self.func = func
        self.num_warps = num_warps
        self.chip = chip
        self.home: dict[tuple[int, ...], L.Blocked] = {}
        self.plans: dict[ir.Operation, mma_plan.MmaPlan | None] = {}
        # Layouts decided before the walk: accumulators (and everything a loop
        # carries along with them), and loads that feed an mma operand only.
        self.preferred: dict[ir.Value, L.Layout] = {}

    # -- homes -----------------------------------------------------------------
    def collect_homes(self) -> None:
        narrowest: dict[tuple[int, ...], int] = {}

        def visit(op):
            if op.name in ("tile.load", "tile.store"):
                t = op.results[0].type if op.name == "tile.load" else op.operands[1].type
                shape = tuple(t.shape)
                if shape:
                    b = element_bytes(t.element_type)
                    narrowest[shape] = min(narrowest.get(shape, b), b)
            return ir.WalkResult.ADVANCE

        self.func.walk(visit)
        for shape, b in narrowest.items():
            self.home[shape] = L.coalesced(shape, b, self.num_warps)

    def home_of(self, shape: tuple[int, ...]) -> L.Layout:
        if not shape:
            # rank-0 tiles: replicated in every thread (a slice of a 1-element tile)
            return L.Slice(0, L.coalesced((1,), 4, self.num_warps))
        if shape not in self.home:
            self.home[shape] = L.coalesced(shape, 4, self.num_warps)
        return self.home[shape]

    def collect_broadcast_sources(self) -> None:
        """Broadcast sources made where their broadcasts need them (preferred layouts).

        A broadcast's result is read in the home layout of its shape; a source loaded
        (or splatted) in that layout, replicated across the broadcast dims, makes the
        broadcast free: a (1, 64) row of cos, reshaped to (1, 1, 64) and broadcast over
        a (1, 32, 64) tile, is loaded already spread the way the tile's threads hold
        it, instead of converting each (1, 32, 64) broadcast through shared memory.
        Followed back from the broadcast through single-use reshapes that insert unit
        dims; a source with other uses keeps its own layout."""
        for op in _ops_named(self.func, "tile.broadcast"):
            res = op.results[0]
            want = self.home_of(tuple(res.type.shape))
            if res in self.preferred or not isinstance(want, L.Blocked):
                continue
            self.preferred[res] = want
            v, lay = op.operands[0], want
            while _single_use(v):
                name = _defining_name(v)
                if name in ("tile.load", "tensor.splat"):
                    self.preferred.setdefault(v, lay)
                    break
                if name != "tile.reshape":
                    break
                src = v.owner.operands[0]
                lay = unit_dim_preimage(lay, tuple(src.type.shape), tuple(v.type.shape),
                                        want, tuple(res.type.shape))
                if lay is None:
                    break
                v = src

    def collect_mask_sources(self) -> None:
        """A select's mask made in the layout of the values it selects from, where those
        are a product's (preferred Mma): attention's `(cols < n) & (rows >= cols)` is
        then computed where each thread holds its scores -- iotas and splats in the
        accumulator's layout or slices of it, broadcasts over its rows and columns in
        place -- instead of built in a blocked layout and exchanged through shared
        memory.  Followed back from the mask through element-wise ops, broadcasts and
        reshapes of unit dims to iotas, splats and constants, into values that have no
        preference yet."""
        work = []
        for op in _ops_named(self.func, "arith.select"):
            values = self.preferred.get(op.operands[1])
            if isinstance(values, Mma) and isinstance(op.operands[0].type, ir.RankedTensorType):
                work.append((op.operands[0], values))
        while work:
            v, lay = work.pop()
            if v in self.preferred or not isinstance(v.type, ir.RankedTensorType):
                continue
            self.preferred[v] = lay
            name = _defining_name(v)
            if name is None:
                continue
            op = v.owner
            shape = tuple(v.type.shape)
            if name.startswith(("arith.", "math.")) and name != "arith.constant":
                work += [(x, lay) for x in op.operands
                         if isinstance(x.type, ir.RankedTensorType) and tuple(x.type.shape) == shape]
            elif name == "tile.broadcast":
                src = op.operands[0]
                if broadcast_free(lay, tuple(src.type.shape), lay, shape):
                    work.append((src, lay))
            elif name == "tile.reshape":
                src = op.operands[0]
                k = _unit_dim_change(list(src.type.shape), list(shape))
                if k is not None and len(shape) == len(src.type.shape) + 1 and not \
                        isinstance(lay, L.Slice):
                    work.append((src, L.Slice(k, lay)))

    # -- walking -------------------------------------------------------------------
    def run(self) -> None:
        self.collect_homes()
        self.collect_mma()
        self.collect_mask_sources()
        self.collect_broadcast_sources()
        for block in self.func.regions[0].blocks:
            self.block(block)
        hoist_invariant_conversions(self.func)
        self.func.attributes[NUM_WARPS_ATTR] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(32), self.num_warps)

    def block(self, block: ir.Block) -> None:
        for op in list(block.operations):
            self.op(op)

    def op(self, op: ir.Operation) -> None:
        op = op.operation          # OpViews may shadow `.name` (func.func's is its symbol)
        name = op.name
        if name == "scf.for":
            return self.scf_for(op)
        if name == "scf.if":
            return self.scf_if(op)
        if name == "scf.while":
            return self.scf_while(op)
        for region in op.regions:
            for block in region.blocks:
                self.block(block)
        rule = getattr(self, "rule_" + name.replace(".", "_"), None)
        if rule is not None:
            rule(op)
        elif name.startswith(("arith.", "math.")):
            self.elementwise(op)

    # -- helpers -------------------------------------------------------------------
    def layout_of(self, v: ir.Value) -> L.Layout | None:
        return tile_layout(v.type)

    def set_layout(self, v: ir.Value, layout: L.Layout) -> None:
        v.set_type(with_layout(v.type, layout))

    def require(self, op: ir.Operation, index: int, layout: L.Layout) -> None:
        """Makes operand `index` of `op` have `layout`, converting before `op` if needed.

        A broadcast whose only use this is produces `layout` itself: its lowering
        moves the (smaller) source instead of the broadcast tile (a bias row added
        to an accumulator exchanges one row, not the whole tile)."""
        v = op.operands[index]
        if self.layout_of(v) == layout:
            return
        if _is_splat(v) and is_distributed(layout):
            # a splat is the same scalar in every register, whatever the layout: made
            # again where it is needed instead of exchanged
            with ir.InsertionPoint(op), op.location:
                op.operands[index] = _splat_in(v, layout)
            if not list(v.uses):
                v.owner.erase()
            return
        if _defining_name(v) == "tile.broadcast" and _single_use(v) and \
                is_distributed(layout) and not isinstance(layout, L.Slice):
            self.set_layout(v, layout)
            return
        with ir.InsertionPoint(op), op.location:
            conv = ConvertLayoutOp(v, with_layout(v.type, layout))
        op.operands[index] = conv.result

    def tensor_operands(self, op) -> list[int]:
        return [i for i, v in enumerate(op.operands) if isinstance(v.type, ir.RankedTensorType)]

    # -- rules -----------------------------------------------------------------------
    def elementwise(self, op: ir.Operation) -> None:
        idx = self.tensor_operands(op)
        if not idx:
            if op.results and isinstance(op.results[0].type, ir.RankedTensorType):
                self.set_layout(op.results[0], self.home_of(tuple(op.results[0].type.shape)))
            return
        lay = self.layout_of(op.operands[idx[0]])
        for i in idx[1:]:
            self.require(op, i, lay)
        for r in op.results:
            if isinstance(r.type, ir.RankedTensorType):
                self.set_layout(r, lay)

    def produce_home(self, op: ir.Operation) -> None:
        r = op.results[0]
        self.set_layout(r, self.home_of(tuple(r.type.shape)))

    def produce_preferred(self, op: ir.Operation) -> None:
        """Splats and loads can produce any layout for the same cost: the preferred
        one when a consumer asked, else the home one."""
        r = op.results[0]
        self.set_layout(r, self.preferred.get(r) or self.home_of(tuple(r.type.shape)))

    rule_tile_load = produce_preferred
    rule_tile_iota = produce_preferred
    rule_tensor_splat = produce_preferred
    rule_tensor_from_elements = produce_home

    def rule_arith_constant(self, op):
        r = op.results[0]
        if not isinstance(r.type, ir.RankedTensorType):
            return
        value = ir.DenseElementsAttr(op.attributes["value"])
        if not value.is_splat:
            # a table in global memory, each thread loading its elements (the gpu
            # stage): any layout reads it as cheaply, so the home one
            self.produce_home(op)
            body = str(value).rsplit(" : ", 1)[0]
            op.attributes["value"] = ir.Attribute.parse(f"{body} : {r.type}")
            return
        self.produce_preferred(op)
        # the value attribute's type must equal the (now encoded) result type
        op.attributes["value"] = ir.DenseElementsAttr.get_splat(r.type, value.get_splat_value())

    def rule_tile_store(self, op):
        t = op.operands[1].type
        if tma_store.plan_for(self.func, op.operands[0], self.layout_of(op.operands[1]), t,
                              self.chip) is not None:
            return                     # stored by TMA from the accumulator layout
        self.require(op, 1, self.home_of(tuple(t.shape)))

    def rule_tile_broadcast(self, op):
        src = op.operands[0]
        res = op.results[0]
        lay = self.layout_of(src)
        want = self.preferred.get(res)
        if want is not None and is_distributed(lay) and broadcast_free(
                lay, tuple(src.type.shape), want, tuple(res.type.shape)):
            self.set_layout(res, want)         # a source made for it (collect_broadcast_sources)
            return
        # (a row max kept in the accumulator's layout broadcasts over its rows in place)
        if isinstance(lay, (L.Blocked, Mma)) and broadcast_free(
                lay, tuple(src.type.shape), lay, tuple(res.type.shape)):
            self.set_layout(res, lay)
            return
        home = self.home_of(tuple(res.type.shape))
        src_lay = home if isinstance(home, L.Blocked) else self.home_of(tuple(src.type.shape))
        self.require(op, 0, src_lay)
        self.set_layout(res, src_lay)

    def rule_tile_reshape(self, op):
        src, res = op.operands[0], op.results[0]
        derived = reshape_layout(self.layout_of(src), tuple(src.type.shape),
                                 tuple(res.type.shape))
        self.set_layout(res, derived or self.home_of(tuple(res.type.shape)))

    def rule_tile_permute(self, op):
        src = op.operands[0]
        lay = self.layout_of(src)
        if not isinstance(lay, (L.Blocked, Shared)):      # shared tiles permute for free
            lay = self.home_of(tuple(src.type.shape))
            self.require(op, 0, lay)
        perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        self.set_layout(op.results[0], lay.permuted(perm))

    def _registers(self, op, index: int) -> None:
        """Operand `index` in registers (a blocked layout: its own, else the home one)."""
        v = op.operands[index]
        if not isinstance(self.layout_of(v), L.Blocked):
            self.require(op, index, self.home_of(tuple(v.type.shape)))

    def rule_tile_extract_slice(self, op):        # exchanges through shared memory
        self._registers(op, 0)
        self.produce_preferred(op)

    def rule_tile_insert_slice(self, op):
        self._registers(op, 0)
        self._registers(op, 1)
        self.produce_preferred(op)

    rule_tile_concat = rule_tile_insert_slice

    # element-indexed memory: every tile operand and the result in one layout
    def rule_tile_gather(self, op):
        self.elementwise(op)

    rule_tile_scatter = rule_tile_atomic_rmw = rule_tile_atomic_cas = rule_tile_gather

    def rule_tile_cluster_gather(self, op):       # registers to registers, by element
        for i in self.tensor_operands(op):
            self._registers(op, i)
        for r in op.results:
            self.set_layout(r, self.home_of(tuple(r.type.shape)))

    def rule_tile_partial_add(self, op):          # stream-K: register by register
        self.elementwise(op)

    def rule_tile_partial_store(self, op):        # any register layout; the reader's too
        if not isinstance(self.layout_of(op.operands[0]), (L.Blocked, Mma)):
            self.require(op, 0, self.home_of(tuple(op.operands[0].type.shape)))

    def rule_tile_print(self, op):                 # any register layout prints
        for i in self.tensor_operands(op):
            self._registers(op, i)

    rule_tile_assert = rule_tile_print

    def rule_tile_reduce(self, op):
        src = op.operands[0]
        lay = self.layout_of(src)
        if not isinstance(lay, (L.Blocked, Mma)):
            lay = self.home_of(tuple(src.type.shape))
            self.require(op, 0, lay)
        axis = ir.IntegerAttr(op.attributes["axis"]).value
        self.set_layout(op.results[0], L.Slice(axis, lay))

    def rule_arith_select(self, op):
        """The values' layout, not the mask's: a mask is an i1 tile (cheaper to exchange
        than the f32 scores an attention kernel masks, which stay where the product
        left them)."""
        lay = self.layout_of(op.operands[1])
        if not isinstance(op.operands[0].type, ir.RankedTensorType) or \
                not is_distributed(lay):
            return self.elementwise(op)
        for i in (0, 2):
            self.require(op, i, lay)
        self.set_layout(op.results[0], lay)

    # -- control flow ------------------------------------------------------------------
    def scf_for(self, op: ir.Operation) -> None:
        body = op.regions[0].blocks[0]
        inits = list(op.operands)[3:]
        carried = {}
        for i, init in enumerate(inits):
            if isinstance(init.type, ir.RankedTensorType):
                lay = self.preferred.get(op.results[i]) or tile_layout(init.type)
                self.require(op, 3 + i, lay)
                carried[i] = lay
                body.arguments[i + 1].set_type(op.operands[3 + i].type)
                op.results[i].set_type(op.operands[3 + i].type)
        self.block(body)
        yield_op = list(body.operations)[-1]
        for i, lay in carried.items():
            self.require(yield_op, i, lay)

    def scf_while(self, op: ir.Operation) -> None:
        """The before region's arguments take the inits' layouts, which the after
        region yields back; what `scf.condition` forwards keeps its layout into the
        after region's arguments and the results."""
        before, after = (r.blocks[0] for r in op.regions)
        carried = {}
        for i, init in enumerate(op.operands):
            if isinstance(init.type, ir.RankedTensorType):
                lay = self.preferred.get(before.arguments[i]) or tile_layout(init.type)
                self.require(op, i, lay)
                carried[i] = lay
                before.arguments[i].set_type(op.operands[i].type)
        self.block(before)
        cond = list(before.operations)[-1]
        for j, v in enumerate(list(cond.operands)[1:]):
            if isinstance(v.type, ir.RankedTensorType):
                after.arguments[j].set_type(v.type)
                op.results[j].set_type(v.type)
        self.block(after)
        yield_op = list(after.operations)[-1]
        for i, lay in carried.items():
            self.require(yield_op, i, lay)

    def scf_if(self, op: ir.Operation) -> None:
        blocks = [r.blocks[0] for r in op.regions if len(r.blocks)]
        for b in blocks:
            self.block(b)
        yields = [list(b.operations)[-1] for b in blocks]
        for i, r in enumerate(op.results):
            if not isinstance(r.type, ir.RankedTensorType):
                continue
            lay = tile_layout(yields[0].operands[i].type)
            for y in yields[1:]:
                self.require(y, i, lay)
            self.set_layout(r, lay)


def decompose_matmul(op: ir.Operation) -> None:
    """`matmul(a, b)` -> `mma(a, b, 0)` into the wide accumulator, cast to the result."""
    a, b = op.operands
    res_t = op.results[0].type
    elem = str(a.type.element_type)
    acc_elem = {"i8": "i32", "f64": "f64"}.get(elem, "f32")
    with ir.InsertionPoint(op), op.location:
        acc_t = ir.RankedTensorType.get(list(res_t.shape), ir.Type.parse(acc_elem))
        zero = ir.IntegerAttr.get(acc_t.element_type, 0) if acc_elem == "i32" else \
            ir.FloatAttr.get(acc_t.element_type, 0.0)
        init = arith.ConstantOp(acc_t, ir.DenseElementsAttr.get_splat(acc_t, zero)).result
        r = MmaOp(a, b, init).result
        if acc_t.element_type != res_t.element_type:
            r = arith.truncf(res_t, r)
    op.results[0].replace_all_uses_with(r)
    op.erase()


def widen_accumulator(op: ir.Operation) -> None:
    """`mma(a, b, acc)` with an f16 accumulator -> `truncf(mma(a, b, extf(acc)))`: the
    tensor cores accumulate in f32 here, and each mma rounds once to f16, as the
    interpreter does (cuTile allows f16 accumulators for f16 and fp8 operands)."""
    a, b, acc = op.operands
    if str(acc.type.element_type) != "f16":
        return
    with ir.InsertionPoint(op), op.location:
        wide_t = ir.RankedTensorType.get(list(acc.type.shape), ir.F32Type.get(),
                                         acc.type.encoding)
        wide = MmaOp(a, b, arith.extf(wide_t, acc))
        if FAST_ACC_ATTR in op.attributes:       # (use_fast_acc=True stays asked for)
            wide.operation.attributes[FAST_ACC_ATTR] = op.attributes[FAST_ACC_ATTR]
        r = arith.truncf(acc.type, wide.result)
    op.results[0].replace_all_uses_with(r)
    op.erase()


def _ops_named(root: ir.Operation, name: str) -> list[ir.Operation]:
    found = []

    def visit(op):
        if op.name == name:
            found.append(op.operation)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


def _is_splat(v: ir.Value) -> bool:
    name = _defining_name(v)
    if name == "tensor.splat":
        return True
    return name == "arith.constant" and \
        isinstance(v.owner.attributes["value"], ir.DenseElementsAttr) and \
        ir.DenseElementsAttr(v.owner.attributes["value"]).is_splat


def _splat_in(v: ir.Value, layout: L.Layout) -> ir.Value:
    """The splat `v` made again, at the insertion point, in `layout`."""
    t = with_layout(v.type, layout)
    if _defining_name(v) == "tensor.splat":
        return tensor.splat(t, v.owner.operands[0], [])
    value = ir.DenseElementsAttr(v.owner.attributes["value"]).get_splat_value()
    return arith.ConstantOp(t, ir.DenseElementsAttr.get_splat(t, value)).result


def _defining_name(v: ir.Value) -> str | None:
    owner = v.owner
    return None if isinstance(owner, ir.Block) else owner.name


# 32-bit registers a thread may hold across a loop for a conversion moved out of it
HOIST_REGISTERS = 32


def _inside(v: ir.Value, loop: ir.Operation) -> bool:
    owner = v.owner
    op = owner.owner if isinstance(owner, ir.Block) else owner.operation
    while op is not None:
        if op == loop:
            return True
        op = op.parent
    return False


def hoist_invariant_conversions(func: ir.Operation) -> None:
    """A register-to-register conversion, inside a loop, of a value defined outside it
    runs once before the loop (a decode kernel's Q tile, loaded to registers and
    converted to the mma operand layout: else through shared memory every
    iteration), when the converted tile is small (HOIST_REGISTERS a thread)."""
    loops: list[ir.Operation] = []

    def visit(op):
        if op.name == "scf.for":
            loops.append(op.operation)
        return ir.WalkResult.ADVANCE

    func.walk(visit)                 # post-order: an inner loop's conversion moves out
    for loop in loops:               # of it first, then out of the outer loop
        for op in list(loop.regions[0].blocks[0].operations):
            op = op.operation
            if op.name != "tile.convert_layout" or _inside(op.operands[0], loop):
                continue
            t = op.results[0].type
            if not (is_distributed(tile_layout(t)) and is_distributed(tile_layout(
                    op.operands[0].type))):
                continue
            # counted as if one warp held it all (an mma operand is replicated across
            # the warps that split the other dim)
            words = math.prod(t.shape) * bitwidth(t.element_type) / 32 / 32
            if words <= HOIST_REGISTERS:
                op.move_before(loop)


def _single_use(v: ir.Value) -> bool:
    return len(list(v.uses)) == 1


def _feeds_only_mma(v: ir.Value) -> bool:
    """Whether `v` is used once, or only as products' operands (directly or through
    transposes and unit-dim reshapes): MLA's latent page is the keys of one product
    and the values of the next, one tile in shared memory for both."""
    if _single_use(v):
        return True
    for use in v.uses:
        op = use.owner
        if op.name == "tile.mma" and use.operand_number in (0, 1):
            continue
        if (op.name == "tile.permute" or (op.name == "tile.reshape" and unit_dims_only(
                list(v.type.shape), list(op.results[0].type.shape)))) and \
                _feeds_only_mma(op.results[0]):
            continue
        return False
    return True


def _shape(v: ir.Value) -> list[int]:
    return list(v.type.shape)


def broadcast_free(src_lay: L.Layout, src_shape, res_lay: L.Layout, res_shape) -> bool:
    """True if every thread already holds the source elements its result elements need."""
    res_lin = L.to_linear(res_lay, res_shape)
    src_lin = L.to_linear(src_lay, src_shape)
    r = L.restrict(res_lin, src_shape)
    return r.lanes == src_lin.lanes and r.warps == src_lin.warps and \
        set(r.regs) <= set(src_lin.regs) | {tuple(0 for _ in src_shape)}


def unit_dim_preimage(lay: L.Blocked, src_shape, res_shape, want: L.Blocked,
                      target_shape) -> L.Blocked | None:
    """A layout for the source of a reshape that inserts a unit dim (`src_shape` ->
    `res_shape`) whose derived result layout broadcasts to `want` on `target_shape`
    for free, else None.  `lay` is the layout wanted on `res_shape`: its threads and
    warps along the inserted dim (which hold copies) move to a dim of the source
    where they hold copies too."""
    src, res = list(src_shape), list(res_shape)
    if len(res) != len(src) + 1:
        return None
    k = _unit_dim_change(src, res)
    if k is None or lay.size_per_thread[k] != 1:
        return None
    drop = lambda t: t[:k] + t[k + 1:]  # noqa: E731
    order = tuple(d - (d > k) for d in lay.order if d != k)
    for j in range(len(src)):
        tpw, wpb = list(drop(lay.threads_per_warp)), list(drop(lay.warps_per_block))
        tpw[j] *= lay.threads_per_warp[k]
        wpb[j] *= lay.warps_per_block[k]
        cand = L.Blocked(drop(lay.size_per_thread), tuple(tpw), tuple(wpb), order)
        derived = reshape_layout(cand, tuple(src), tuple(res))
        if derived is not None and broadcast_free(derived, tuple(res), want, target_shape):
            return cand
    return None


def reshape_layout(lay: L.Layout | None, src_shape, res_shape) -> L.Layout | None:
    """The layout a reshape that only adds or drops unit dims gets for free, else None."""
    if lay is None:
        return None
    src, res = list(src_shape), list(res_shape)
    if isinstance(lay, Shared):                       # shared tiles: the same bytes
        if not unit_dims_only(src, res):
            return None
        # every unit dim of the source dropped (last first), then the result's inserted
        for k in reversed(range(len(src))):
            if src[k] == 1:
                lay = lay.without_dim(k)
        for k in range(len(res)):
            if res[k] == 1:
                lay = lay.with_unit_dim(k)
        return lay
    if isinstance(lay, Mma):
        # leading unit dims (a batched product's (1, M, N) tile) come and go in place
        lead = len(res) - 2
        if lead >= 0 and res[lead:] == src[lay.lead:] and all(d == 1 for d in res[:lead]):
            return lay.with_lead(lead)
        return None
    if len(res) == len(src) + 1:                      # insert a unit dim
        # a slice gets its parent back when the unit dim returns where it was removed
        ks = ([lay.dim] if isinstance(lay, L.Slice) else []) + list(range(len(res)))
        for k in ks:
            if res[k] == 1 and res[:k] + res[k + 1:] == src:
                if isinstance(lay, L.Slice) and lay.dim == k:
                    return lay.parent
                if isinstance(lay, L.Blocked):
                    return lay.with_unit_dim(k)
                return None
    if len(src) == len(res) + 1 and isinstance(lay, L.Blocked):   # drop a unit dim
        for k in range(len(src)):
            if src[k] == 1 and src[:k] + src[k + 1:] == res:
                return L.Slice(k, lay)
    return None


def _unit_dim_change(src: list[int], res: list[int]) -> int | None:
    """The dim a reshape from `src` to `res` inserts or drops (a unit dim), else None."""
    longer, shorter = (res, src) if len(res) == len(src) + 1 else (src, res)
    if len(longer) != len(shorter) + 1:
        return None
    for k in range(len(longer)):
        if longer[k] == 1 and longer[:k] + longer[k + 1:] == shorter:
            return k
    return None


def choose_schedule(func: ir.Operation, chip: str = DEFAULT_CHIP) -> tuple[int, int | None]:
    """(num_warps, the `tile.occupancy` to ask for or None): `choose_num_warps`, and
    for a kernel of chained block-wide reductions the schedule of
    `chained_reduction_schedule`."""
    warps = choose_num_warps(func, chip)
    occupancy = chained_reduction_schedule(func, warps, chip)
    return (warps // 2, occupancy) if occupancy is not None else (warps, None)


def choose_num_warps(func: ir.Operation, chip: str = DEFAULT_CHIP) -> int:
    """Enough warps that each thread streams about two 16-byte vectors; for a kernel
    with tensor-core products, the warps its largest accumulator wants
    (`mma_plan.default_warps`).

    What a block streams is the data its loads bring in from block-dependent
    places (a block-invariant load, like a weight row every block reads, is
    served by the cache); a kernel with no such load counts its largest tile.
    Measured on an H200 (bench/RESULTS.md): rows of 16 KB run best on 16 warps,
    rows of 8 KB on 8, a vector add of two 4 KB tiles on 8.  And no more warps
    than give each thread a 16-byte vector of the largest streamed load: RoPE's
    two 4 KB half rows (and two 256-byte cos / sin rows) on 16 warps loaded 8
    bytes a thread and ran at 0.74 of copy bandwidth, on 8 at 0.96 (H100).
    """
    if NUM_WARPS_ATTR in func.attributes:
        n = ir.IntegerAttr(func.attributes[NUM_WARPS_ATTR]).value
        if not is_power_of_two(n) or n > 32:
            raise TileIRError(f"num_warps must be a power of two <= 32, got {n}", func.location)
        return n
    products = _ops_named(func, "tile.mma") + _ops_named(func, "tile.matmul")
    shapes = [tuple(op.results[0].type.shape) for op in products]
    shapes = [sh for sh in shapes if len(sh) == 2]     # 3-d products are refused later
    if shapes:
        return max(mma_plan.default_warps(sh, 3 if chip.startswith("sm_90") and len(sh) == 2
                                          and sh[0] % 64 == 0 else 2) for sh in shapes)
    streamed = biggest = largest_streamed = 0

    def visit(op):
        nonlocal streamed, biggest, largest_streamed
        if op.name in ("tile.load", "tile.store"):
            t = op.results[0].type if op.name == "tile.load" else op.operands[1].type
            n = element_bytes(t.element_type)
            for d in t.shape:
                n *= d
            biggest = max(biggest, n)
            if op.name == "tile.load" and not all(block_invariant(i)
                                                  for i in list(op.operands)[1:]):
                streamed += n
                largest_streamed = max(largest_streamed, n)
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    per_block = streamed or biggest
    vector_cap = largest_streamed or biggest      # 16 bytes of it per thread, at least
    most = SMALL_GRID_MAX_WARPS if small_grid(func) and not _ops_named(func, "scf.for") \
        else DEFAULT_MAX_WARPS
    warps = 1
    while warps < most and warps * 32 * 32 < per_block and \
            2 * warps * 32 * 16 <= vector_cap:
        warps *= 2
    if warps > DEFAULT_MAX_WARPS:
        note_grid_rewrite(func, SMALL_GRID_WARPS_FLAG)
    return warps


# A kernel that reduces its tile across the block twice in a row (LayerNorm's mean,
# then its variance) waits at each reduction's barriers with no load in flight.
# More, smaller blocks hide that: half the warps `choose_num_warps` picks, and
# ptxas asked to fit blocks for CHAINED_WARPS_PER_SM warps an SM (`tile.occupancy`), as long as a
# thread holds at most CHAINED_MAX_ELEMENTS of the largest tile (more spills under
# the register cap).  Measured on an H100 (bench/RESULTS.md): LayerNorm over 8192
# rows went from 0.89 / 0.80 / 0.86 to 0.93 / 0.88 / 0.95 of copy bandwidth at
# 4096 / 7168 / 8192 wide; RMSNorm (one reduction) gains nothing from it.
CHAINED_WARPS_PER_SM = 24
CHAINED_MAX_ELEMENTS = 32
CHAINED_MIN_REDUCED = 2048          # elements of a reduced tile: surely several warps'


def chained_reduction_schedule(func: ir.Operation, warps: int,
                               chip: str = DEFAULT_CHIP) -> int | None:
    """The occupancy to ask for a kernel of `warps` (as chosen by the streamed bytes)
    that qualifies for the chained-reduction schedule above, else None: no
    products, no num_warps or occupancy option, two or more large reductions in the
    kernel's own block (not in loops), loads and stores there of aligned arrays
    of 16-bit elements only, on sm_90a, half the warps still within
    CHAINED_MAX_ELEMENTS a thread, and a grid of more than one block for every two
    SMs (on a smaller one, fewer warps only lose bytes in flight).  Under the register cap the schedule brings,
    LayerNorm spilled with fp32 arrays, on sm_80, and softmax with unaligned ones
    (test_backend's no-spill check), so those keep the plain schedule."""
    attrs = func.attributes
    if NUM_WARPS_ATTR in attrs or "tile.occupancy" in attrs or warps < 2 or \
            not chip.startswith("sm_90"):
        return None
    if small_grid(func):
        return None            # a block per SM or fewer: occupancy is moot, warps are not
    if _ops_named(func, "tile.mma") or _ops_named(func, "tile.matmul"):
        return None
    body = func.regions[0].blocks[0]
    reductions, largest = 0, 0
    for op in body.operations:
        op = op.operation
        if op.name in ("tile.load", "tile.store"):
            tile = op.results[0] if op.name == "tile.load" else op.operands[1]
            array = op.operands[0]
            if not isinstance(array.owner, ir.Block) or \
                    not arg_has(func, array.arg_number, "tile.aligned") or \
                    element_bytes(tile.type.element_type) > 2:
                return None
        for v in list(op.results):
            if isinstance(v.type, ir.RankedTensorType):
                largest = max(largest, math.prod(v.type.shape))
        if op.name == "tile.reduce" and \
                math.prod(op.operands[0].type.shape) >= CHAINED_MIN_REDUCED:
            reductions += 1
    half = warps // 2
    if reductions < 2 or largest > CHAINED_MAX_ELEMENTS * 32 * half:
        return None
    return max(1, CHAINED_WARPS_PER_SM // half)


def block_invariant(v: ir.Value, seen: set | None = None) -> bool:
    """Whether `v` is the same in every block: it does not depend on `tile.bid`/
    `tile.num_blocks` (a loop counter is invariant when its bounds are; loop-carried
    values are conservatively not)."""
    seen = set() if seen is None else seen
    if v in seen:
        return True
    seen.add(v)
    owner = v.owner
    if isinstance(owner, ir.Block):
        parent = owner.owner
        if parent is None or parent.name == "func.func":
            return True                               # kernel arguments
        if parent.name == "scf.for" and v == owner.arguments[0]:
            return all(block_invariant(x, seen) for x in list(parent.operands)[:3])
        return False
    op = owner.operation if hasattr(owner, "operation") else owner
    if op.name in ("tile.bid", "tile.num_blocks"):
        return False
    return all(block_invariant(x, seen) for x in op.operands)


# The 32-bit registers one tile may take in each thread.  A thread has 255: past
# that a tile spills to local memory (slow, but it runs: a 128 x 256 f32 accumulator
# on 4 warps takes 256).  Far past it, the code unrolls every element of the tile
# (a 2^20-element f32 tile on 1024 threads, 1024 a thread: 32 s of ptxas and 29 KB
# of local memory a thread), so that is refused.
MAX_TILE_REGISTERS = 1024


def check_tile_registers(func: ir.Operation, warps: int) -> None:
    """A located error for the first tile of `func` that needs more than
    MAX_TILE_REGISTERS registers a thread at `warps` warps (tiles a product reads
    from shared memory counted too, conservatively)."""
    threads = 32 * warps
    found = []

    def visit(op):
        for v in op.results:
            t = v.type
            if not isinstance(t, ir.RankedTensorType):
                continue
            n = math.prod(t.shape)
            words = -(-n * max(32, bitwidth(t.element_type)) // 32) // threads
            if words > MAX_TILE_REGISTERS:
                found.append((op.location, t, words))
                return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    func.walk(visit)            # (raising inside a walk would lose the error's type)
    if found:
        loc, t, words = found[0]
        raise TileIRError(
            f"a tile of shape {tuple(t.shape)} and {t.element_type} needs {words} registers "
            f"a thread on {threads} threads (num_warps={warps}); a thread has 255, and past "
            f"{MAX_TILE_REGISTERS} the compile unrolls a spilled tile element by element: "
            f"use smaller tiles (a loop over chunks of the data)", loc)


def _check_not_assigned(func: ir.Operation) -> None:
    """A located error for a kernel that already has layouts or later-stage ops: IR
    past the `layout` stage whose module lost its `tile.stage` (found by the fuzzer:
    assigning again made invalid IR)."""
    found = []

    def visit(op):
        later = op.name.startswith(("tile.ring_", "tile.mma_async", "tile.mma_wait",
                                    "tile.convert_layout"))
        if later or any(isinstance(v.type, ir.RankedTensorType) and v.type.encoding is not None
                        for v in op.results):
            found.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    if found:
        raise TileIRError(f"'{found[0].name}' already has a layout or belongs to a later stage: "
                          f"this kernel is past the 'layout' stage; say so with the module "
                          f"attribute tile.stage", found[0].location)


# Element types with no GPU rule yet: microscaling operands (fp4, e8m0 scales), which
# no tensor core before sm_100 takes and the interpreter runs (mma_scaled).
UNLOWERED_ELEMENTS = {"f4E2M1FN": "float4_e2m1fn", "f8E8M0FNU": "float8_e8m0fnu"}


def _check_lowered_types(func: ir.Operation, chip: str) -> None:
    """Refuses, at the op, tiles of element types the GPU rules do not handle."""
    found: list[tuple[ir.Operation, str]] = []

    def visit(op):
        for v in list(op.results) + list(op.operands):
            t = v.type
            elem = str(t.element_type) if isinstance(t, ir.ShapedType) else str(t)
            if elem in UNLOWERED_ELEMENTS:
                found.append((op, UNLOWERED_ELEMENTS[elem]))
                return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    if found:
        op, name = found[0]
        raise TileIRError(f"{name} tiles are not lowered to the GPU ({chip}) by tileir yet: "
                          f"it has no fp4/e8m0 instructions before sm_100; the interpreter "
                          f"runs them", op.location)


def assign_layouts(module: ir.Module) -> None:
    """Runs layout assignment on every `tile.kernel` function of `module`."""
    chip = module_chip(module)
    for op in kernel_functions(module):
        _check_not_assigned(op)
        _check_lowered_types(op, chip)
        warps, occupancy = choose_schedule(op, chip)
        check_tile_registers(op, warps)
        LayoutAssigner(op, warps, chip).run()
        if occupancy is not None:
            op.attributes["tile.occupancy"] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(32), occupancy)
