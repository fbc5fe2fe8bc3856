"""`tileir.compilation`: signatures, name mangling, and kernels exported into one cubin.

CPU tests compile for sm_80 and sm_90a and read the cubin back: its symbol table
(ours, and cuobjdump's where installed), each kernel's PTX and SASS against the same
specialization compiled alone, and the parameter table ptxas wrote
(EIATTR_KPARAM_INFO) against `kernel_launch_info`.  GPU tests (`gpu`) load the
exported cubin and launch its symbols.
"""

from __future__ import annotations

import ctypes
import io
import math
import re
import struct
import subprocess
import tempfile
from pathlib import Path
from typing import Annotated

import numpy as np
import pytest

import tileir as ct
from tileir.compilation import (ArrayConstraint, CallingConvention, ConstantConstraint,
                                KernelSignature, ListConstraint, ScalarConstraint,
                                TupleConstraint, demangle_kernel_name, export_kernel,
                                kernel_launch_info, mangle_kernel_name)
from tileir.compilation.elf import _elf_functions
from tileir.compilation.export import _aligned, _combined_ptx, _specialize, _target
from tileir.errors import TileTypeError, TileUnsupportedFeatureError, TileValueError
from tileir.examples.matmul import matmul
from tileir.examples.softmax import softmax
from tileir.examples.vector_add import vector_add
from tileir.specialization import ArrayParam, TableListParam

TIR = CallingConvention.tileir_v1()
ALIGNED_1D = dict(base_addr_divisible_by=16, stride_constant=(1,))


@ct.kernel
def axpb(x, y, a, b, use_b, TILE: ct.Constant[int]):
    """y = x * a (+ b if use_b): scalars of three widths."""
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    t = t * a
    if use_b:
        t = t + b
    ct.store(y, index=(i,), tile=t)


@ct.kernel
def row_scale(x: Annotated[ct.Array, ct.ArrayAnnotation(static_shape_dims=(1,))], y,
              TILE: ct.Constant[int]):
    """Rows of x times the row length, which the annotation compiles in."""
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, TILE), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(row, 0), tile=t * x.shape[1])


@ct.kernel
def weighted_sum(xs, out, TM: ct.Constant[int], TN: ct.Constant[int]):
    """out = sum over the list of (j + 1) * xs[j], plus len(xs) times its last array (tiles
    past an array's edge read zeros)."""
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    w = 1.0
    for x in xs:
        t = ct.load(x, index=(i, j), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
        acc = acc + ct.astype(t, ct.float32) * w
        w = w + 1.0
    last = ct.load(xs[-1], index=(i, j), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
    acc = acc + ct.astype(last, ct.float32) * ct.astype(len(xs), ct.float32)
    ct.store(out, index=(i, j), tile=ct.astype(acc, out.dtype))


def weighted_sum_reference(xs, shape):
    """weighted_sum's result in float64 over an output of `shape`."""
    out = np.zeros(shape)
    for w, x in enumerate(list(xs) + [x * len(xs) for x in xs[-1:]], 1):
        part = np.zeros(shape)
        m, n = min(shape[0], x.shape[0]), min(shape[1], x.shape[1])
        part[:m, :n] = np.asarray(x, np.float64)[:m, :n]
        out += part * (w if w <= len(xs) else 1)
    return out


def list_signature(dtype, aligned: bool) -> KernelSignature:
    element = array(dtype, 2, **(dict(base_addr_divisible_by=16, stride_constant=(None, 1),
                                      stride_divisible_by=(8, 1)) if aligned else {}))
    return KernelSignature([ListConstraint(element), array(ct.float32, 2), 32, 64], TIR)


@ct.kernel
def tuple_sum(x, y, SIZES: ct.Constant):
    t = ct.load(x, index=(ct.bid(0),), shape=(SIZES[0],), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(ct.bid(0),), tile=t + SIZES[1])


def array(dtype, ndim, **facts) -> ArrayConstraint:
    return ArrayConstraint(dtype, ndim, **facts)


def vadd_signature(dtype, tile, aligned=True, symbol=None) -> KernelSignature:
    a = array(dtype, 1, **(ALIGNED_1D if aligned else {}))
    return KernelSignature([a, a, a, tile], TIR, symbol)


def softmax_signature(dtype, tile) -> KernelSignature:
    a = array(dtype, 2, base_addr_divisible_by=16, stride_constant=(None, 1),
              stride_divisible_by=(16, 1))
    return KernelSignature([a, a, tile], TIR)


def matmul_signature(bm, bn, bk) -> KernelSignature:
    a = array(ct.float16, 2, base_addr_divisible_by=16, stride_constant=(None, 1),
              stride_divisible_by=(8, 1))
    return KernelSignature([a, a, a, bm, bn, bk], TIR)


# --------------------------------------------------------------------------
# Tools: the compile cache of this module, cuobjdump
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def module_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("compilation-cache")


@pytest.fixture(autouse=True)
def _shared_cache(module_cache, monkeypatch):
    """The tests of this module share one cache of their own: each specialization
    compiles once, and no other test's compile of it is loaded in its place (after
    conftest's `_compile_cache`)."""
    monkeypatch.setenv("TILEIR_CACHE_DIR", str(module_cache))


@pytest.fixture(scope="module")
def cuobjdump() -> str:
    from tileir.backend.target.toolchain import find_cuda_tool
    path = find_cuda_tool("cuobjdump")
    if path is None:
        pytest.skip("needs cuobjdump: pip install -e '.[test]' (nvidia-cuda-cuobjdump), or put "
                    "a CUDA toolkit's bin/ on PATH")
    return path


def run_cuobjdump(cuobjdump: str, cubin: bytes, *flags: str) -> str:
    with tempfile.TemporaryDirectory(prefix="tileir-test-") as d:
        path = Path(d) / "exported.cubin"
        path.write_bytes(cubin)
        r = subprocess.run([cuobjdump, *flags, str(path)], capture_output=True, text=True,
                           timeout=60)
    assert r.returncode == 0, f"cuobjdump {' '.join(flags)} failed:\n{r.stderr}"
    return r.stdout


def sass_lines(text: str) -> list[str]:
    """The instructions of cuobjdump -sass output (`/*0040*/ ... ;`), without the headers
    that name the function."""
    return re.findall(r"^\s+(/\*[0-9a-f]{4}\*/.*)$", text, re.M)


def kparams(elf_dump: str, symbol: str) -> list[tuple[int, int, int]]:
    """(ordinal, offset, size) of each parameter of `symbol`, from cuobjdump -elf."""
    section = elf_dump.split(f"\n.nv.info.{symbol}\n", 1)[1].split("\n\n", 1)[0]
    found = re.findall(r"Ordinal : (0x[0-9a-f]+)\s+Offset\s*: (0x[0-9a-f]+)\s+"
                       r"Size\s*: (0x[0-9a-f]+)", section)
    return sorted(tuple(int(v, 16) for v in row) for row in found)


def export(kernel, signatures, gpu_code) -> bytes:
    out = io.BytesIO()
    export_kernel(kernel, signatures, out, gpu_code=gpu_code, output_format="cubin")
    return out.getvalue()


# --------------------------------------------------------------------------
# Export: one cubin, every symbol
# --------------------------------------------------------------------------
# In --full (0.3 s): sm_90a into memory; [sm_80-True] keeps the mangled symbols of two
# signatures in one cubin, and test_cuobjdump_sees_one_elf_for_the_target_with_both_symbols
# an sm_90a export into memory, both symbols in it
@pytest.mark.parametrize("gpu_code, to_file", [pytest.param("sm_90a", False,
                                                            marks=pytest.mark.slow),
                                               ("sm_80", True)])
def test_two_signatures_export_into_one_cubin(gpu_code, to_file, tmp_path):
    signatures = [vadd_signature(ct.float32, 1024),
                  vadd_signature(ct.float16, 512, aligned=False)]
    if to_file:
        path = tmp_path / "vector_add.cubin"
        export_kernel(vector_add, signatures, path, gpu_code=gpu_code, output_format="cubin")
        cubin = path.read_bytes()
        assert [p.name for p in tmp_path.iterdir()] == ["vector_add.cubin"]   # no scratch
    else:
        cubin = export(vector_add, signatures, gpu_code)
    assert cubin[:4] == b"\x7fELF"
    symbols = {mangle_kernel_name("vector_add", s) for s in signatures}
    assert symbols == {"vector_add_Ktir1_A1f32_0c1_p16_A1f32_0c1_p16_A1f32_0c1_p16_I1024",
                       "vector_add_Ktir1_A1f16_A1f16_A1f16_I512"}
    assert _elf_functions(cubin) == symbols


def test_cuobjdump_sees_one_elf_for_the_target_with_both_symbols(cuobjdump):
    signatures = [vadd_signature(ct.float32, 1024, symbol="add_f32"),
                  vadd_signature(ct.float16, 512, aligned=False, symbol="add_f16")]
    cubin = export(vector_add, signatures, "sm_90")        # sm_90 means sm_90a
    listed = run_cuobjdump(cuobjdump, cubin, "--list-elf")
    assert len(listed.strip().splitlines()) == 1 and "sm_90a" in listed
    symtab = run_cuobjdump(cuobjdump, cubin, "-elf").split(".section .symtab", 1)[1]
    names = re.findall(r"^\s*0x[0-9a-f]+\s+\S+\s+\S+\s+0x12\s+\S+\s+\S+\s+(\S+)$", symtab, re.M)
    assert sorted(names) == ["add_f16", "add_f32"]               # global functions only
    for symbol in ("add_f16", "add_f32"):
        assert sass_lines(run_cuobjdump(cuobjdump, cubin, "-sass", "-fun", symbol))


@pytest.mark.parametrize("kernel, signatures, gpu_code", [
    pytest.param(softmax, [softmax_signature(ct.float32, 1024),
                           softmax_signature(ct.bfloat16, 2048)], "sm_90a",
                 marks=pytest.mark.slow),
    (vector_add, [vadd_signature(ct.float32, 1024), vadd_signature(ct.bfloat16, 256, False)],
     "sm_80"),
    pytest.param(matmul, [matmul_signature(128, 128, 64), matmul_signature(64, 128, 32)],
                 "sm_90a", marks=pytest.mark.slow),
], ids=["softmax-sm_90a", "vector_add-sm_80", "matmul-tma-sm_90a"])
def test_each_kernel_compiles_as_it_does_alone(cuobjdump, kernel, signatures, gpu_code):
    """The same PTX, line for line but for its names, as the specialization compiled alone:
    the merged module renamed apart what each kernel defines (the shared-memory global
    of softmax and matmul), kept one declaration of what they share (libdevice's expf),
    and kept the TMA kernels' CUtensorMap parameters.  And the same SASS, except for
    matmul: ptxas 13.0 gives one of two register allocations for its 128x128x64 PTX,
    run to run, even alone."""
    target = _target(gpu_code)
    alone = [kernel._load_or_build(_specialize(kernel, s), target, _cache()) for s in signatures]
    symbols = [mangle_kernel_name(kernel.name, s) for s in signatures]
    ptx = _combined_ptx([(sym, ck.artifacts["llvm"]) for sym, ck in zip(symbols, alone)])
    for i, (symbol, ck) in enumerate(zip(symbols, alone)):
        assert entry_ptx(ptx, symbol, f"__tileir_export{i}_") == \
            entry_ptx(ck.artifacts["ptx"], kernel.name, "")
    cubin = export(kernel, signatures, gpu_code)
    for symbol, ck in zip(symbols, alone):
        merged = sass_lines(run_cuobjdump(cuobjdump, cubin, "-sass", "-fun", symbol))
        if kernel is matmul:
            assert any("UTMALDG" in line for line in merged)          # TMA copies
        else:
            assert merged and merged == sass_lines(run_cuobjdump(cuobjdump, ck.cubin, "-sass"))


def entry_ptx(ptx: str, name: str, prefix: str) -> str:
    """The PTX of entry `name`, its own names (name, prefixed globals, labels) made plain."""
    start = ptx.index(f".entry {name}(")
    text = ptx[start:ptx.index("\n}\n", start)]
    text = re.sub(rf"\b{name}\b|\b{name}_param_", lambda m: m.group().replace(name, "K"), text)
    return re.sub(r"\$L__BB\d+_", "$L__BB_", text.replace(prefix, "") if prefix else text)


def _cache():
    from tileir.cache import Cache
    return Cache()


def test_exported_specializations_are_what_launch_compiles():
    """A signature stands for the launches `classify` maps to the same variant."""
    a = np.zeros(100, np.float32)
    launch = vector_add.classify([a, a, a[1:], 1024], gpu=True)
    signature = KernelSignature([array(ct.float32, 1, **ALIGNED_1D)] * 2
                                + [array(ct.float32, 1), 1024], TIR)
    assert _specialize(vector_add, signature) == launch


# --------------------------------------------------------------------------
# kernel_launch_info: the parameter table ptxas wrote
# --------------------------------------------------------------------------
@pytest.mark.parametrize("kernel, signature, gpu_code", [
    (vector_add, vadd_signature(ct.float16, 512, aligned=False), "sm_80"),
    (axpb, KernelSignature([array(ct.float32, 1), array(ct.float32, 1),
                            ScalarConstraint(ct.float16), ScalarConstraint(ct.int64),
                            ScalarConstraint(ct.bool_), 256], TIR), "sm_90a"),
    (axpb, KernelSignature([array(ct.float32, 1), array(ct.float32, 1),
                            ScalarConstraint(ct.bfloat16), ScalarConstraint(ct.int8),
                            ScalarConstraint(ct.bool_), 256], TIR), "sm_80"),
    (matmul, matmul_signature(128, 128, 64), "sm_90a"),
    (weighted_sum, list_signature(ct.float16, aligned=True), "sm_90a"),
], ids=["vector_add", "axpb-f16-i64-bool", "axpb-bf16-i8-bool", "matmul-tma", "list-table"])
def test_launch_info_matches_the_cubins_parameter_table(cuobjdump, kernel, signature,
                                                         gpu_code):
    info = kernel_launch_info(kernel, signature, gpu_code)
    cubin = export(kernel, [signature], gpu_code)
    table = kparams(run_cuobjdump(cuobjdump, cubin, "-elf"), info["symbol"])
    assert table == [(i, s["offset"], s["size"]) for i, s in enumerate(info["slots"])]
    assert info["param_bytes"] == table[-1][1] + table[-1][2]
    assert info["meta"]["name"] == info["symbol"] == mangle_kernel_name(kernel.name, signature)
    if kernel is matmul:
        maps = [s for s in info["slots"] if s["what"] == "tensor_map"]
        assert [s["param"] for s in maps] == ["a", "b", "c"] == \
            [info["meta"]["params"][tm["param"]]["name"] for tm in info["tensor_maps"]]
        assert all(s["size"] == 128 for s in maps)
        assert info["shared_bytes"] > 48 * 1024


def test_launch_info_names_every_slot():
    info = kernel_launch_info(softmax, softmax_signature(ct.float32, 1024), "sm_80")
    assert [(s["param"], s["what"], s.get("axis"), s["ctype"]) for s in info["slots"]] == [
        ("x", "pointer", None, "void*"), ("x", "dim", 0, "int32_t"), ("x", "dim", 1, "int32_t"),
        ("x", "stride", 0, "int64_t"), ("x", "stride", 1, "int64_t"),
        ("y", "pointer", None, "void*"), ("y", "dim", 0, "int32_t"), ("y", "dim", 1, "int32_t"),
        ("y", "stride", 0, "int64_t"), ("y", "stride", 1, "int64_t")]
    assert info["block"][1:] == [1, 1] and info["target"] == "sm_80"
    assert not info["persistent"] and info["grid_scale"] is None and info["tensor_maps"] == []


# --------------------------------------------------------------------------
# Constant shapes and strides compile in
# --------------------------------------------------------------------------
def test_shape_and_stride_constants_become_static_dims():
    x = array(ct.float32, 2, shape_constant=(None, 512), stride_constant=(512, 1),
              base_addr_divisible_by=16)
    (_, kind), *_ = _specialize(softmax, KernelSignature([x, x, 512], TIR))
    assert kind == ArrayParam(ct.float32, 2, aligned=True, static_shape=((1, 512),),
                              static_strides=((0, 512),))     # the unit stride: aligned
    export(softmax, [KernelSignature([x, x, 512], TIR)], "sm_80")


def test_an_annotated_static_dim_must_be_given():
    y = array(ct.float32, 2)
    bare = KernelSignature([array(ct.float32, 2), y, 256], TIR)
    with pytest.raises(TileValueError, match=r"static_shape_dims=\(1,\).*shape_constant\[1\]"):
        export(row_scale, [bare], "sm_80")
    given = KernelSignature([array(ct.float32, 2, shape_constant=(None, 200)), y, 256], TIR)
    assert _specialize(row_scale, given)[0][1].static_shape == ((1, 200),)
    assert _elf_functions(export(row_scale, [given], "sm_80")) == {given.with_mangled_symbol(
        "row_scale").symbol}


def test_a_tuple_of_constants_is_one_constant_parameter():
    a = array(ct.float32, 1)
    signature = KernelSignature([a, a, (256, 2.0)], TIR)
    assert signature.parameters[2] == TupleConstraint([ConstantConstraint(256),
                                                       ConstantConstraint(2.0)])
    assert _specialize(tuple_sum, signature)[2] == ("SIZES", (256, 2.0))
    assert len(_elf_functions(export(tuple_sum, [signature], "sm_80"))) == 1


@pytest.mark.parametrize("dtype, ndim, facts, aligned", [
    (ct.float32, 1, ALIGNED_1D, True),
    (ct.float32, 1, dict(base_addr_divisible_by=8, stride_constant=(1,)), False),
    (ct.float32, 1, dict(base_addr_divisible_by=16), False),             # last stride unknown
    (ct.float16, 2, dict(base_addr_divisible_by=32, stride_constant=(None, 1),
                         stride_divisible_by=(8, 1)), True),
    (ct.float16, 2, dict(base_addr_divisible_by=16, stride_constant=(None, 1),
                         stride_divisible_by=(4, 1)), False),            # 8-byte rows
    (ct.float16, 2, dict(base_addr_divisible_by=16, stride_constant=(24, 1)), True),
    (ct.float32, 2, dict(base_addr_divisible_by=16, stride_constant=(3, 1),
                         shape_constant=(1, None)), True),               # a size-1 dim
    (ct.int8, 0, dict(base_addr_divisible_by=16), True),
    (ct.int8, 0, dict(), False),
    (ct.bool_, 2, dict(base_addr_divisible_by=16, stride_constant=(None, 1),
                       stride_divisible_by=(16, 1)), True),
])
def test_alignment_facts_make_an_aligned_array(dtype, ndim, facts, aligned):
    assert _aligned(ArrayConstraint(dtype, ndim, **facts)) is aligned


# --------------------------------------------------------------------------
# from_kernel_args
# --------------------------------------------------------------------------
def test_from_kernel_args_describes_what_launch_specializes():
    a = np.zeros(300, np.float32)
    args = [a, a, a[1:], 1024]                   # the third array is not aligned
    signature = KernelSignature.from_kernel_args(vector_add, args, TIR)
    assert signature.parameters == (array(ct.float32, 1, **ALIGNED_1D),) * 2 + (
        array(ct.float32, 1), ConstantConstraint(1024))
    assert signature.symbol == mangle_kernel_name("vector_add", signature)
    assert _specialize(vector_add, signature) == vector_add.classify(args, gpu=True)
    named = KernelSignature.from_kernel_args(vector_add, args, TIR, symbol="mine")
    assert named.symbol == "mine" and named.parameters == signature.parameters


def test_from_kernel_args_with_specs_scalars_and_2d_arrays():
    specs = [ct.ArraySpec("float32", 1), ct.ArraySpec("float32", 1), 0.5, 7, True, 128]
    signature = KernelSignature.from_kernel_args(axpb, specs, TIR)
    assert signature.parameters[2:] == (ScalarConstraint(ct.float32),
                                        ScalarConstraint(ct.int32),
                                        ScalarConstraint(ct.bool_), ConstantConstraint(128))
    x = np.zeros((4, 64), ct.bfloat16.numpy)
    two_d = KernelSignature.from_kernel_args(softmax, [x, x, 64], TIR)
    assert two_d.parameters[0] == array(ct.bfloat16, 2, base_addr_divisible_by=16,
                                        stride_constant=(None, 1), stride_divisible_by=(8, 1))
    assert _specialize(softmax, two_d) == softmax.classify([x, x, 64], gpu=True)


def test_from_kernel_args_keeps_annotated_static_dims():
    x = np.zeros((3, 200), np.float32)
    signature = KernelSignature.from_kernel_args(row_scale, [x, x, 256], TIR)
    assert signature.parameters[0].shape_constant == (None, 200)
    assert _specialize(row_scale, signature) == row_scale.classify([x, x, 256], gpu=True)


# --------------------------------------------------------------------------
# Refusals, by name
# --------------------------------------------------------------------------
def test_a_list_whose_length_is_the_launchs_compiles_as_a_table():
    params = _specialize(weighted_sum, list_signature(ct.bfloat16, aligned=True))
    assert params[0] == ("xs", TableListParam(ArrayParam(ct.bfloat16, 2, aligned=True)))
    assert params[0][1].table == ArrayParam(ct.int64, 2)
    ir = weighted_sum._build(params, "tile", None).artifacts["frontend"]
    # one table argument; the loop runs over its rows; xs[-1] is row len(xs) - 1
    assert "%arg0: !tile.array<i64, 2 : i64>, %arg1: !tile.array<f32, 2 : i64>" in ir
    assert re.search(r'%(\w+) = "tile.dim"\(%arg0\) \{axis = 0 : i64\}.*\n.*\n.*'
                     r'scf.for %\w+ = %c0_i32 to %\1', ir)
    assert ir.count('"tile.list_get"(%arg0, ') == 2 and "{aligned = true}" in ir
    for gpu_code in ("sm_90a", "sm_80"):
        info = kernel_launch_info(weighted_sum, list_signature(ct.bfloat16, True), gpu_code)
        table = [s for s in info["slots"] if s["param"] == "xs"]
        assert [(s["what"], s.get("axis")) for s in table] == [
            ("pointer", None), ("dim", 0), ("dim", 1), ("stride", 0), ("stride", 1)]
        assert table[0]["list"] == {"dtype": "bfloat16", "ndim": 2, "row": [
            "pointer", "dim 0", "dim 1", "stride 0", "stride 1"]}


def test_list_constraints_meet_list_parameters_only():
    @ct.kernel
    def annotated(xs: Annotated[list, ct.ListAnnotation(element=ct.ArrayAnnotation(
            static_shape_dims=(0,)))], y, xa: Annotated[ct.Array, ct.ArrayAnnotation()]):
        ct.store(y, index=(0,), tile=ct.load(xs[0], index=(0,), shape=(4,)))

    element = array(ct.float32, 1)
    fixed = array(ct.float32, 1, shape_constant=(4,))
    y = array(ct.float32, 1)
    with pytest.raises(TileTypeError, match="'xa' of kernel 'annotated' is annotated .* but the "
                       "signature describes it with a ListConstraint"):
        _specialize(annotated, KernelSignature([ListConstraint(fixed), y,
                                                ListConstraint(element)], TIR))
    with pytest.raises(TileTypeError, match="'xs' of kernel 'annotated' is annotated as a list "
                       "of arrays .*: describe it with a ListConstraint, got ArrayConstraint"):
        _specialize(annotated, KernelSignature([element, y, element], TIR))
    # the element annotation compiles dim 0 in: the ListConstraint's element must give it
    with pytest.raises(TileValueError, match=r"'xs' of kernel 'annotated' \(its elements\) is "
                       r"annotated static_shape_dims=\(0,\)"):
        _specialize(annotated, KernelSignature([ListConstraint(element), y, element], TIR))
    params = _specialize(annotated, KernelSignature([ListConstraint(fixed), y, element], TIR))
    assert params[0][1] == TableListParam(ArrayParam(ct.float32, 1, static_shape=((0, 4),)))


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_a_table_list_runs_on_the_simulator(target, aligned):
    """The gpu stage's code of a table list on tileir.sim: ragged elements, one element,
    and an empty list (xs[-1] is then outside the table: an empty array).  (The simulator
    takes contiguous arrays; the GPU test passes strided ones.)"""
    from tileir.sim import ListTable, simulate
    params = _specialize(weighted_sum, list_signature(ct.float32, aligned=aligned))
    compiled = weighted_sum._build(params, "gpu", target)
    rng = np.random.default_rng(7)
    shapes = ((33, 72), (64, 128), (5, 8), (20, 152)) if aligned else \
        ((33, 70), (64, 128), (5, 1), (20, 147))        # aligned: rows of 32-byte multiples
    for xs in ([rng.standard_normal(s).astype(np.float32) for s in shapes],
               [rng.standard_normal((9, 152)).astype(np.float32)], []):
        out = np.full((40, 100), np.nan, np.float32)
        simulate(compiled, (2, 2), [ListTable(xs), out, 32, 64])
        np.testing.assert_allclose(out[:64], weighted_sum_reference(xs, (40, 100))[:64],
                                   rtol=1e-5, atol=1e-5)


def test_a_list_table_the_kernel_does_not_take_is_refused_by_the_simulator():
    from tileir.sim import ListTable, SimError, simulate
    compiled = weighted_sum._build(_specialize(weighted_sum, list_signature(ct.float32, False)),
                                   "gpu", "sm_90a")
    out = np.zeros((40, 100), np.float32)
    for xs, message in [([np.zeros((4, 4), np.float32), np.zeros(4, np.float32)],
                         "element 1 of the ListTable for 'xs' is a 1-d float32 array; the "
                         "kernel takes 2-d float32 arrays"),
                        ([np.zeros((4, 4), np.float64)], "is a 2-d float64 array"),
                        ([np.zeros((4, 8), np.float32)[:, ::2]], "is not C-contiguous")]:
        with pytest.raises(SimError, match=re.escape(message)):
            simulate(compiled, (1, 1), [ListTable(xs), out, 32, 64])


@ct.kernel
def tuple_axpy(out, xs: tuple[ct.Array, ct.Array], coef: tuple[float, ct.Constant[int]],
               T: ct.Constant[int]):
    """out = xs[0] * coef[0] + xs[1] * coef[1] (a Constant), tiles of T."""
    i = ct.bid(0)
    a, b = xs
    c, K = coef
    ct.store(out, (i,), ct.load(a, (i,), shape=(T,), padding_mode=ct.PaddingMode.ZERO) * c +
             ct.load(b, (i,), shape=(T,), padding_mode=ct.PaddingMode.ZERO) * K)


def test_runtime_tuples_export_and_compute():
    """cuTile 1.7's tuples passed at launch: `from_kernel_args` gives a TupleConstraint
    of the items' constraints, `export_kernel` compiles it (each runtime item one
    argument, `kernel_launch_info` naming them `xs[0]`...), and the exported code (run
    by the simulator) computes as the launch does."""
    from tileir.sim import simulate
    n = 100
    x, y = (np.arange(n, dtype=np.float32) * k for k in (1, 0.5))
    out = np.zeros(n, np.float32)
    sig = KernelSignature.from_kernel_args(tuple_axpy, (out, (x, y), (2.0, 3), 64), TIR)
    assert sig.parameters[2] == TupleConstraint([ScalarConstraint(ct.float32),
                                                 ConstantConstraint(3)])
    assert isinstance(sig.parameters[1], TupleConstraint) and \
        all(isinstance(c, ArrayConstraint) for c in sig.parameters[1].items)
    assert "_T2_" in sig.symbol and demangle_kernel_name(sig.symbol)[1] == sig
    for gpu_code in ("sm_80", "sm_90a"):
        assert _elf_functions(export(tuple_axpy, [sig], gpu_code)) == {sig.symbol}
    info = kernel_launch_info(tuple_axpy, sig, "sm_80")
    assert [s["param"] for s in info["slots"] if s["what"] in ("pointer", "scalar")] == \
        ["out", "xs[0]", "xs[1]", "coef[0]"]
    compiled = tuple_axpy._build(_specialize(tuple_axpy, sig), "gpu", "sm_90a")
    simulate(compiled, (2, 1, 1), (out, (x, y), (2.0, 3), 64))
    np.testing.assert_array_equal(out, x * 2 + y * 3)


def test_runtime_tuples_are_checked_against_the_annotation():
    a = array(ct.float32, 1)
    signature = KernelSignature([a, a, a, (ScalarConstraint(ct.int32), 1)], TIR)
    with pytest.raises(TileTypeError, match="'TILE' of kernel 'vector_add' is a ct.Constant"):
        export(vector_add, [signature], "sm_90a")
    three = KernelSignature([a, (a, a, a), (ScalarConstraint(ct.float32), 3), 64], TIR)
    with pytest.raises(TileTypeError, match=r"parameter 'xs' of kernel 'tuple_axpy' is "
                       r"annotated tuple\[None, None\], a tuple of 2, but its TupleConstraint "
                       r"has 3 items"):
        export(tuple_axpy, [three], "sm_80")
    runtime_k = KernelSignature([a, (a, a), (ScalarConstraint(ct.float32),
                                             ScalarConstraint(ct.int32)), 64], TIR)
    with pytest.raises(TileTypeError, match=r"parameter 'coef\[1\]' of kernel 'tuple_axpy' is "
                       r"a ct.Constant parameter"):
        export(tuple_axpy, [runtime_k], "sm_80")
    not_tuple = KernelSignature([a, a, (ScalarConstraint(ct.float32), 3), 64], TIR)
    with pytest.raises(TileTypeError, match=r"parameter 'xs' of kernel 'tuple_axpy' is "
                       r"annotated as a tuple .*: describe it with a TupleConstraint, got "
                       r"ArrayConstraint"):
        export(tuple_axpy, [not_tuple], "sm_80")
    listed = KernelSignature([(ListConstraint(a),), a, 1.0, 2, False, 256], TIR)
    with pytest.raises(TileUnsupportedFeatureError, match=r"item 0 of parameter 'x' of kernel "
                       r"'axpb' is a ListConstraint: a list inside a tuple is not exported"):
        export(axpb, [listed], "sm_90a")


@pytest.mark.parametrize("version", ["tileir_bytecode", "13.1"])
def test_tileir_bytecode_is_refused(version):
    extra = {} if version == "tileir_bytecode" else {"bytecode_version": version}
    with pytest.raises(TileUnsupportedFeatureError, match="tileir exports cubins"):
        export_kernel(vector_add, [vadd_signature(ct.float32, 1024)], io.BytesIO(),
                      output_format="tileir_bytecode", **extra)


@pytest.mark.parametrize("convention", [CallingConvention.cutile_python_v1(),
                                        CallingConvention.cutile_python_v2()])
def test_cutile_calling_conventions_are_refused(convention):
    a = array(ct.float32, 1)
    signature = KernelSignature([a, a, a, 1024], convention)
    assert signature.with_mangled_symbol("vector_add").symbol.startswith(
        f"vector_add_K{convention.code}_")
    with pytest.raises(TileUnsupportedFeatureError, match=f"{convention.name}.*tileir_v1"):
        export(vector_add, [signature], "sm_90a")
    with pytest.raises(TileUnsupportedFeatureError, match=convention.name):
        kernel_launch_info(vector_add, signature, "sm_90a")


GOOD = [vadd_signature(ct.float32, 1024)]


@pytest.mark.parametrize("call, error, message", [
    (lambda: export_kernel(vector_add, [], io.BytesIO(), gpu_code="sm_90a",
                           output_format="cubin"), ValueError, "signatures is empty"),
    (lambda: export_kernel(vector_add, GOOD[0], io.BytesIO(), gpu_code="sm_90a",
                           output_format="cubin"), TypeError, "a sequence of KernelSignature"),
    (lambda: export_kernel(vector_add, [GOOD[0], "x"], io.BytesIO(), gpu_code="sm_90a",
                           output_format="cubin"), TypeError, r"signatures\[1\] is a str"),
    (lambda: export_kernel(vector_add.fn, GOOD, io.BytesIO(), gpu_code="sm_90a",
                           output_format="cubin"), TypeError, "expected a @tileir.kernel"),
    (lambda: export_kernel(vector_add, GOOD, io.BytesIO(), gpu_code="sm_90a",
                           output_format="ptx"), ValueError, "'cubin' or 'tileir_bytecode'"),
    (lambda: export_kernel(vector_add, GOOD, io.BytesIO(), gpu_code="sm_90a",
                           output_format="cubin", bytecode_version="13.1"),
     ValueError, "bytecode_version goes with"),
    (lambda: export_kernel(vector_add, GOOD, io.BytesIO(), output_format="tileir_bytecode",
                           bytecode_version="13"), ValueError, "'major.minor'"),
    (lambda: export_kernel(vector_add, GOOD, io.BytesIO(), output_format="cubin"),
     ValueError, "gpu_code is required"),
    (lambda: export_kernel(vector_add, GOOD, io.BytesIO(), gpu_code="sm_100",
                           output_format="cubin"), TileUnsupportedFeatureError,
     "does not compile for sm_100"),
    (lambda: export_kernel(vector_add, GOOD, io.BytesIO(), gpu_code="hopper",
                           output_format="cubin"), ValueError, "must name a GPU"),
    (lambda: export_kernel(vector_add, GOOD, io.StringIO(), gpu_code="sm_90a",
                           output_format="cubin"), TypeError, "text stream"),
    (lambda: export_kernel(vector_add, GOOD, 42, gpu_code="sm_90a", output_format="cubin"),
     TypeError, "a path or a binary file object"),
    (lambda: export(vector_add, [GOOD[0], GOOD[0]], "sm_90a"), ValueError,
     "#0 and #1 both export the symbol"),
    (lambda: export(vector_add, [GOOD[0].with_symbol("1bad")], "sm_90a"), ValueError,
     "cannot name a kernel"),
    (lambda: export(softmax, [GOOD[0].with_symbol("__nv_fast_expf")], "sm_90a"), TileTypeError,
     "takes 3 parameters"),
    (lambda: export(vector_add, [KernelSignature([array(ct.float32, 1)] * 3
                                                 + [ScalarConstraint(ct.int32)], TIR)],
                    "sm_90a"), TileTypeError, "'TILE' of kernel 'vector_add' is a ct.Constant"),
    (lambda: export(axpb, [KernelSignature([array(ct.float32, 1)] * 2 + [1.0, 2, False, 256],
                                           TIR)], "sm_90a"),
     TileTypeError, "'a' of kernel 'axpb' is not a ct.Constant parameter"),
    (lambda: export(vector_add, [KernelSignature([array(ct.float32, 1)] * 3 + [1.5], TIR)],
                    "sm_90a"), TileTypeError, r"Constant\[int\] but got float"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_export_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_a_symbol_that_names_what_the_kernel_calls_is_refused():
    with pytest.raises(TileValueError, match="'__nv_fast_expf' is the name of a function"):
        export(softmax, [softmax_signature(ct.float32, 1024).with_symbol("__nv_fast_expf")],
               "sm_90a")


# --------------------------------------------------------------------------
# Constraint and signature validation
# --------------------------------------------------------------------------
@pytest.mark.parametrize("make, error, message", [
    (lambda: ScalarConstraint("float32"), TypeError, "tileir dtype"),
    (lambda: ScalarConstraint(np.float32), TypeError, "tileir dtype"),
    (lambda: ArrayConstraint(np.float32, 1), TypeError, "tileir dtype"),
    (lambda: ArrayConstraint(ct.float32, 1.0), TypeError, "ndim must be an int"),
    (lambda: ArrayConstraint(ct.float32, True), TypeError, "ndim must be an int"),
    (lambda: ArrayConstraint(ct.float32, -1), ValueError, "ndim must be >= 0"),
    (lambda: ArrayConstraint(ct.float32, 1, index_dtype=ct.int16), ValueError, "index_dtype"),
    (lambda: ArrayConstraint(ct.float32, 2, stride_constant=(1,)), ValueError,
     r"stride_constant \(1,\) has 1 entries but ndim is 2"),
    (lambda: ArrayConstraint(ct.float32, 2, shape_divisible_by=(1, 2, 4)), ValueError,
     "has 3 entries"),
    (lambda: ArrayConstraint(ct.float32, 2, stride_constant="11"), TypeError,
     "one entry per dim"),
    (lambda: ArrayConstraint(ct.float32, 2, stride_constant=(None, 1.0)), TypeError,
     r"stride_constant\[1\] must be an int or None"),
    (lambda: ArrayConstraint(ct.float32, 2, shape_constant=(-1, None)), ValueError,
     r"shape_constant\[0\] must be >= 0"),
    (lambda: ArrayConstraint(ct.float32, 2, stride_divisible_by=0), ValueError,
     "stride_divisible_by must be > 0"),
    (lambda: ArrayConstraint(ct.float32, 2, shape_divisible_by=(4, -2)), ValueError,
     r"shape_divisible_by\[1\] must be > 0"),
    (lambda: ArrayConstraint(ct.float32, 1, stride_divisible_by=(2.0,)), TypeError,
     r"stride_divisible_by\[0\] must be an int"),
    (lambda: ArrayConstraint(ct.float32, 1, base_addr_divisible_by=0), ValueError,
     "base_addr_divisible_by must be > 0"),
    (lambda: ArrayConstraint(ct.float32, 1, stride_constant=(3,), stride_divisible_by=2),
     ValueError, r"stride_constant\[0\] = 3 is not divisible by stride_divisible_by\[0\] = 2"),
    (lambda: ArrayConstraint(ct.float32, 1, shape_constant=(6,), shape_divisible_by=4),
     ValueError, r"shape_constant\[0\] = 6 is not divisible by shape_divisible_by\[0\] = 4"),
    (lambda: ArrayConstraint(ct.float32, 1, stride_constant=(-1,), stride_lower_bound_incl=0),
     ValueError, r"stride_constant\[0\] = -1 is below stride_lower_bound_incl\[0\] = 0"),
    (lambda: ArrayConstraint(ct.float32, 1, alias_groups="g"), TypeError, "not one string"),
    (lambda: ArrayConstraint(ct.float32, 1, alias_groups=("g", 1)), TypeError,
     "group names are strings"),
    (lambda: ArrayConstraint(ct.float32, 1, alias_groups=("g", "g")), ValueError,
     "listed twice"),
    (lambda: ListConstraint(ScalarConstraint(ct.int32)), TypeError, "must be an ArrayConstraint"),
    (lambda: TupleConstraint(5), TypeError, "sequence of item constraints"),
    (lambda: TupleConstraint(["x"]), TypeError, "is not a parameter constraint"),
    (lambda: ConstantConstraint("x"), TypeError, "bool, int or float"),
    (lambda: ConstantConstraint(None), TypeError, "bool, int or float"),
    (lambda: KernelSignature([1], "tileir_v1"), TypeError, "must be a CallingConvention"),
    (lambda: KernelSignature([1], TIR, symbol=5), TypeError, "symbol must be a str"),
    (lambda: KernelSignature("abc", TIR), TypeError, "sequence of constraints"),
    (lambda: KernelSignature([ct.float32], TIR), TypeError, "not a parameter constraint"),
    (lambda: KernelSignature([ArrayConstraint(ct.float32, 1, alias_groups=("io",))], TIR),
     ValueError, "alias group 'io' is named by one parameter only"),
    (lambda: KernelSignature([ArrayConstraint(ct.float32, 1, alias_groups=("io",)),
                              ListConstraint(ArrayConstraint(ct.float32, 1),
                                             alias_groups=("io",))], TIR),
     ValueError, "joins an ArrayConstraint and a ListConstraint"),
    (lambda: KernelSignature([(1, 2)], CallingConvention.cutile_python_v1()), ValueError,
     "has a tuple, which calling convention cutile_python_v1 cannot express"),
    (lambda: KernelSignature([ArrayConstraint(ct.float32, 1, shape_constant=4)],
                             CallingConvention.cutile_python_v1()), ValueError,
     "constant shape"),
    (lambda: CallingConvention.from_code("t9"), ValueError, "unknown calling convention code"),
    (lambda: CallingConvention.from_code(1), TypeError, "is a str"),
])
def test_validation_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_constant_entries_subsume_weaker_facts():
    a = ArrayConstraint(ct.float16, 2, stride_constant=(64, 1), stride_divisible_by=(8, 1),
                        stride_lower_bound_incl=0, shape_constant=(None, 32),
                        shape_divisible_by=(4, 8))
    assert a.stride_divisible_by == (1, 1) and a.stride_lower_bound_incl == (None, None)
    assert a.shape_divisible_by == (4, 1)
    assert ArrayConstraint(ct.float32, 3, stride_divisible_by=4).stride_divisible_by == (4,) * 3
    assert ArrayConstraint(ct.float32, 2, alias_groups=["x"]).alias_groups == ("x",)


def test_constant_equality_follows_type_and_bits():
    assert ConstantConstraint(1) != ConstantConstraint(True) != ConstantConstraint(1.0)
    assert ConstantConstraint(1) != ConstantConstraint(1.0)
    assert ConstantConstraint(math.nan) == ConstantConstraint(float("nan"))
    assert ConstantConstraint(0.0) != ConstantConstraint(-0.0)
    assert ConstantConstraint(np.int64(3)) == ConstantConstraint(3)
    assert len({ConstantConstraint(2), ConstantConstraint(2), ConstantConstraint(2.0)}) == 2
    sig = KernelSignature([1, True, 1.0, (2, (3,))], TIR)
    assert sig.parameters == (ConstantConstraint(1), ConstantConstraint(True),
                              ConstantConstraint(1.0),
                              TupleConstraint([ConstantConstraint(2),
                                               TupleConstraint([ConstantConstraint(3)])]))


def test_calling_conventions():
    conventions = [CallingConvention.cutile_python_v1(), CallingConvention.cutile_python_v2(),
                   CallingConvention.tileir_v1()]
    assert [(c.name, c.code, c.version) for c in conventions] == [
        ("cutile_python_v1", "t1", 1), ("cutile_python_v2", "t2", 2), ("tileir_v1", "tir1", 1)]
    assert all(CallingConvention.from_code(c.code) == c for c in conventions)
    assert repr(TIR) == "CallingConvention('tileir_v1', 'tir1')"


def test_signature_with_symbol():
    signature = vadd_signature(ct.float32, 1024)
    assert signature.symbol is None
    assert signature.with_symbol("k").symbol == "k"
    assert signature.with_symbol("k").with_symbol(None) == signature
    assert signature.with_mangled_symbol("vector_add").symbol == \
        mangle_kernel_name("vector_add", signature)


# --------------------------------------------------------------------------
# Name mangling
# --------------------------------------------------------------------------
NAMES = ["vector_add", "k", "_", "my_kernel_2", "K_K", "a_K3_b", "x__", "_Ktir1", "f2_0_Kt1"]
SIGNATURES = [
    KernelSignature([], TIR),
    vadd_signature(ct.float32, 1024),
    vadd_signature(ct.bfloat16, 256, aligned=False),
    KernelSignature([ScalarConstraint(d) for d in (ct.bool_, ct.int8, ct.uint64, ct.float16,
                                                   ct.bfloat16, ct.float64, ct.tfloat32,
                                                   ct.float8_e4m3fn, ct.float8_e5m2)], TIR),
    KernelSignature([True, False, 0, -7, 2**70, 0.5, -0.0, math.inf, math.nan, -1e-300,
                     (), (1, (2.5, (False,)))], TIR),
    KernelSignature([ArrayConstraint(ct.float16, 12, index_dtype=ct.int64,
                                     stride_lower_bound_incl=[0] * 11 + [None],
                                     may_alias_internally=True,
                                     shape_constant=[None] * 10 + [3, 0],
                                     stride_constant=[None] * 11 + [-2],
                                     shape_divisible_by=[16] * 10 + [1, 1],
                                     stride_divisible_by=2, base_addr_divisible_by=128,
                                     alias_groups=("g0",)),
                     ArrayConstraint(ct.uint8, 0, index_dtype=ct.uint32, alias_groups=("g0",)),
                     ScalarConstraint(ct.int32)], TIR),
    KernelSignature([ListConstraint(ArrayConstraint(ct.float32, 2, alias_groups=("g1",)),
                                    alias_groups=("g0",), elements_may_alias=True),
                     ListConstraint(ArrayConstraint(ct.int32, 1, alias_groups=("g1", "g2"))),
                     (ArrayConstraint(ct.float32, 1, alias_groups=("g2",)), 3),
                     ListConstraint(ArrayConstraint(ct.int8, 3), alias_groups=("g0",))],
                    CallingConvention.cutile_python_v2()),
    KernelSignature([ArrayConstraint(ct.float32, 2, stride_constant=(None, 1)), 64],
                    CallingConvention.cutile_python_v1()),
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("index", range(len(SIGNATURES)))
def test_mangling_round_trips(name, index):
    signature = SIGNATURES[index]
    symbol = mangle_kernel_name(name, signature)
    assert re.fullmatch(r"[A-Za-z0-9_]+", symbol) and symbol.startswith(name + "_K")
    assert demangle_kernel_name(symbol) == (name, signature.with_symbol(symbol))
    assert mangle_kernel_name(*demangle_kernel_name(symbol)) == symbol


def test_mangled_names_tell_signatures_apart():
    symbols = {mangle_kernel_name("k", s) for s in SIGNATURES}
    symbols |= {mangle_kernel_name("k", KernelSignature([c], TIR))
                for c in (1, True, 1.0, (1,), -1, ScalarConstraint(ct.int32))}
    assert len(symbols) == len(SIGNATURES) + 6


def test_alias_groups_come_back_numbered_in_order_of_appearance():
    signature = KernelSignature([ArrayConstraint(ct.float32, 1, alias_groups=("out", "in")),
                                 ArrayConstraint(ct.float32, 1, alias_groups=("in",)),
                                 ArrayConstraint(ct.float32, 1, alias_groups=("out",))], TIR)
    symbol = mangle_kernel_name("k", signature)
    assert symbol == "k_Ktir1_A1f32_g0g1_A1f32_g1_A1f32_g0"
    _, back = demangle_kernel_name(symbol)
    assert [p.alias_groups for p in back.parameters] == [("g0", "g1"), ("g1",), ("g0",)]


@pytest.mark.parametrize("symbol, message", [
    ("vector_add", "no '_K<convention>'"),
    ("_Ktir1", "no '_K<convention>'"),
    ("k_Kzz9", "unknown calling convention code 'zz9'"),
    ("k_K", "expected a calling convention code"),
    ("k_Ktir1_", "expected a parameter"),
    ("k_Ktir1_Q", "expected a parameter"),
    ("k_Ktir1_S", "expected a dtype"),
    ("k_Ktir1_Sf323", "expected '_' before the next parameter"),
    ("k_Ktir1_A1f32_1c1", "dim 1 of a 1-d array"),
    ("k_Ktir1_I05", "not in canonical form"),
    ("k_Ktir1_In0", "not in canonical form"),
    ("k_Ktir1_A1f32_0c4v2", "not in canonical form"),
    ("k_Ktir1_A2f32_1c1_0c1", "not in canonical form"),
    ("k_Ktir1_A1f32_p1", "not in canonical form"),
    ("k_Ktir1_A1f32_0", "not in canonical form"),
    ("k_Ktir1_A1f32_g1_A1f32_g1", "alias group g1 comes before g0"),
    ("k_Ktir1_A1f32_g0", "'g0' is named by one parameter only"),
    ("k_Ktir1_A1f32_0c3v2", "not divisible"),
    ("k_Ktir1_T2_I1", "expected '_' before the next tuple item"),
    ("k_Ktir1_F3ff0", "expected 16 hex digits"),
    ("k_Kt1_T1_I1", "cutile_python_v1 cannot express"),
])
def test_demangling_refuses_what_mangling_cannot_produce(symbol, message):
    with pytest.raises(ValueError, match=message):
        demangle_kernel_name(symbol)


@pytest.mark.parametrize("name", ["", "2k", "k-1", "kérnel", "a b"])
def test_mangling_needs_an_identifier(name):
    with pytest.raises(ValueError, match="ASCII identifier"):
        mangle_kernel_name(name, SIGNATURES[1])


# --------------------------------------------------------------------------
# GPU: launch the exported symbols
# --------------------------------------------------------------------------
_PACK = {"void*": "<Q", "int32_t": "<i", "int64_t": "<q", "float": "<f"}


def _pack(info: dict, args: list) -> ctypes.Array:
    """The parameter buffer `info["slots"]` describes, for torch tensors and floats."""
    buffer = ctypes.create_string_buffer(info["param_bytes"])
    by_name = dict(zip([p["name"] for p in info["meta"]["params"]], args))
    for s in info["slots"]:
        value = by_name[s["param"]]
        if s["what"] == "pointer":
            value = value.data_ptr()
        elif s["what"] == "dim":
            value = value.shape[s["axis"]]
        elif s["what"] == "stride":
            value = value.stride(s["axis"])
        struct.pack_into(_PACK[s["ctype"]], buffer, s["offset"], value)
    return buffer


@pytest.mark.gpu
def test_exported_symbols_launch_and_compute():
    torch = pytest.importorskip("torch")
    from tileir.runtime import driver, launcher
    major, _ = torch.cuda.get_device_capability()
    if major not in (8, 9):
        pytest.skip(f"tileir compiles for sm_80 and sm_90a, not compute capability {major}.x")
    gpu_code = "sm_90a" if major == 9 else "sm_80"
    signatures = [vadd_signature(ct.float32, 1024), vadd_signature(ct.float16, 512, False)]
    cubin = export(vector_add, signatures, gpu_code)
    n = 5000
    for signature, dtype, offset in zip(signatures, (torch.float32, torch.float16), (0, 1)):
        info = kernel_launch_info(vector_add, signature, gpu_code)
        a, b = (torch.randn(n + offset, device="cuda", dtype=dtype)[offset:] for _ in "ab")
        grid = (math.ceil(n / signature.parameters[3].value), 1, 1)
        # tileir's launcher, told the exported symbol
        c = torch.full((n,), math.nan, device="cuda", dtype=dtype)
        launcher.launch(cubin, info["meta"], grid, [a, b, c])
        torch.testing.assert_close(c, a + b)
        # the bare driver, with the parameter buffer the slots describe
        c = torch.full((n,), math.nan, device="cuda", dtype=dtype)
        buffer = _pack(info, [a, b, c])
        pointers = (ctypes.c_void_p * len(info["slots"]))(
            *(ctypes.addressof(buffer) + s["offset"] for s in info["slots"]))
        device = torch.cuda.current_device()
        function = driver.get_function(driver.load_module(cubin, device), info["symbol"], device)
        with driver.device_context(device):
            driver.launch_kernel(function, grid, tuple(info["block"]), info["shared_bytes"], 0,
                                 ctypes.addressof(pointers), info["symbol"])
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a + b)


def list_table(torch, xs):
    """The table of a list of CUDA tensors (kernel_launch_info's `list`): one int64 row of
    address, dims and strides per tensor."""
    rows = [[x.data_ptr(), *x.shape, *x.stride()] for x in xs]
    ndim = xs[0].dim() if xs else 2
    return torch.tensor(rows, dtype=torch.int64, device="cuda").reshape(len(xs), 1 + 2 * ndim)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, aligned", [("float16", True), ("bfloat16", False),
                                            ("float32", False)])
def test_exported_list_of_run_time_length_launches_and_computes(dtype, aligned):
    """A ListConstraint parameter exported once runs on lists of any length, ragged and
    strided elements, through tileir's launcher and the bare driver."""
    torch = pytest.importorskip("torch")
    from tileir.runtime import driver, launcher
    major, _ = torch.cuda.get_device_capability()
    if major not in (8, 9):
        pytest.skip(f"tileir compiles for sm_80 and sm_90a, not compute capability {major}.x")
    gpu_code = "sm_90a" if major == 9 else "sm_80"
    signature = list_signature(getattr(ct, dtype), aligned)
    cubin = export(weighted_sum, [signature], gpu_code)
    info = kernel_launch_info(weighted_sum, signature, gpu_code)
    tdt = getattr(torch, dtype)
    base = torch.randn(300, 520, device="cuda").to(tdt)
    lists = [[torch.randn(s, device="cuda").to(tdt) for s in ((70, 136), (1, 8), (100, 200))],
             [base[7:90, 8:208]] + ([] if aligned else [base[1::3, 5:400]]),   # strided views
             [torch.randn(64, 64, device="cuda").to(tdt)] * 3,                 # one array thrice
             []]
    device = torch.cuda.current_device()
    function = driver.get_function(driver.load_module(cubin, device), info["symbol"], device)
    for xs in lists:
        table = list_table(torch, xs)
        ref = torch.from_numpy(weighted_sum_reference(
            [x.float().cpu().numpy() for x in xs], (90, 190)))
        grid = (math.ceil(90 / 32), math.ceil(190 / 64), 1)
        out = torch.full((90, 190), math.nan, device="cuda")
        launcher.launch(cubin, info["meta"], grid, [table, out])
        torch.testing.assert_close(out.cpu().double(), ref, rtol=2e-3, atol=2e-3)
        out = torch.full((90, 190), math.nan, device="cuda")
        buffer = _pack(info, [table, out])
        pointers = (ctypes.c_void_p * len(info["slots"]))(
            *(ctypes.addressof(buffer) + s["offset"] for s in info["slots"]))
        with driver.device_context(device):
            driver.launch_kernel(function, grid, tuple(info["block"]), info["shared_bytes"], 0,
                                 ctypes.addressof(pointers), info["symbol"])
        torch.cuda.synchronize()
        torch.testing.assert_close(out.cpu().double(), ref, rtol=2e-3, atol=2e-3)
