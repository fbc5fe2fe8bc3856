// Inputs that are not IR at all: each gives one located error, exit status 1,
// never a traceback or a crash.  The files are written by the RUN lines.
//
// RUN: %python -c "open(r'%t.latin1', 'wb').write(b'func.func @f() {\n  // caf\xe9\n}\n')"
// RUN: not tile-opt %t.latin1 2>&1 | FileCheck %s --check-prefix=UTF8 --implicit-check-not=Traceback
// UTF8: malformed-input.mlir.tmp.latin1:2:9: error: the input is not valid UTF-8 (byte 0xe9); is it a binary file?
//
// RUN: %python -c "open(r'%t.nul', 'wb').write(b'func.func @f() {\n  return\x00\n}\n')"
// RUN: not tile-opt %t.nul 2>&1 | FileCheck %s --check-prefix=NUL --implicit-check-not=Traceback
// NUL: malformed-input.mlir.tmp.nul:2:9: error: the input contains a NUL byte; is it a binary file?
//
// RUN: %python -c "open(r'%t.mlirbc', 'wb').write(b'ML\xefR\x00\x01\x02')"
// RUN: not tile-opt %t.mlirbc 2>&1 | FileCheck %s --check-prefix=BYTECODE --implicit-check-not=Traceback
// BYTECODE: malformed-input.mlir.tmp.mlirbc:1:1: error: MLIR bytecode is not supported: tile-opt reads textual IR
//
// RUN: %python -c "open(r'%t.binary', 'wb').write(bytes(range(1, 32)) * 4)"
// RUN: not tile-opt %t.binary 2>&1 | FileCheck %s --check-prefix=BINARY --implicit-check-not=Traceback
// BINARY: malformed-input.mlir.tmp.binary:1:1: error: unexpected character
//
// Deep nesting would overflow MLIR's parser stack (a segfault): refused first.
// RUN: %python -c "open(r'%t.deep', 'w').write('func.func @f() {\n' + 'scf.execute_region {' * 5000 + '\n}\n')"
// RUN: not tile-opt %t.deep 2>&1 | FileCheck %s --check-prefix=DEEP --implicit-check-not=Traceback
// DEEP: malformed-input.mlir.tmp.deep:2:5120: error: brackets nested more than 256 deep; this is not Tile IR (and would overflow the parser's stack)
//
// RUN: not tile-opt < /dev/null 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: <stdin>:1:1: error: nothing to parse: expected operations (e.g. a func.func), found only blank lines and comments
//
// RUN: not tile-opt %t.does-not-exist 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: tile-opt: error: cannot read '{{.*}}does-not-exist': No such file or directory
//
// RUN: not tile-opt %S 2>&1 | FileCheck %s --check-prefix=DIRECTORY
// DIRECTORY: tile-opt: error: cannot read '{{.*}}tile-opt': Is a directory
//
// This file itself holds only comments:
// RUN: not tile-opt %s 2>&1 | FileCheck %s --check-prefix=COMMENTS
// COMMENTS: malformed-input.mlir:1:1: error: nothing to parse
