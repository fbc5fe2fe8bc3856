"""The warm tile-opt that lit's RUN lines reach (tools/tile_opt_server.py): what a
client prints and how it exits are what a fresh `python -m tileir.tools.tile_opt`
prints and how it exits, whatever the input, the working directory, stdin or the
environment; a run ended by a signal ends its client the same way; a client that
goes away stops its run; with no server the client runs tile-opt itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tileir.tools import tile_opt_server

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the warm tile-opt runs on Linux only")

FRESH = [sys.executable, "-m", "tileir.tools.tile_opt"]
CLIENT = [sys.executable, "-I", "-S", tile_opt_server.__file__]

KERNEL = """\
func.func @kernel(%a: !tile.array<f32, 1 : i64>) attributes {tile.kernel} {
  %b = "tile.bid"() {axis = 0 : i64} : () -> i32
  %t = "tile.load"(%a, %b) {tile_shape = array<i64: 16>, padding = "zero"} : (!tile.array<f32, 1 : i64>, i32) -> tensor<16xf32>
  %u = arith.addf %t, %t : tensor<16xf32>
  %v = arith.addf %t, %t : tensor<16xf32>
  %w = arith.addf %u, %v : tensor<16xf32>
  "tile.store"(%a, %w, %b) : (!tile.array<f32, 1 : i64>, tensor<16xf32>, i32) -> ()
  return
}
"""
# -split-input-file with a good chunk, then one that fails verification
SPLIT = KERNEL + '// -----\n"tile.bid"() {axis = 5 : i64} : () -> i32\n'


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("server") / "socket")
    proc = subprocess.Popen([sys.executable, "-m", "tileir.tools.tile_opt_server", path],
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not os.path.exists(path):
        assert proc.poll() is None and time.monotonic() < deadline, "no server"
        time.sleep(0.01)
    yield proc, path
    proc.terminate()
    assert proc.wait(timeout=30) == 0


def run(cmd, args, cwd, env=None, stdin=b""):
    return subprocess.run([*cmd, *args], input=stdin, capture_output=True, cwd=cwd,
                          env=env, timeout=300)


# Each case starts a fresh tile-opt too (0.5 s of CPU): the fast tier runs three
slow = pytest.mark.slow


@pytest.mark.parametrize("args, stdin", [
    (["-", "--tile-cse", "--print-ir-after-all"], KERNEL.encode()),    # stdin; stderr too
    (["s.mlir", "-split-input-file", "--tile-cse"], b""),              # a diagnostic, exit 1
    (["k.mlir", "--no-such-flag"], b""),                               # usage: exit 2
    pytest.param(["k.mlir", "--tile-cse"], b"", marks=slow),           # IR on stdout
    pytest.param(["k.mlir", "--tile-cse", "-o", "out/k.mlir"], b"",    # relative to the cwd
                 marks=slow),
    pytest.param(["missing.mlir"], b"", marks=slow),                   # the tool's error
])
def test_a_client_prints_and_exits_as_a_fresh_tile_opt(server, tmp_path, args, stdin):
    results = []
    for cmd in (FRESH, CLIENT):
        cwd = tmp_path / ("fresh" if cmd is FRESH else "client")
        (cwd / "out").mkdir(parents=True)
        (cwd / "k.mlir").write_text(KERNEL)
        (cwd / "s.mlir").write_text(SPLIT)
        env = {**os.environ, tile_opt_server.SERVER_ENV: server[1]}
        proc = run(cmd, args, cwd, env, stdin)
        written = (cwd / "out" / "k.mlir").read_bytes() if "-o" in args else None
        # the file names differ by the folder only
        results.append((proc.returncode, proc.stdout, proc.stderr.replace(
            str(cwd).encode(), b"DIR"), written))
    assert results[0] == results[1]
    assert results[0][0] in (0, 1, 2)


def test_the_client_has_the_callers_environment(server, tmp_path):
    (tmp_path / "k.mlir").write_text(KERNEL)
    env = {**os.environ, tile_opt_server.SERVER_ENV: server[1],
           "TILEIR_PTXAS": str(tmp_path / "no-ptxas")}
    proc = run(CLIENT, ["k.mlir", "--stop-after=cubin", "--emit=cubin", "-o", "k.cubin"],
               tmp_path, env)
    assert proc.returncode == 1
    assert f"TILEIR_PTXAS={tmp_path / 'no-ptxas'} does not exist" in proc.stderr.decode()


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(c) for c in text.split()]


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux's /proc")
def test_a_signal_ends_the_client_as_it_ended_the_run(server):
    """A run that reads stdin waits; killing it with SIGSEGV (a crash in MLIR, say) ends
    the client with SIGSEGV; a client killed while its run waits stops the run."""
    env = {**os.environ, tile_opt_server.SERVER_ENV: server[1]}
    for victim in ("run", "client"):
        client = subprocess.Popen([*CLIENT, "-"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        deadline = time.monotonic() + 60
        while not _children(server[0].pid):
            assert time.monotonic() < deadline, "the server started no run"
            time.sleep(0.01)
        (child,) = _children(server[0].pid)
        if victim == "run":
            os.kill(child, signal.SIGSEGV)
            assert client.wait(timeout=60) == -signal.SIGSEGV
        else:
            client.kill()
            client.wait(timeout=60)
            while child in _children(server[0].pid):
                assert time.monotonic() < deadline, "the run outlived its client"
                time.sleep(0.01)
        client.stdin.close()
        client.stdout.close()
        client.stderr.close()


def test_without_a_server_the_client_runs_tile_opt_itself(tmp_path):
    (tmp_path / "k.mlir").write_text(KERNEL)
    env = {**os.environ, tile_opt_server.SERVER_ENV: str(tmp_path / "no-socket")}
    fresh, client = (run(cmd, ["k.mlir", "--tile-cse"], tmp_path, env) for cmd in (FRESH, CLIENT))
    assert client.returncode == fresh.returncode == 0
    assert client.stdout == fresh.stdout and "tile.load" in client.stdout.decode()
