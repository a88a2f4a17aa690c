"""The memory model, the off-chip units and a whole memory system convert to Verilog and lint clean."""

import functools

import pytest
from amaranth.hdl import Value

from stepforge.compiler.types import Index, int16
from stepforge.hdl.config import HardwareConfig
from stepforge.hdl.memory import MemoryGeometry, MemoryModel, TensorPlacement
from stepforge.hdl.offchip_load import LinearLoadUnit, RandomLoadUnit
from stepforge.hdl.offchip_store import LinearStoreUnit, RandomStoreUnit
from stepforge.sim.rtl import verilator as vl
from stepforge.sim.rtl.testbench_memory import MemoryBench

CONFIG = HardwareConfig.sim()
SIZE = 4096


GEOMETRY = MemoryGeometry.from_config(CONFIG, SIZE)


def placement(base=0, shape=(8, 16)):
    return TensorPlacement(GEOMETRY, int16, shape, (4, 4), base=base)


UNITS = {
    "linear_load": lambda: LinearLoadUnit(placement(), (2, 4), (4, 1), ref_type=Index(),
                                          ref_rank=1),
    "random_load": lambda: RandomLoadUnit(placement(base=64, shape=(8, 12)), 1),
    "linear_store": lambda: LinearStoreUnit(placement(base=128), 2),
    "random_store": lambda: RandomStoreUnit(placement(base=256, shape=(4, 16)), 1, 0),
}


def system():
    """The four units sharing one memory (2 read and 2 write clients), stalls from the LFSR."""
    units = [make() for make in UNITS.values()]
    mem = MemoryModel.for_clients(CONFIG, SIZE, units, bytes(range(256)))
    bench = MemoryBench(units, mem, stall_p=0.1)
    ports = [mem.bytes_read, mem.bytes_written, bench.done]
    for u in units:
        for path, _, value in u.signature.flatten(u):
            if path[0] != "mem":
                ports.append(Value.cast(value))
    return bench, ports


DESIGNS = ["memory", *UNITS, "system"]


def build(name):
    if name == "memory":
        return MemoryModel(CONFIG, SIZE, bytes(range(64)), read_ports=[(1, 4, 4), (8, 2, 12)],
                           write_ports=[(3, 1, 0)]), None
    if name == "system":
        return system()
    return UNITS[name](), None


@functools.lru_cache(maxsize=None)
def verilog_of(name):
    design, ports = build(name)
    return vl.convert(design, name=name, ports=ports)


@pytest.mark.parametrize("name", DESIGNS)
def test_converts_and_lints(name):
    verilog = verilog_of(name)
    assert f"module {name}(" in verilog
    warnings = vl.lint(verilog, top=name)
    # Amaranth's output only draws width warnings (toolchain notes); nothing structural
    kinds = {w.split(":")[0].split("-")[-1] for w in warnings}
    assert kinds <= {"WIDTHEXPAND", "WIDTHTRUNC"}, warnings


def test_system_ports_are_named():
    verilog = verilog_of("system")
    for port in ("bytes_read", "bytes_written", "bench_done", "out__payload", "ack__valid",
                 "in0__ready"):
        assert port in verilog
    # the memory is four channels x 16 B of 8-byte words: eight lane memories of 64 rows of
    # 64-bit words, preloaded in the Verilog itself (the back door a Verilated run starts from):
    # word w in lane w % 8, row w // 8
    lanes = [lane_module(verilog, "system", j) for j in range(8)]
    assert "module \\system.memory.lane8 " not in verilog
    assert all("reg [63:0] ram [63:0];" in lane for lane in lanes)
    assert "ram[0] = 64'h0706050403020100;" in lanes[0]
    assert "ram[1] = 64'h4746454443424140;" in lanes[0]
    assert "ram[0] = 64'h3f3e3d3c3b3a3938;" in lanes[7]


def lane_module(verilog, top, j):
    """The text of the Verilog module of lane ``j`` of ``top``'s memory."""
    start = verilog.index(f"module \\{top}.memory.lane{j} ")
    return verilog[start:verilog.index("endmodule", start)]


def test_memory_ports_for_a_verilated_testbench():
    verilog = verilog_of("memory")
    for decl in ("input [8:0] debug__addr;", "input debug__we;", "input [63:0] debug__wdata;",
                 "input debug__re;", "output [63:0] debug__rdata;", "output debug__rvalid;",
                 "input stall;", "output [47:0] bytes_read;",
                 # a request is its first word's address (the burst shape is the port's)
                 "input [8:0] read0__req__payload;", "output read0__req__ready;",
                 "output [3:0] read1__resp__count;", "output [511:0] read1__resp__data;",
                 "output read1__resp__last;", "input [511:0] write0__data__payload;",
                 "output write0__data__ready;"):
        assert decl in verilog, decl
