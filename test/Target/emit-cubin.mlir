// REQUIRES: ptxas
// RUN: tile-opt %s --stop-after=cubin | FileCheck %s
// RUN: tile-opt %s --stop-after=ptx | tile-opt --tile-emit-cubin | FileCheck %s --check-prefix=PASS
// RUN: tile-opt %s --stop-after=cubin --emit=cubin -o %t.sm80.cubin | count 0
// RUN: tile-opt %s --emit=cubin --target=sm_90a > %t.sm90a.cubin
// RUN: %python -c "import struct, sys; [print('magic={} class={}-bit machine={} sm={}'.format(d[:4].hex(), 32 * d[4], struct.unpack_from('<H', d, 18)[0], struct.unpack_from('<I', d, 48)[0] >> 8 & 255)) for d in (open(f, 'rb').read() for f in sys.argv[1:])]" %t.sm80.cubin %t.sm90a.cubin | FileCheck %s --check-prefix=ELF
// RUN: %if cuobjdump %{ cuobjdump -sass %t.sm80.cubin | FileCheck %s --check-prefix=SASS --implicit-check-not=LDL --implicit-check-not=STL %}

// tile-emit-cubin assembles the PTX with ptxas for the module's target: the
// gpu.binary then holds an ELF cubin (`bin`) and the module keeps ptxas'
// resource report.  --emit=cubin writes the raw bytes (to -o FILE or to
// stdout, but never to a terminal); alone, it runs the stages up to 'cubin'.

// CHECK:      module attributes {gpu.container_module,
// CHECK-SAME:   tile.ptxas_report = "ptxas info    : 0 bytes gmem\0Aptxas info    : Compiling entry function 'rowsum' for 'sm_80'\0Aptxas info    : Function properties for rowsum\0A    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\0Aptxas info    : Used {{[0-9]+}} registers, used 1 barriers, {{[0-9]+}} bytes smem, {{[0-9]+}} bytes cmem[0]
// CHECK-SAME:   tile.stage = "cubin", tile.target = "sm_80"}
// CHECK-NEXT:   gpu.binary @tileir_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">, bin = "\7FELF\02\01\01
// CHECK-NOT:    assembly

// The pass on its own replaces the PTX object (the module stays at the stage
// the input recorded: only stages record themselves).
// PASS:      tile.ptxas_report = "ptxas info    : 0 bytes gmem\0Aptxas info    : Compiling entry function 'rowsum' for 'sm_80'
// PASS-SAME: tile.stage = "ptx", tile.target = "sm_80"}
// PASS-NEXT:   gpu.binary @tileir_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">, bin = "\7FELF

// The files are 64-bit ELF for CUDA (machine 190, EM_CUDA) for the target's
// SM (--target overrides the module's tile.target before the 'llvm' stage).
// ELF:      magic=7f454c46 class=64-bit machine=190 sm=80
// ELF-NEXT: magic=7f454c46 class=64-bit machine=190 sm=90

// With cuobjdump: SASS for sm_80, 16-byte loads, no local-memory spills.
// SASS:      code for sm_80
// SASS:      Function : rowsum
// SASS:      LDG.E.128
// SASS:      SHFL.BFLY
// SASS:      BAR.SYNC
// SASS:      EXIT

#row = #tile.blocked<array<i64: 1, 8>, array<i64: 1, 32>, array<i64: 1, 2>, array<i64: 1, 0>>
module attributes {tile.stage = "layout", tile.target = "sm_80"} {
  func.func @rowsum(%x: !tile.array<bf16, 2 : i64> {tile.aligned}, %out: !tile.array<f32, 1 : i64>) attributes {tile.kernel, tile.num_warps = 2 : i32, tile.cache_hints = false} {
    %c0 = arith.constant 0 : i32
    %row = "tile.bid"() {axis = 0 : i64} : () -> i32
    %t = "tile.load"(%x, %row, %c0) {padding = "zero", tile_shape = array<i64: 1, 512>} : (!tile.array<bf16, 2 : i64>, i32, i32) -> tensor<1x512xbf16, #row>
    %f = arith.extf %t : tensor<1x512xbf16, #row> to tensor<1x512xf32, #row>
    %s = "tile.reduce"(%f) {axis = 1 : i64, kind = "sum"} : (tensor<1x512xf32, #row>) -> tensor<1xf32, #tile.slice<1 : i64, #row>>
    "tile.store"(%out, %s, %row) : (!tile.array<f32, 1 : i64>, tensor<1xf32, #tile.slice<1 : i64, #row>>, i32) -> ()
    return
  }
}
