# amaranth: UnusedElaboratable=no
"""Elaboration is repeatable: converting the same unit object twice gives the same Verilog.

Amaranth may elaborate a component more than once (a simulator and a Verilog conversion of one
object, a second conversion by a cache-miss path); nothing a unit builds may be remembered on the
object between two elaborations. One instance of every unit kind is converted twice; the second
Verilog must equal the first, and for a unit with run-time checks ``status.error`` must be driven
by logic both times (a unit that kept its error registers from the first elaboration would tie it
to the constant 0 the second time, silently losing every fault flag).
"""

import re

import pytest
from amaranth.hdl import Signal

from stepforge.compiler import functions as F
from stepforge.compiler.types import Bool, Index, Tile, Tuple, int8, int16
from stepforge.contract.beat import beat_layout
from stepforge.hdl.addrgen import AddrGenUnit
from stepforge.hdl.beat_io import BeatReader, BeatWriter, DiscardUnit
from stepforge.hdl.broadcast import BroadcastUnit
from stepforge.hdl.config import HardwareConfig
from stepforge.hdl.csr import CSRBank
from stepforge.hdl.eager_merge import EagerMergeUnit
from stepforge.hdl.expand import ExpandUnit
from stepforge.hdl.fifo import StreamFIFO
from stepforge.hdl.host_link import HostBridge, UartTx
from stepforge.hdl.filter import FilterUnit
from stepforge.hdl.flatten import FlattenUnit
from stepforge.hdl.memory import MemoryGeometry, MemoryModel, TensorPlacement
from stepforge.hdl.offchip_load import LinearLoadUnit, RandomLoadUnit
from stepforge.hdl.offchip_store import LinearStoreUnit, RandomStoreUnit
from stepforge.hdl.parallelize import ParallelizeUnit
from stepforge.hdl.partition import PartitionUnit
from stepforge.hdl.pcu import PCU
from stepforge.hdl.pmu import PMU, Replay
from stepforge.hdl.promote import PromoteUnit
from stepforge.hdl.reassemble import ReassembleUnit
from stepforge.hdl.repeat import RepeatStaticUnit
from stepforge.hdl.reshape import ReshapeUnit
from stepforge.hdl.retile import RetileStreamifyUnit
from stepforge.hdl.zip import ZipUnit
from stepforge.sim.rtl import verilator as vl

TILE = Tile(int8, 1, 2)
CONFIG = HardwareConfig.sim()
GEOMETRY = MemoryGeometry.from_config(CONFIG, 4096)


def placement(base=0, shape=(8, 16)):
    return TensorPlacement(GEOMETRY, int16, shape, (4, 4), base=base)


def csr_bank():
    bank = CSRBank(16)
    bank.add("cycles", Signal(32, name="cycles"))
    return bank


#: name -> (constructor, whether the unit has run-time checks: ``status.error`` not a constant)
UNITS = {
    "addrgen": (lambda: AddrGenUnit(Index(), 1, [2, 3], [16, 1], scale=4, offset=7), True),
    "beat_reader": (lambda: BeatReader(beat_layout(TILE, 1), GEOMETRY, 0), False),
    "beat_writer": (lambda: BeatWriter(beat_layout(TILE, 1), GEOMETRY, 0, 8), True),
    "discard": (lambda: DiscardUnit(beat_layout(TILE, 1)), False),
    "broadcast": (lambda: BroadcastUnit(TILE, 1, 2, depth=2), False),
    "eager_merge": (lambda: EagerMergeUnit(TILE, 2, 1), True),
    "expand": (lambda: ExpandUnit(TILE, Index(), 2, 1), True),
    "fifo": (lambda: StreamFIFO(beat_layout(TILE, 1), 2), False),
    "filter": (lambda: FilterUnit(TILE, 1), True),
    "flatten": (lambda: FlattenUnit(TILE, 2, 0, 1), False),
    "linear_load": (lambda: LinearLoadUnit(placement(), (2, 4), (4, 1)), False),
    "random_load": (lambda: RandomLoadUnit(placement(), 1), True),
    "linear_store": (lambda: LinearStoreUnit(placement(), 2), True),
    "random_store": (lambda: RandomStoreUnit(placement(), 1, 0), True),
    "parallelize": (lambda: ParallelizeUnit(TILE, 2, 2, 1), True),
    "partition": (lambda: PartitionUnit(TILE, 2, 3, 1), True),
    "pcu_map": (lambda: PCU(F.function(lambda a, b: a + b), [TILE, TILE], 1), True),
    "pcu_accum": (lambda: PCU(F.add, TILE, 2, mode="accum", init=F.zeros(TILE), b=1), True),
    "pmu_static": (lambda: PMU(TILE, 2, 1, (3,), readers=[Replay(2)]), True),
    "pmu_dynamic": (lambda: PMU(TILE, 2, 1, (4,), mode="dynamic", block_size=2, blocks=4,
                                readers=[Replay(), Replay(expand_rank=1, ref_type=Bool())]), True),
    "promote": (lambda: PromoteUnit(TILE, 2, 1), False),
    "reassemble": (lambda: ReassembleUnit(TILE, 2, 1, 1), True),
    "repeat": (lambda: RepeatStaticUnit(TILE, 1, 3), False),
    "reshape": (lambda: ReshapeUnit(TILE, 1, 2), True),
    "retile": (lambda: RetileStreamifyUnit(Tile(int8, 2, 2), 1), True),
    "zip": (lambda: ZipUnit([Index(), Tuple(Index(), TILE)], 1), True),
    "memory": (lambda: MemoryModel(CONFIG, 4096, bytes(range(64)), read_ports=[(1, 1, 0), (2, 1, 0)],
                                   write_ports=[(1, 1, 0)]),
               False),
    "csr": (csr_bank, False),
    "uart_tx": (lambda: UartTx(8), False),
    "host_bridge": (lambda: HostBridge(GEOMETRY, status_csrs=(1, 2, 3), timeout=64), False),
}


def error_is_constant(verilog):
    """The top module ties ``status__error`` to a constant (no fault logic drives it)."""
    top = verilog[verilog.index("module top("):]
    top = top[:top.index("endmodule")]
    assert re.search(r"^\s*output status__error;", top, re.M)
    return re.search(r"^\s*assign status__error = \d+'[hbd][0-9a-f]+;", top, re.M) is not None


@pytest.mark.parametrize("name", sorted(UNITS))
def test_converting_twice_gives_the_same_verilog(name):
    make, checked = UNITS[name]
    unit = make()
    first = vl.convert(unit, name="top")
    second = vl.convert(unit, name="top")
    if "status" in unit.signature.members:
        assert error_is_constant(first) != checked
        assert error_is_constant(second) != checked
    else:
        assert not checked
    assert second == first
