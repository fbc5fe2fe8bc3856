"""`tile-check` itself: the fast and full tiers, its workers, the GPU tier and the
compute-sanitizer wrapper, run on a throwaway project (a fake compute-sanitizer
stands in for the real one)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from tileir.tools import check

PROJECT_TESTS = '''
import pytest

@pytest.mark.gpu
def test_on_the_gpu():
    pass

def test_on_the_cpu():
    pass

@pytest.mark.slow
def test_a_long_sweep():
    pass

@pytest.mark.skip(reason="skipped on purpose")
def test_skipped():
    pass
'''


@pytest.fixture(autouse=True)
def _a_gpu_machine(monkeypatch):
    """tile-check as on a GPU machine (its fast tier keeps the `gpu` tests), unless a
    test says otherwise: the counts below do not depend on this machine's GPU."""
    monkeypatch.setattr(check, "have_gpu", lambda: True)


@pytest.fixture(autouse=True)
def _bytecode_of_the_run(monkeypatch, session_dir):
    """The pytest and lit processes these tests start share one bytecode folder for the
    run (as under tile-check, whose PYTHONPYCACHEPREFIX they inherit), instead of
    tile-check's temporary one a run: else every one compiled pytest, xdist and lit
    again, ~1 s of CPU each (17 s of this file's 18, run alone with -n 0; 2026-11-29).
    test_a_run_leaves_no_bytecode_in_the_tree removes it again: it checks the folder
    tile-check makes itself."""
    if not os.environ.get("PYTHONPYCACHEPREFIX"):
        monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(session_dir / "bytecode"))
        monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "lit.cfg.py").write_text("")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nmarkers = ["gpu: needs a GPU", "slow: a long sweep"]\n')
    (tmp_path / "test" / "test_project.py").write_text(PROJECT_TESTS)
    return tmp_path


def _fake_sanitizer(tmp_path: Path, monkeypatch, exit_code: int) -> Path:
    """A `compute-sanitizer` on PATH that logs its arguments, runs the command after
    its options, and exits `exit_code` if that is not 0 (what the tool does when it
    finds errors with --error-exitcode)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "sanitizer.log"
    script = bindir / "compute-sanitizer"
    script.write_text(f"""#!{sys.executable}
import subprocess, sys
args = sys.argv[1:]
open({str(log)!r}, "w").write(" ".join(args))
i = 0
while args[i].startswith("--"):
    i += 2
rc = subprocess.call(args[i:])
sys.exit({exit_code} or rc)
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return log


# In --full since session 24 (~1 s: a pytest run of its own): the fast tier runs
# `--gpu` in test_without_a_gpu_the_fast_tier_leaves_the_gpu_tests_out (its totals) and
# test_sanitizer_errors_fail_the_run (under the sanitizer), and checks its `-m` in
# test_the_tier_is_anded_with_a_marker_expression_given
@pytest.mark.slow
def test_gpu_runs_only_the_gpu_tier(project, capsys):
    assert check.main(["--root", str(project), "--gpu", "test"]) == 0
    out = capsys.readouterr().out
    assert "-m gpu and not slow" in out and "== lit" not in out and " -n " not in out
    assert out.strip().splitlines()[-1] == "1 passed, 0 failed, 0 skipped"


def test_the_fast_tier_leaves_out_slow_tests_and_full_runs_them(project, capsys):
    """And the line before the totals names the tier that ran and the other's time."""
    assert check.main(["--root", str(project), "--no-lit", "-j", "1", "test"]) == 0
    out = capsys.readouterr().out
    assert "-m not slow" in out
    assert out.strip().splitlines()[-1] == "2 passed, 0 failed, 1 skipped"
    tier = out.strip().splitlines()[-2]
    assert tier.startswith("== the fast tier (tests marked `slow` left out): ")
    assert f"`tile-check --full`, what CI runs): {check.MEASURED['full']}" in tier
    assert check.main(["--root", str(project), "--no-lit", "-j", "1", "--full", "test"]) == 0
    out = capsys.readouterr().out
    assert "not slow" not in out
    assert out.strip().splitlines()[-1] == "3 passed, 0 failed, 1 skipped"
    tier = out.strip().splitlines()[-2]
    assert tier.startswith("== the full tier (every test, as CI runs it): ")
    assert tier.endswith(f"plain `tile-check`): {check.MEASURED['fast']}")


# in --full (4.6 s, three tile-check runs): the tier expression without a GPU is
# test_without_a_gpu_only_the_fast_tier_leaves_gpu_tests_out's, a run of the tiers
# test_the_fast_tier_leaves_out_slow_tests_and_full_runs_them's
@pytest.mark.slow
def test_without_a_gpu_the_fast_tier_leaves_the_gpu_tests_out(project, capsys, monkeypatch):
    """They would each run to a skip; --full still counts them (as skipped where the
    project's conftest skips them), --gpu runs them."""
    monkeypatch.setattr(check, "have_gpu", lambda: False)
    assert check.main(["--root", str(project), "--no-lit", "-j", "1", "test"]) == 0
    out = capsys.readouterr().out
    assert "-m not slow and not gpu" in out and "the tests marked `gpu` were left out" in out
    assert out.strip().splitlines()[-1] == "1 passed, 0 failed, 1 skipped"
    assert check.main(["--root", str(project), "--no-lit", "-j", "1", "--full", "test"]) == 0
    out = capsys.readouterr().out
    assert "not gpu" not in out and "were left out" not in out
    assert out.strip().splitlines()[-1] == "3 passed, 0 failed, 1 skipped"
    assert check.main(["--root", str(project), "--gpu", "test"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "1 passed, 0 failed, 0 skipped"


# In --full (2.9 s): test_lit_runs_alongside_pytest_and_both_are_counted keeps pytest
# under xdist's workers (-j 2, " -n 2 ") with its exact counts in the fast tier
@pytest.mark.slow
def test_workers_keep_the_counts_exact(project, capsys):
    """pytest-xdist's workers report to one JUnit file: the same counts as one process."""
    assert check.main(["--root", str(project), "--no-lit", "-j", "1", "--full", "test"]) == 0
    one = capsys.readouterr().out
    assert check.main(["--root", str(project), "--no-lit", "-j", "2", "--full", "test"]) == 0
    two = capsys.readouterr().out
    assert " -n 2 " in two and " -n " not in one
    assert two.strip().splitlines()[-1] == one.strip().splitlines()[-1]


# in --full (1.5 s): test_the_fast_tier_leaves_out_slow_tests_and_full_runs_them runs the tiers
@pytest.mark.slow
def test_a_selection_of_only_slow_tests_is_no_failure(project, capsys):
    assert check.main(["--root", str(project), "--no-lit", "-j", "1", "-k", "long_sweep",
                       "test"]) == 0
    out = capsys.readouterr().out
    assert "--full runs them" in out
    assert out.strip().splitlines()[-1] == "0 passed, 0 failed, 0 skipped"


@pytest.mark.parametrize("full, gpu, given, want", [
    (False, False, [], ["-m", "not slow"]),
    (True, False, [], []),
    (False, True, ["-k", "x"], ["-m", "gpu and not slow", "-k", "x"]),
    (True, False, ["-m", "a or b", "t.py"], ["-m", "(a or b)", "t.py"]),
    (False, False, ["-mfoo"], ["-m", "(foo) and not slow"]),
])
def test_the_tier_is_anded_with_a_marker_expression_given(full, gpu, given, want):
    assert check.tier_arguments(full, gpu, given) == want


@pytest.mark.parametrize("full, gpu, given, want", [
    (False, False, [], ["-m", "not slow and not gpu"]),
    (False, False, ["-m", "a"], ["-m", "(a) and not slow"]),     # the user's selection
    (True, False, [], []),
    (False, True, [], ["-m", "gpu and not slow"]),
])
def test_without_a_gpu_only_the_fast_tier_leaves_gpu_tests_out(full, gpu, given, want):
    assert check.tier_arguments(full, gpu, given, leave_out_gpu=True) == want


@pytest.mark.parametrize("full, gpu, leave_out_gpu, want", [
    (False, False, False, False), (False, False, True, False),     # the fast tier
    (True, False, False, True),                                    # --full, CI
    (False, True, False, False),                                   # --gpu
])
def test_helpers_know_the_tier_from_the_runs_marker_expression(full, gpu, leave_out_gpu,
                                                              want):
    """conftest.full_tier() (run_everywhere's cubins) is true exactly where tile-check's
    `-m` lets the tests marked `slow` run, and in a plain `pytest` (no `-m`)."""
    from conftest import selects_slow
    args = check.tier_arguments(full, gpu, [], leave_out_gpu)
    expr, _ = check.split_marker_expression(args)
    assert selects_slow(expr or "") == want
    assert selects_slow("") and selects_slow("not gpu") and not selects_slow("gpu")


def test_the_runs_processes_share_bytecode_in_its_temporary_folder(tmp_path):
    env = {"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/bin"}
    check.share_bytecode(env, tmp_path)
    assert env == {"PYTHONPYCACHEPREFIX": str(tmp_path / "bytecode"), "PATH": "/bin"}
    # a prefix of the user's own is theirs: kept, with their choice not to write
    mine = {"PYTHONPYCACHEPREFIX": "/elsewhere", "PYTHONDONTWRITEBYTECODE": "1"}
    check.share_bytecode(mine, tmp_path)
    assert mine == {"PYTHONPYCACHEPREFIX": "/elsewhere", "PYTHONDONTWRITEBYTECODE": "1"}


class _RunConfig:
    """This run's pytest config with other paths to collect (`args`), from `folder`."""

    def __init__(self, config, folder: Path, args: list[str]):
        self._config, self.args = config, args
        self.invocation_params = type(config.invocation_params)(
            args=tuple(args), plugins=None, dir=folder)

    def __getattr__(self, name):
        return getattr(self._config, name)


def test_xdist_workers_rewrite_the_test_files_asserts_once_between_them(
        tmp_path, monkeypatch, request):
    """conftest.share_rewriting: worker gw1 of 2 rewrites from the middle of the file
    list on, wrapping round, and stops at the first file whose rewritten bytecode is
    there (another worker's); what it writes is what pytest loads (asserts rewritten)."""
    from _pytest.assertion import rewrite
    from conftest import share_rewriting
    project = tmp_path / "tests"
    project.mkdir()
    for name in "abcd":
        (project / f"test_{name}.py").write_text(
            f"def test_{name}():\n    x = [1, 2]\n    assert x == [1, 3]\n")
    (project / "helper.py").write_text("X = 1\n")        # not a test file
    prefix = tmp_path / "bytecode"
    monkeypatch.setattr(sys, "pycache_prefix", str(prefix))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    config = _RunConfig(request.config, tmp_path, ["tests"])

    def pyc(name: str) -> Path:
        fn = project / f"test_{name}.py"
        return rewrite.get_cache_dir(fn) / (fn.name[:-3] + rewrite.PYC_TAIL)

    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    assert share_rewriting(config) == []          # the first worker collects as ever
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    pyc("b").parent.mkdir(parents=True)
    pyc("b").write_bytes(b"")                     # gw0 got to test_b first
    pyc("c").write_bytes(b"")                     # and to test_c (a test file imports it)
    done = share_rewriting(config)
    assert [p.name for p in done] == ["test_d.py", "test_a.py"]
    assert not pyc("b").read_bytes() and not pyc("c").read_bytes()
    pyc("c").unlink()
    pyc("a").unlink()
    # gw1's share is test_c and test_d: test_c rewritten, test_d there, then test_a
    # (past its share, up to test_b, which gw0 did)
    assert [p.name for p in share_rewriting(config)] == ["test_c.py", "test_a.py"]
    co = rewrite._read_pyc(project / "test_c.py", pyc("c"), lambda *a: None)
    scope: dict = {}
    exec(co, scope)
    with pytest.raises(AssertionError) as info:
        scope["test_c"]()
    assert "[1, 2] == [1, 3]" in str(info.value)   # pytest's introspection: rewritten
    assert share_rewriting(config) == []          # every file there: nothing to do
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    pyc("c").unlink()
    assert share_rewriting(config) == []          # no bytecode written, none shared


@pytest.mark.parametrize("links", ["hard", "symbolic"])
def test_installed_bytecode_is_linked_where_the_runs_processes_look(tmp_path, links,
                                                                     monkeypatch):
    """A process of the run (PYTHONPYCACHEPREFIX) reads the bytecode installed beside a
    library's modules through the links, compiling nothing; the tree's is not linked.
    Symbolic links where hard ones cannot be made (another file system)."""
    import errno
    import py_compile
    if links == "symbolic":
        def cross_device(src, dst):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        monkeypatch.setattr(os, "link", cross_device)
    tag = sys.implementation.cache_tag
    lib, tree, prefix = tmp_path / "lib", tmp_path / "tree", tmp_path / "bytecode"
    for folder in (lib / "pkg", tree / "mine"):
        folder.mkdir(parents=True)
        for name, text in (("__init__", ""), ("mod", "X = 1\n")):
            (folder / f"{name}.py").write_text(text)
            # installed beside the module, as pip does (under tile-check this process's
            # own PYTHONPYCACHEPREFIX would send the default cfile elsewhere)
            py_compile.compile(str(folder / f"{name}.py"), doraise=True,
                               cfile=str(folder / "__pycache__" / f"{name}.{tag}.pyc"))
    assert check.seed_bytecode(prefix, [str(lib), str(tree), str(tmp_path / "none")],
                               tree) == 2
    mirror = prefix / str(lib / "pkg").lstrip(os.sep)
    installed = lib / "pkg" / "__pycache__" / f"mod.{tag}.pyc"
    assert (mirror / f"mod.{tag}.pyc").is_symlink() == (links == "symbolic")
    assert (mirror / f"mod.{tag}.pyc").stat().st_ino == installed.stat().st_ino
    assert not (prefix / str(tree).lstrip(os.sep)).exists()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=str(prefix), PYTHONPATH=str(lib))
    import subprocess
    subprocess.run([sys.executable, "-c", "import pkg.mod"], env=env, check=True)
    # nothing compiled: no file beside the links, each still the installed one
    assert sorted(p.name for p in mirror.iterdir()) == [f"__init__.{tag}.pyc",
                                                          f"mod.{tag}.pyc"]
    assert (mirror / f"mod.{tag}.pyc").stat().st_ino == installed.stat().st_ino


# in --full (1.5 s): test_the_runs_processes_share_bytecode_in_its_temporary_folder keeps the
# prefix's setting in the fast tier
@pytest.mark.slow
def test_a_run_leaves_no_bytecode_in_the_tree(project, capsys, monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    assert check.main(["--root", str(project), "--no-lit", "-j", "1"]) == 0
    assert not list(project.rglob("__pycache__")) and not list(project.rglob("*.pyc"))


# In --full (1.1 s): the clean run (0); the fast tier keeps the sanitizer's arguments and
# a --gpu run through it by the SANITIZER_ERROR case
@pytest.mark.parametrize("exit_code, last", [pytest.param(0, "1 passed, 0 failed, 0 skipped",
                                                          marks=pytest.mark.slow),
                                             (check.SANITIZER_ERROR,
                                              "1 passed, 1 failed, 0 skipped")])
def test_sanitizer_errors_fail_the_run(project, tmp_path, monkeypatch, capsys, exit_code, last):
    log = _fake_sanitizer(tmp_path, monkeypatch, exit_code)
    rc = check.main(["--root", str(project), "--gpu", "--sanitizer", "racecheck", "test"])
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == last and rc == (1 if exit_code else 0)
    assert log.read_text().startswith(f"--tool racecheck --error-exitcode "
                                      f"{check.SANITIZER_ERROR}")
    if exit_code:
        assert "compute-sanitizer (racecheck) reported errors" in out


def test_a_missing_sanitizer_is_named(project, monkeypatch, capsys):
    monkeypatch.setenv("PATH", "")
    assert check.main(["--root", str(project), "--sanitizer", "memcheck"]) == 2
    assert "needs compute-sanitizer on PATH" in capsys.readouterr().err


LIT_CONFIG = '''
import lit.formats
config.name = "project"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".txt"]
config.excludes = ["test_project.py"]
'''


def test_lit_runs_alongside_pytest_and_both_are_counted(project, capsys):
    (project / "test" / "lit.cfg.py").write_text(LIT_CONFIG)
    (project / "test" / "passes.txt").write_text("RUN: true\n")
    (project / "test" / "fails.txt").write_text("RUN: false\n")
    assert check.main(["--root", str(project), "-j", "2", "test"]) == 1
    out = capsys.readouterr().out
    assert "== lit, alongside pytest" in out and " -n 2 " in out
    assert out.index("== pytest:") < out.index("== lit (ran alongside pytest):")
    assert "== lit: 1 passed, 1 failed, 0 skipped" in out
    assert "== pytest: 2 passed, 0 failed, 1 skipped" in out
    assert out.strip().splitlines()[-1] == "3 passed, 1 failed, 1 skipped"
    assert check.main(["--root", str(project), "-j", "1", "test"]) == 1   # one after the other
    out = capsys.readouterr().out
    assert "== lit, alongside" not in out and out.index("== lit:") < out.index("== pytest:")


SWEEP_TESTS = '''
import pytest

@pytest.mark.sweep(keep=("target",))
@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("n", [3, 1, pytest.param(8, marks=pytest.mark.slow)])
def test_kept_per_target(target, n):
    pass

@pytest.mark.sweep
@pytest.mark.parametrize("n", [2, 1])
def test_first_only(n):
    pass
'''


# in --full (2 s, a pytest run): the fast tier's own selection shows the sweep marker at
# work on every run
@pytest.mark.slow
def test_a_sweep_keeps_its_first_case_per_kept_value_in_the_fast_tier(tmp_path):
    """This directory's conftest.py decides the tiers of `sweep`-marked tests before
    `-m` deselects; `-k` does not change which cases are fast."""
    import shutil
    import subprocess
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_sweep.py").write_text(SWEEP_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: s\n    sweep: s\n"
                                         "    gpu: g\n")

    def collected(*args):
        out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                              "-p", "no:cacheprovider", "-p", "no:xdist", *args],
                             cwd=tmp_path, capture_output=True, text=True).stdout
        return {line.split("::")[1] for line in out.splitlines() if "::" in line}

    fast = {"test_kept_per_target[3-sm_90a]", "test_kept_per_target[3-sm_80]",
            "test_first_only[2]"}
    assert collected("-m", "not slow") == fast
    assert collected("-m", "not slow", "-k", "sm_80 or first") == \
        {"test_kept_per_target[3-sm_80]", "test_first_only[2]"}
    slow = collected("-m", "slow")
    assert len(slow) == 5 and not slow & fast          # 8 cases: 3 fast, 5 slow
