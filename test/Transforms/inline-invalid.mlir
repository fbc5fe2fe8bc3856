// RUN: tile-opt %s -split-input-file -verify-diagnostics --tile-inline

func.func private @self(%x: i32) -> i32 attributes {tile.function} {
  // expected-error @+1 {{recursive call of tile.function @self cannot be inlined (call chain @self -> @self); tile helpers must not recurse}}
  %y = func.call @self(%x) : (i32) -> i32
  return %y : i32
}

// -----

func.func private @ping(%x: i32) -> i32 attributes {tile.function} {
  %y = func.call @pong(%x) : (i32) -> i32
  return %y : i32
}

func.func private @pong(%x: i32) -> i32 attributes {tile.function} {
  // expected-error @+1 {{recursive call of tile.function @ping cannot be inlined (call chain @ping -> @pong -> @ping)}}
  %y = func.call @ping(%x) : (i32) -> i32
  return %y : i32
}

func.func @kernel(%x: i32) attributes {tile.kernel} {
  %r = func.call @ping(%x) : (i32) -> i32
  return
}

// -----

func.func private @declared(%x: i32) -> i32 attributes {tile.function}

func.func @kernel(%x: i32) attributes {tile.kernel} {
  // expected-error @+1 {{cannot inline @declared: it has no body; tile.function helpers are single-block}}
  %r = func.call @declared(%x) : (i32) -> i32
  return
}
