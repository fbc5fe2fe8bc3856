"""tile-programmatic-launch from the frontend: which kernels launch programmatically,
and that the waits change no result (docs/gpu-backend.md, "Programmatic launch")."""

from __future__ import annotations

import numpy as np
import pytest

import tileir as ct
from tileir.sim import simulate


def _bump(x, y, T: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(y, index=(i,), tile=ct.load(x, index=(i,), shape=(T,)) + 1)


bump = ct.kernel(_bump)
bump_in_order = ct.kernel(programmatic_launch=False)(_bump)


@ct.kernel
def waits_itself(x, y, T: ct.Constant[int]):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(T,))
    ct.grid_dependency_control_wait()
    ct.store(y, index=(i,), tile=t)


@ct.kernel
def releases_only(x, y, T: ct.Constant[int]):
    ct.grid_dependency_control_launch_dependents()
    i = ct.bid(0)
    ct.store(y, index=(i,), tile=ct.load(x, index=(i,), shape=(T,)))


def _args(n=1000):
    return (np.arange(n, dtype=np.int32), np.full(n, -7, np.int32), 256)


def _waits(kernel, target) -> list[str]:
    text = str(kernel.compile(_args(), stage="pipeline", target=target).module)
    return sorted(k for k in ("launch_dependents", "wait") for _ in range(text.count(f'"{k}"')))


def test_sm90a_kernels_open_with_the_wait_and_the_release():
    ck = bump.compile(_args(), target="sm_90a")
    assert ck.meta.get("programmatic_launch") is True
    assert _waits(bump, "sm_90a") == ["launch_dependents", "wait"]      # (sorted)
    text = str(bump.compile(_args(), stage="pipeline", target="sm_90a").module)
    body = text[text.index("tile.kernel"):]
    assert body.index('"wait"') < body.index('"launch_dependents"') < body.index("tile.load")


@pytest.mark.parametrize("kernel,target", [(bump, "sm_80"), (bump_in_order, "sm_90a")])
def test_sm80_and_the_option_off_launch_in_order(kernel, target):
    assert _waits(kernel, target) == []
    assert "programmatic_launch" not in kernel.compile(_args(), target=target).meta


def test_a_kernel_that_places_its_own_wait_keeps_it():
    """... and is launched programmatically where the launch asks, as cuTile launches it
    (`programmatic_dependent_launch=True`: meta `programmatic_on_request`)."""
    assert _waits(waits_itself, "sm_90a") == ["wait"]
    meta = waits_itself.compile(_args(), target="sm_90a").meta
    assert meta.get("programmatic_on_request") is True and "programmatic_launch" not in meta
    assert "programmatic_on_request" not in bump.compile(_args(), target="sm_90a").meta


def test_the_option_on_launches_the_authors_wait_programmatically_always():
    always = ct.kernel(programmatic_launch=True)(waits_itself.__wrapped__)
    meta = always.compile(_args(), target="sm_90a").meta
    assert meta.get("programmatic_launch") is True and "programmatic_on_request" not in meta
    releasing = ct.kernel(programmatic_launch=True)(releases_only.__wrapped__)
    meta = releasing.compile(_args(), target="sm_90a").meta     # no wait: on request only
    assert meta.get("programmatic_on_request") is True and "programmatic_launch" not in meta


def test_a_kernel_that_only_releases_starts_after_the_previous_one():
    """Launched programmatically it would start once the previous kernel released it,
    with no wait for that kernel's writes: so it is launched as any other, unless the
    launch asks (cuTile's programmatic_dependent_launch: the author's choice)."""
    assert set(_waits(releases_only, "sm_90a")) == {"launch_dependents"}    # (2 versions)
    meta = releases_only.compile(_args(), target="sm_90a").meta
    assert "programmatic_launch" not in meta and meta.get("programmatic_on_request") is True


def test_the_option_off_also_drops_the_authors_placement_from_the_launch():
    in_order = ct.kernel(programmatic_launch=False)(waits_itself.__wrapped__)
    assert _waits(in_order, "sm_90a") == ["wait"]            # (a no-op without it)
    meta = in_order.compile(_args(), target="sm_90a").meta
    assert "programmatic_launch" not in meta and "programmatic_on_request" not in meta


def test_the_option_is_a_bool():
    with pytest.raises(ct.TileValueError, match="option programmatic_launch must be True or"):
        ct.kernel(programmatic_launch=1)(_bump).compile(_args(), target="sm_90a")


@pytest.mark.parametrize("n", [1000, 256])
def test_the_waits_change_no_result(n):
    x, y, t = _args(n)
    ck = bump.compile((x, y, t), stage="gpu", target="sm_90a")
    simulate(ck, (ct.cdiv(n, t), 1, 1), (x, y, t))
    np.testing.assert_array_equal(y, x + 1)


def test_the_interpreter_accepts_the_launch_flag():
    """The interpreter runs launches one after another: the flag changes nothing."""
    for kernel in (bump, waits_itself, releases_only):
        x, y, t = _args()
        ct.launch(None, (ct.cdiv(1000, t),), kernel, (x, y, t), programmatic_dependent_launch=True)
        np.testing.assert_array_equal(y, x + (kernel is bump))
