"""Kernel symbols: cuTile's name mangling of a function name and a signature, and
its inverse."""

from __future__ import annotations

import re
import struct
from typing import Sequence

from .. import dtypes as dt
from .signatures import (ArrayConstraint, CallingConvention, ConstantConstraint, KernelSignature,
                         ListConstraint, ParameterConstraint, ScalarConstraint, TupleConstraint)


# ---------------------------------------------------------------------------
# Name mangling
# ---------------------------------------------------------------------------
# A mangled name is `function "_K" convention ("_" parameter)*`, every character in
# [A-Za-z0-9_], and no parameter's code contains "_K" (so the last "_K" ends the name):
#
#   parameter := "S" dtype                                 a scalar
#              | "A" ndim dtype ("_" dim fact+)* ("_" flag+)?     an array
#              | "L" ("g" n)* "e"? "A" ...                 a list: its groups, elements
#                                                          may alias, then its element
#              | "T" count ("_" parameter){count}          a tuple
#              | "B0" | "B1" | "I" int | "F" 16 hex digits (the float's bits)
#   fact      := "s" int | "d" int | "c" int | "v" int | "l" int
#                (shape constant, shape divisor, stride constant, stride divisor, stride
#                lower bound: each only where it says something, dims ascending)
#   flag      := "p" int (base address divisor) | "g" n (alias group) | "i" (may alias
#                internally) | "u" (uint32 index) | "w" (int64 index)
#   int       := "n"? digits (n: negative; no leading zeros)
#
# Alias groups are numbered in order of first appearance: demangled, they are named
# g0, g1, ....  E.g. vector_add_Ktir1_A1f32_0c1_p16_A1f32_0c1_p16_A1f32_0c1_p16_I1024.
_DTYPE_CODES = {
    dt.bool_: "b8", dt.int8: "i8", dt.int16: "i16", dt.int32: "i32", dt.int64: "i64",
    dt.uint8: "u8", dt.uint16: "u16", dt.uint32: "u32", dt.uint64: "u64",
    dt.float16: "f16", dt.bfloat16: "bf16", dt.float32: "f32", dt.float64: "f64",
    dt.tfloat32: "tf32", dt.float8_e4m3fn: "f8e4m3", dt.float8_e5m2: "f8e5m2",
    dt.float4_e2m1fn: "f4e2m1", dt.float8_e8m0fnu: "f8e8m0", dt.float8_e5m3fnu: "f8e5m3",
}
_CODE_DTYPES = {code: d for d, code in _DTYPE_CODES.items()}
_DTYPE_TOKEN = "|".join(sorted(_CODE_DTYPES, key=len, reverse=True))
_INDEX_FLAGS = {dt.int32: "", dt.uint32: "u", dt.int64: "w"}
_FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def mangle_kernel_name(function_name: str, kernel_signature: KernelSignature) -> str:
    """The symbol of `function_name` compiled for `kernel_signature` (grammar above);
    `demangle_kernel_name` inverts it."""
    if not isinstance(function_name, str) or not _FUNCTION_NAME.fullmatch(function_name):
        raise ValueError(f"a mangled name starts with the kernel's name, an ASCII identifier "
                         f"([A-Za-z_][A-Za-z0-9_]*); got {function_name!r}")
    if not isinstance(kernel_signature, KernelSignature):
        raise TypeError(f"kernel_signature must be a KernelSignature, got "
                        f"{kernel_signature!r}")
    groups = _GroupNumbers()
    params = "".join("_" + _mangle(p, groups) for p in kernel_signature.parameters)
    return f"{function_name}_K{kernel_signature.calling_convention.code}{params}"


class _GroupNumbers:
    """Alias group names to numbers, in order of first appearance."""

    def __init__(self):
        self.numbers: dict[str, int] = {}

    def code(self, groups: Sequence[str]) -> str:
        return "".join(f"g{self.numbers.setdefault(g, len(self.numbers))}" for g in groups)


def _int(v: int) -> str:
    return f"n{-v}" if v < 0 else str(v)


def _mangle(p: ParameterConstraint, groups: _GroupNumbers) -> str:
    if isinstance(p, ScalarConstraint):
        return "S" + _DTYPE_CODES[p.dtype]
    if isinstance(p, ArrayConstraint):
        return "A" + _mangle_array(p, groups)
    if isinstance(p, ListConstraint):
        flags = groups.code(p.alias_groups) + ("e" if p.elements_may_alias else "")
        return "L" + flags + "A" + _mangle_array(p.element, groups)
    if isinstance(p, TupleConstraint):
        return f"T{len(p.items)}" + "".join("_" + _mangle(i, groups) for i in p.items)
    v = p.value
    if isinstance(v, bool):
        return f"B{int(v)}"
    if isinstance(v, int):
        return "I" + _int(v)
    return "F" + struct.pack(">d", v).hex()


_FACTS = (("s", "shape_constant", None), ("d", "shape_divisible_by", 1),
          ("c", "stride_constant", None), ("v", "stride_divisible_by", 1),
          ("l", "stride_lower_bound_incl", None))


def _mangle_array(a: ArrayConstraint, groups: _GroupNumbers) -> str:
    out = f"{a.ndim}{_DTYPE_CODES[a.dtype]}"
    for d in range(a.ndim):
        facts = "".join(letter + _int(getattr(a, field)[d]) for letter, field, default in _FACTS
                        if getattr(a, field)[d] != default)
        if facts:
            out += f"_{d}{facts}"
    flags = "" if a.base_addr_divisible_by == 1 else f"p{a.base_addr_divisible_by}"
    flags += groups.code(a.alias_groups)
    flags += ("i" if a.may_alias_internally else "") + _INDEX_FLAGS[a.index_dtype]
    return out + ("_" + flags if flags else "")


def demangle_kernel_name(symbol: str) -> tuple[str, KernelSignature]:
    """(function name, signature) of a mangled name, the signature's symbol `symbol`.

    Exactly inverts `mangle_kernel_name`: a name it could not have produced (a
    non-canonical spelling too) is a ValueError.  Alias groups come back named g0,
    g1, ... in order of first appearance.
    """
    if not isinstance(symbol, str):
        raise TypeError(f"symbol must be a str, got {symbol!r}")
    at = symbol.rfind("_K")
    if at <= 0:
        raise ValueError(f"'{symbol}' is not a mangled kernel name: it has no "
                         f"'_K<convention>' after a function name")
    name = symbol[:at]
    reader = _Reader(symbol, at + 2)
    convention = CallingConvention.from_code(
        reader.expect("[A-Za-z0-9]+", "a calling convention code after '_K'"))
    groups = _GroupNames(reader)
    params = []
    while not reader.at_end():
        reader.expect("_", "'_' before the next parameter")
        params.append(_demangle(reader, groups))
    signature = KernelSignature(params, convention, symbol)
    again = mangle_kernel_name(name, signature)
    if again != symbol:
        raise ValueError(f"'{symbol}' is not in canonical form: the signature it spells "
                         f"mangles to '{again}'")
    return name, signature


class _Reader:
    """A cursor over a mangled name; errors say where it stopped."""

    def __init__(self, text: str, pos: int):
        self.text, self.pos = text, pos

    def at_end(self) -> bool:
        return self.pos == len(self.text)

    def peek(self, pattern: str) -> bool:
        return re.compile(pattern).match(self.text, self.pos) is not None

    def take(self, pattern: str) -> str | None:
        m = re.compile(pattern).match(self.text, self.pos)
        if m is None:
            return None
        self.pos = m.end()
        return m.group()

    def expect(self, pattern: str, what: str) -> str:
        found = self.take(pattern)
        if found is None:
            raise self.error(f"expected {what}")
        return found

    def integer(self, what: str) -> int:
        text = self.expect("n?[0-9]+", what)
        return -int(text[1:]) if text.startswith("n") else int(text)

    def error(self, message: str) -> ValueError:
        rest = self.text[self.pos:self.pos + 16] or "the end"
        return ValueError(f"'{self.text}' is not a mangled kernel name: at offset {self.pos} "
                          f"({rest!r}) {message}")


class _GroupNames:
    """Alias group numbers back to names (g0, g1, ...), each new one the next number."""

    def __init__(self, reader: _Reader):
        self.reader, self.count = reader, 0

    def read(self) -> list[str]:
        names = []
        while self.reader.take("g"):
            n = int(self.reader.expect("[0-9]+", "an alias group number after 'g'"))
            if n > self.count:
                raise self.reader.error(f"alias group g{n} comes before g{self.count}")
            self.count = max(self.count, n + 1)
            names.append(f"g{n}")
        return names


def _demangle(r: _Reader, groups: _GroupNames) -> ParameterConstraint:
    code = r.expect("[ASLTBIF]", "a parameter: one of A, S, L, T, B, I, F")
    if code == "S":
        return ScalarConstraint(_read_dtype(r))
    if code == "A":
        return _demangle_array(r, groups)
    if code == "L":
        names = groups.read()
        elements_may_alias = r.take("e") is not None
        r.expect("A", "'A' and the list's element array")
        return ListConstraint(_demangle_array(r, groups), alias_groups=names,
                              elements_may_alias=elements_may_alias)
    if code == "T":
        items = []
        for _ in range(int(r.expect("[0-9]+", "the tuple's length"))):
            r.expect("_", "'_' before the next tuple item")
            items.append(_demangle(r, groups))
        return TupleConstraint(items)
    if code == "B":
        return ConstantConstraint(r.expect("[01]", "0 or 1 after B") == "1")
    if code == "I":
        return ConstantConstraint(r.integer("an int after I"))
    return ConstantConstraint(struct.unpack(">d", bytes.fromhex(
        r.expect("[0-9a-f]{16}", "16 hex digits after F")))[0])


def _read_dtype(r: _Reader) -> dt.DType:
    return _CODE_DTYPES[r.expect(_DTYPE_TOKEN, f"a dtype ({', '.join(_CODE_DTYPES)})")]


def _demangle_array(r: _Reader, groups: _GroupNames) -> ArrayConstraint:
    ndim = int(r.expect("[0-9]+", "the array's ndim"))
    dtype = _read_dtype(r)
    fields: dict[str, list] = {field: [default] * ndim for _, field, default in _FACTS}
    while r.peek("_[0-9]"):
        r.take("_")
        d = int(r.expect("[0-9]+", "a dim"))
        if d >= ndim:
            raise r.error(f"dim {d} of a {ndim}-d array")
        letters = dict((letter, field) for letter, field, _ in _FACTS)
        while (letter := r.take("[sdcvl]")) is not None:
            fields[letters[letter]][d] = r.integer(f"an int after '{letter}'")
    base, names, internal, index = 1, [], False, dt.int32
    if r.peek("_[a-z]"):
        r.take("_")
        if r.take("p"):
            base = r.integer("the base address divisor after 'p'")
        names = groups.read()
        internal = r.take("i") is not None
        index = {"u": dt.uint32, "w": dt.int64}.get(r.take("[uw]") or "", dt.int32)
    return ArrayConstraint(dtype, ndim, index_dtype=index, alias_groups=names,
                           may_alias_internally=internal, base_addr_divisible_by=base,
                           **fields)
