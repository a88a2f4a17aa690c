"""Fingerprints of elaborated units: any constructor parameter that reaches the hardware changes
the fingerprint; the same unit built twice (in one run or in two) keeps it."""

import dataclasses
import subprocess
import sys

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Fragment, Module, Signal

from stepforge import LinearOffChipLoad, LinearOffChipStore, Map, Program, Tile, int8, int16, int32
from stepforge.compiler.lower import lower
from stepforge.contract.beat import beat_layout
from stepforge.hdl.broadcast import BroadcastUnit
from stepforge.hdl.config import HardwareConfig
from stepforge.hdl.csr import CSRBank
from stepforge.hdl.fifo import StreamFIFO
from stepforge.hdl.filter import FilterUnit
from stepforge.hdl.flatten import FlattenUnit
from stepforge.hdl.memory import MemoryGeometry, MemoryModel, TensorPlacement
from stepforge.hdl.offchip_load import LinearLoadUnit
from stepforge.hdl.offchip_store import LinearStoreUnit
from stepforge.hdl.repeat import RepeatStaticUnit
from stepforge.sim.rtl.fingerprint import fingerprint
from stepforge.sim.rtl.separate import component_ports

T8, T16 = Tile(int8, 4, 4), Tile(int16, 4, 4)
CFG = HardwareConfig.sim()
GEOMETRY = MemoryGeometry(word_bytes=4, channels=4, bytes_per_channel=16, latency=4,
                          size_words=4096)


def digest(component):
    return fingerprint(Fragment.get(component, None), component_ports(component)).digest


def placement(dtype=int8, shape=(16, 32), tile=(4, 4), base=0, pitch=None):
    return TensorPlacement(GEOMETRY, dtype, shape, tile, base=base, pitch=pitch)


def csr_bank(max_registers=64, registers=("a", "b"), width=8):
    bank = CSRBank(max_registers)
    for name in registers:
        bank.add(name, Signal(width, name=name))
    return bank


#: The memory ports of the MemoryModel variants.
PORTS = {"read_ports": [(1, 8, 1)], "write_ports": [(2, 1, 0)]}

#: unit -> (base arguments, [one-parameter changes]); each change must change the fingerprint
VARIANTS = {
    StreamFIFO: ((8, 2), {}, [((9, 2), {}), ((8, 3), {}), ((8, 2), {"buffered": True})]),
    BroadcastUnit: ((T8, 2, 2), {}, [((T16, 2, 2), {}), ((T8, 4, 2), {}), ((T8, 2, 3), {}),
                                     ((T8, 2, 2), {"depth": 3})]),
    RepeatStaticUnit: ((T8, 1, 3), {}, [((T16, 1, 3), {}), ((T8, 2, 3), {}), ((T8, 1, 4), {})]),
    FlattenUnit: ((T8, 3, 0, 1), {}, [((T16, 3, 0, 1), {}), ((T8, 2, 0, 1), {}),
                                      ((T8, 3, 1, 2), {}), ((T8, 3, 0, 2), {})]),
    FilterUnit: ((T8, 1), {}, [((T16, 1), {}), ((T8, 2), {}), ((T8, 1), {"keep": False})]),
    LinearLoadUnit: ((placement(), (2, 8), (8, 1)), {},
                     [((placement(int16), (2, 8), (8, 1)), {}),
                      ((placement(shape=(16, 64)), (2, 8), (8, 1)), {}),
                      ((placement(base=64), (2, 8), (8, 1)), {}),
                      ((placement(pitch=9), (2, 8), (8, 1)), {}),
                      ((placement(), (2, 4), (8, 1)), {}),
                      ((placement(), (2, 8), (16, 1)), {}),
                      ((placement(), (2, 8), (8, 1)), {"offset": 1})]),
    LinearStoreUnit: ((placement(), 2), {}, [((placement(int16), 2), {}),
                                             ((placement(base=64), 2), {}),
                                             ((placement(), 1), {})]),
    # 8 lanes of 8-byte words; the read burst of 8 one-word rows, one word apart, fills one line
    # (max_segments=4: two)
    MemoryModel: ((CFG, 4096), PORTS,
                  [((dataclasses.replace(CFG, mem_channels=2), 4096), PORTS),
                   ((dataclasses.replace(CFG, mem_bytes_per_channel=32), 4096), PORTS),
                   ((dataclasses.replace(CFG, mem_latency=CFG.mem_latency + 1), 4096), PORTS),
                   ((CFG, 8192), PORTS),
                   ((CFG, 4096, b"\x01"), PORTS),
                   ((CFG, 4096), {"read_ports": [(1, 8, 1)] * 2, "write_ports": [(2, 1, 0)]}),
                   ((CFG, 4096), {"read_ports": [(1, 8, 1)], "write_ports": [(2, 1, 0)] * 2}),
                   ((CFG, 4096), {"read_ports": [(1, 8, 2)], "write_ports": [(2, 1, 0)]}),
                   ((CFG, 4096), {"read_ports": [(1, 8, 1)], "write_ports": [(3, 1, 0)]}),
                   ((CFG, 4096), {**PORTS, "word_bytes": 4}),
                   ((CFG, 4096), {**PORTS, "max_segments": 4}),
                   ((CFG, 4096), {**PORTS, "counter_bits": 40}),
                   ((CFG, 4096), {**PORTS, "storage": "verilog"})]),
}


def rtlil_of(component):
    return rtlil.convert(component, name="unit", emit_src=False)


@pytest.mark.parametrize("cls", list(VARIANTS), ids=lambda c: c.__name__)
def test_every_parameter_changes_the_fingerprint(cls):
    args, kwargs, changes = VARIANTS[cls]
    variants = [(args, kwargs), (args, kwargs)] + changes     # the base twice: built again
    digests = [digest(cls(*a, **kw)) for a, kw in variants]
    assert digests[0] == digests[1]
    assert len(set(digests)) == len(changes) + 1, [d[:8] for d in digests]
    # equal fingerprints exactly when the hardware (its RTLIL) is equal
    texts = [rtlil_of(cls(*a, **kw)) for a, kw in variants]
    for i in range(len(variants)):
        for j in range(i):
            assert (digests[i] == digests[j]) == (texts[i] == texts[j])


def test_parameters_that_build_the_same_hardware_share_a_fingerprint():
    # 2 channels x 16 bytes and 4 channels x 8 bytes make the same 4-lane memory of 8-byte words
    a = MemoryModel(dataclasses.replace(CFG, mem_channels=2), 4096, **PORTS)
    b = MemoryModel(dataclasses.replace(CFG, mem_bytes_per_channel=8), 4096, **PORTS)
    assert digest(a) == digest(b)
    assert rtlil_of(MemoryModel(dataclasses.replace(CFG, mem_channels=2), 4096, **PORTS)) == (
        rtlil_of(MemoryModel(dataclasses.replace(CFG, mem_bytes_per_channel=8), 4096, **PORTS)))
    # count_bits only bounds the ports' burst shapes (a request carries no count): same hardware
    assert digest(MemoryModel(CFG, 4096, count_bits=12, **PORTS)) == digest(
        MemoryModel(CFG, 4096, **PORTS))


def test_csr_bank_registers_and_size_change_the_fingerprint():
    digests = [digest(csr_bank()), digest(csr_bank(128)), digest(csr_bank(registers=("a",))),
               digest(csr_bank(registers=("a", "c"))), digest(csr_bank(width=9))]
    assert len(set(digests)) == len(digests)


def map_program(k):
    p = Program("map")
    x = p.tensor("X", (8, 8), int16)
    y = p.tensor("Y", (8, 8), int16, role="output")
    LinearOffChipStore(Map(lambda t: t + k, LinearOffChipLoad(x, (4, 4), out_shape=(2, 2),
                                                              stride=(2, 1))), y)
    return p


def test_the_function_of_a_pcu_is_in_its_fingerprint():
    def pcu(k):
        hw = lower(map_program(k))
        for u in hw.units:
            if u.kind != "PCU":
                Fragment.get(u.component, None)      # used: no UnusedElaboratable warning
        return next(u.component for u in hw.units if u.kind == "PCU")
    assert digest(pcu(1)) == digest(pcu(1))
    assert digest(pcu(1)) != digest(pcu(2))


def test_names_and_reset_behaviour_are_in_the_fingerprint():
    def design(name="x", init=0, reset_less=False):
        m = Module()
        s = Signal(8, name=name, init=init, reset_less=reset_less)
        m.d.sync += s.eq(s + 1)
        return Fragment.get(m, None)
    digests = [fingerprint(design(**kw), {}).digest
               for kw in ({}, {"name": "y"}, {"init": 1}, {"reset_less": True})]
    assert len(set(digests)) == len(digests)


def test_salt_and_ports_are_in_the_fingerprint():
    fifo = StreamFIFO(8, 2)
    fragment, ports = Fragment.get(fifo, None), component_ports(fifo)
    plain = fingerprint(fragment, ports).digest
    assert fingerprint(fragment, ports, salt=("amaranth 0.5.99",)).digest != plain
    renamed = {f"x_{name}": port for name, port in ports.items()}
    assert fingerprint(fragment, renamed).digest != plain


def test_an_unknown_object_is_an_error_not_skipped():
    fragment = Fragment.get(Module(), None)
    fragment.attrs["note"] = object()
    with pytest.raises(TypeError, match="cannot fingerprint"):
        fingerprint(fragment, {})


def test_fingerprints_are_the_same_in_another_process():
    code = ("from stepforge.hdl.fifo import StreamFIFO; from amaranth.hdl import Fragment;"
            "from stepforge.sim.rtl.fingerprint import fingerprint;"
            "from stepforge.sim.rtl.separate import component_ports;"
            "from stepforge import Tile, int32;"
            "from stepforge.contract.beat import beat_layout;"
            "f = StreamFIFO(beat_layout(Tile(int32, 2, 2), 2), 3);"
            "print(fingerprint(Fragment.get(f, None), component_ports(f)).digest)")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.strip()
    Signal(4, name="shifts_the_unique_ids")
    assert other == digest(StreamFIFO(beat_layout(Tile(int32, 2, 2), 2), 3))


def test_a_deep_expression_does_not_exhaust_the_recursion_limit():
    m = Module()
    x, out = Signal(8, name="x"), Signal(8, name="out")
    chain = x
    for _ in range(sys.getrecursionlimit() // 2):      # as deep as Amaranth itself goes
        chain = chain + 1
    m.d.comb += out.eq(chain)
    fragment = Fragment.get(m, None)
    assert fingerprint(fragment, {}).digest != fingerprint(Fragment.get(Module(), None), {}).digest
