"""Memory ordering of tile loads and stores: `tile.fence` and the `tile.memory_scope`
attribute of `tile.load` / `tile.store` (docs/tile-ir.md).

cuTile's `load(..., memory_order=RELAXED | ACQUIRE, memory_scope=...)` and
`store(..., memory_order=RELAXED | RELEASE, ...)` become:

    %t = "tile.load"(...) {tile.memory_scope = "device"}     every element a relaxed
    "tile.fence"() {kind = "acquire", scope = "device"}        (strong) read, then the
                                                               block's acquire fence
    "tile.fence"() {kind = "release", scope = "device"}      the block's release fence,
    "tile.store"(...) {tile.memory_scope = "device"}         then relaxed writes

A relaxed access is one no pass may merge, move or erase (passes/effects.py); the
fences order the whole block's accesses before (release) or after (acquire) them
against the other blocks at the scope (`block`, `device`, `sys`).
"""

from __future__ import annotations

from mlir import ir

from .ods import Spec, TileOpView, VerifyError
from .tile import DIALECT, SCOPE_ATTR, SCOPES, access_scope, check_access_scope


@DIALECT.op
class FenceOp(TileOpView):
    """The block's memory accesses before it (`release`) or after it (`acquire`) are
    ordered against the other blocks at `scope`."""

    OPERATION_NAME = "tile.fence"
    SPEC = Spec(attributes=(("kind", "str_attr"), ("scope", "str_attr")))
    KINDS = ("acquire", "release")

    def __init__(self, kind: str, scope: str, *, loc=None, ip=None):
        super().__init__(ir.Operation.create(
            self.OPERATION_NAME, results=[], operands=[],
            attributes={"kind": ir.StringAttr.get(kind), "scope": ir.StringAttr.get(scope)},
            loc=loc, ip=ip))

    kind = property(lambda self: self.str_attr("kind"))
    scope = property(lambda self: self.str_attr("scope"))

    def verify(self) -> None:
        if self.kind not in self.KINDS:
            raise VerifyError(f"kind '{self.kind}' is not one of {', '.join(self.KINDS)}")
        if self.scope not in SCOPES:
            raise VerifyError(f"scope '{self.scope}' is not one of {', '.join(SCOPES)}")


__all__ = ["FenceOp", "SCOPE_ATTR", "SCOPES", "access_scope", "check_access_scope"]
