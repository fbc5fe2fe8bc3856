"""A warm `tile-opt` for the lit suite: one process imports it once, every RUN line forks it.

`tile-opt` spends about 0.5 s of CPU importing NumPy, the MLIR bindings and tileir
before it reads its input, and the lit suite starts it ~165 times.  test/lit.cfg.py
starts this server once per lit run and points the RUN lines' `tile-opt` at the
client below instead (`python -I -S tile_opt_server.py ARGS`, ~20 ms: the standard
library only).  The client hands the server its argv, working directory,
environment and its stdin/stdout/stderr themselves (SCM_RIGHTS); the server forks
a child per request, which takes those over and runs `tile_opt.main` exactly as a
fresh `python -m tileir.tools.tile_opt` would: output goes straight to the
client's files, diagnostics to its stderr, and the exit status (a signal too) comes
back to the client, which exits with it.  Requests run concurrently (one child
each), so parallel lit workers are served in parallel.

Why a fork per request, not one long-lived interpreter: each run starts from the
state right after the imports, with nothing left over by the run before it (MLIR
contexts, caches, registered dialects), as a fresh process does.

The client falls back to running `python -m tileir.tools.tile_opt` itself when no
server answers (none started, or it died), so the server only saves time.  The
server exits when the lit process that started it does (its parent changes), or
when told to (SIGTERM).

    python -m tileir.tools.tile_opt_server SOCKET      # the server (lit.cfg.py)
    TILEIR_OPT_SERVER=SOCKET python -I -S tile_opt_server.py ARGS...   # a client
"""

# The client half runs under `python -I -S`: the standard library only, above `serve`.
from __future__ import annotations

import array
import json
import os
import socket
import struct
import sys

SERVER_ENV = "TILEIR_OPT_SERVER"   # the server's socket path, set by test/lit.cfg.py
_HEADER = struct.Struct("!I")      # a request's length
_STATUS = struct.Struct("!i")      # the exit code, or minus the signal that ended the run
_STDIO = (0, 1, 2)
_STARTED = b"R"                    # sent before the run begins: from then on no fallback


def _send_request(sock: socket.socket, argv: list[str]) -> None:
    body = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    fds = array.array("i", _STDIO)
    sock.sendmsg([_HEADER.pack(len(body)), body],
                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the tile-opt server closed the connection")
        data += chunk
    return data


def _run_fresh(argv: list[str]) -> None:
    """No server: become a plain `python -m tileir.tools.tile_opt` (with the
    environment as given; this process's -I does not carry over)."""
    os.execv(sys.executable, [sys.executable, "-m", "tileir.tools.tile_opt", *argv])


def client(argv: list[str]) -> int:
    path = os.environ.get(SERVER_ENV)
    if not path:
        _run_fresh(argv)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        _run_fresh(argv)
    with sock:
        try:
            _send_request(sock, argv)
            started = _recv_exact(sock, len(_STARTED)) == _STARTED
        except OSError:             # the server is going away: nothing ran yet
            started = False
        if not started:
            sock.close()
            _run_fresh(argv)
        try:
            (status,) = _STATUS.unpack(_recv_exact(sock, _STATUS.size))
        except OSError:
            # The server died before the run began or ended; its output, if any, is
            # already written, so running again could duplicate it: say so and fail.
            print("tile-opt: the tile-opt server (test/lit.cfg.py) went away during the "
                  "run", file=sys.stderr)
            return 1
    if status < 0:        # ended by a signal: end the same way, as the shell sees it
        import signal
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    return status


# ---------------------------------------------------------------------------
# The server (run as `python -m tileir.tools.tile_opt_server SOCKET`)
# ---------------------------------------------------------------------------
def serve(path: str) -> None:
    import gc
    import select
    import signal

    # Bind first, so clients can connect (and wait in the backlog) while the imports run.
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    parent = os.getppid()

    import io
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    from tileir.tools import tile_opt     # what every request would import: the point
    said = sys.stdout.getvalue() + sys.stderr.getvalue()
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    if said:
        # a fresh tile-opt would print this on every run (a warning, say): clients
        # must start tile-opt themselves to show it
        os.unlink(path)
        listener.close()
        return
    gc.collect()
    gc.freeze()          # children then do not touch (and copy) the imported objects' pages

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)       # wakes select via the pipe
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    running: dict[int, socket.socket] = {}                 # child pid -> its client
    try:
        while True:
            ready, _, _ = select.select([listener, wake_r, *running.values()], [], [], 1.0)
            if os.getppid() != parent:
                return                                     # lit is gone
            if wake_r in ready:
                os.read(wake_r, 512)
            _reap(running)
            for conn in [c for c in ready if c in running.values()]:
                _client_went_away(conn, running)
            if listener in ready:
                conn, _ = listener.accept()
                pid = _start(conn, listener, tile_opt, (wake_r, wake_w))
                if pid is None:
                    conn.close()
                else:
                    running[pid] = conn
    finally:
        for pid in running:
            _kill(pid)
        listener.close()
        try:
            os.unlink(path)
        except OSError:
            pass


def _start(conn: socket.socket, listener: socket.socket, tile_opt, pipe) -> int | None:
    """Reads one request and forks the child that runs it; None if the request was bad."""
    try:
        header, fds, _, _ = socket.recv_fds(conn, _HEADER.size, len(_STDIO))
        if len(header) < _HEADER.size or len(fds) != len(_STDIO):
            raise ConnectionError("incomplete request")
        (length,) = _HEADER.unpack(header)
        request = json.loads(_recv_exact(conn, length))
        conn.sendall(_STARTED)
    except (OSError, ValueError):
        return None
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        return pid
    try:
        listener.close()
        status = _child(request, fds, tile_opt, pipe)
    except BaseException:               # never return into the server's loop
        status = 1
    os._exit(status)


def _child(request: dict, fds: list[int], tile_opt, pipe) -> int:
    import atexit
    import io
    import signal
    import traceback

    signal.set_wakeup_fd(-1)
    for fd in pipe:
        os.close(fd)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for target, fd in zip(_STDIO, fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin, sys.stdout, sys.stderr = (_stdio(fd, like) for fd, like in
                                         zip(_STDIO, (sys.stdin, sys.stdout, sys.stderr)))
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [tile_opt.__file__, *request["argv"]]
    sys.path[0] = request["cwd"]       # `python -m` puts its working directory first
    # What the interpreter does with `sys.exit(main())` in a fresh process
    try:
        status = _exit_status(tile_opt.main())
    except SystemExit as e:
        status = _exit_status(e.code)
    except KeyboardInterrupt:
        return 130
    except BaseException:
        traceback.print_exc()
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = 120           # Python's status when flushing stdout fails at exit
    return status


def _stdio(fd: int, like: io.TextIOWrapper) -> io.TextIOWrapper:
    """A standard stream on `fd` made as the interpreter makes it at start-up: line
    buffered on a terminal and for stderr, else block buffered."""
    import io

    writing = fd != 0
    raw = io.FileIO(fd, "wb" if writing else "rb", closefd=False)
    buffered = io.BufferedWriter(raw) if writing else io.BufferedReader(raw)
    return io.TextIOWrapper(buffered, encoding=like.encoding, errors=like.errors,
                            line_buffering=writing and (fd == 2 or raw.isatty()))


def _exit_status(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _reap(running: dict[int, socket.socket]) -> None:
    """Tells each finished child's client how it ended."""
    for pid in list(running):
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if not done:
            continue
        conn = running.pop(pid)
        if os.WIFSIGNALED(wait_status):
            status = -os.WTERMSIG(wait_status)
        else:
            status = os.WEXITSTATUS(wait_status)
        try:
            conn.sendall(_STATUS.pack(status))
        except OSError:
            pass
        conn.close()


def _client_went_away(conn: socket.socket, running: dict[int, socket.socket]) -> None:
    """A client closed its end before its run ended (lit killed it, say): stop the run."""
    try:
        if conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
            return
    except BlockingIOError:
        return
    except OSError:
        pass
    for pid, c in running.items():
        if c is conn:
            _kill(pid)


def _kill(pid: int) -> None:
    import signal
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    # Imported as part of tileir (`-m`) it is the server; run as a file it is a client.
    if __package__:                  # python -m tileir.tools.tile_opt_server SOCKET
        serve(sys.argv[1])
    else:                            # python -I -S .../tile_opt_server.py ARGS: a client
        sys.exit(client(sys.argv[1:]))
