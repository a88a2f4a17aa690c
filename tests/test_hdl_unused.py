"""A unit whose constructor raises is not reported later as "created but never used"
(``quiet_on_error``, ``hdl/memory/geometry.py``), while a built unit left unused still is."""

import gc
import sys
import warnings

import pytest
from amaranth.hdl import Fragment, Module, UnusedElaboratable
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from stepforge.hdl.config import HardwareConfig
from stepforge.hdl.memory import MemoryGeometry, MemoryModel, TensorPlacement, quiet_on_error
from stepforge.compiler.types import int16
from stepforge.hdl.offchip_load import LinearLoadUnit


class _Probe(wiring.Component):
    """A unit whose constructor raises after it named itself (so its ``repr`` works)."""

    def __init__(self, fail):
        self.fail = fail
        if fail:
            raise ValueError("_Probe fail must be False, not True")
        super().__init__({"o": Out(1)})

    def elaborate(self, platform):
        return Module()

    def __repr__(self):
        return f"{type(self).__name__}({self.fail})"


class _QuietProbe(_Probe):
    @quiet_on_error
    def __init__(self, fail):
        super().__init__(fail)


def dropped(make):
    """Build ``make()``, drop it and collect it: the ``UnusedElaboratable`` messages, and the
    errors raised in a finalizer (Amaranth's check calls ``repr``), seen meanwhile."""
    Fragment.get(_Probe(False), None)   # an elaboration turns Amaranth's check on
    errors = []
    hook, sys.unraisablehook = sys.unraisablehook, errors.append
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                make()
            except (TypeError, ValueError):
                pass
            gc.collect()
    finally:
        sys.unraisablehook = hook
    return ([str(w.message) for w in seen if issubclass(w.category, UnusedElaboratable)],
            [repr(e.exc_value) for e in errors])


def test_a_built_unit_left_unused_is_reported():
    assert dropped(lambda: _Probe(False)) == (["_Probe(False) created but never used"], [])
    assert dropped(lambda: _QuietProbe(False)) == (["_QuietProbe(False) created but never used"], [])


def test_a_failed_constructor_is_reported_without_quiet_on_error():
    assert dropped(lambda: _Probe(True)) == (["_Probe(True) created but never used"], [])


def _placement():
    g = MemoryGeometry.from_config(HardwareConfig.sim(), 1024)
    return TensorPlacement(g, int16, (4, 4), (2, 2))


@pytest.mark.parametrize("make", [
    lambda: _QuietProbe(True),
    lambda: MemoryModel("sim", 64),                                           # TypeError at once
    lambda: MemoryModel(HardwareConfig.sim().replace(mem_latency=3), 64),      # half built
    lambda: LinearLoadUnit(_placement(), (3,), (2,)),                          # walks off the tensor
], ids=["probe", "memory_config", "memory_latency", "linear_load_walk"])
def test_a_failed_constructor_is_not_reported(make):
    with pytest.raises((TypeError, ValueError)):
        make()
    assert dropped(make) == ([], [])
