# amaranth: UnusedElaboratable=no
"""The PMU's data memory (:class:`~stepforge.hdl.pmu.data_ram.DataRAM`): its reads in two
cycles, and its ECP5 form (``DP16KD`` instances, output register inside) wired as Yosys wires
the generic form.

No simulation model of ``DP16KD`` comes with the tools (Yosys's is a black box), so the ECP5
form is checked against Yosys's own mapping of the generic form: both are synthesized with
``synth_ecp5`` and each block's width, address, data, enable and clock pins must connect to the
same top-level signals, with the output register on in the instantiated blocks where the
inferred ones have a flip-flop after every output bit.
"""

import random

import pytest
from amaranth.back import verilog
from amaranth.hdl import unsigned
from amaranth.sim import Simulator

from stepforge.hdl.platform import FamilyPlatform
from stepforge.hdl.pmu.data_ram import DataRAM, dp16kd_organization

from .helpers import synth_ecp5


def test_organization():
    assert dp16kd_organization(257, 128) == (18, 15)
    assert dp16kd_organization(16, 1024) == (18, 1)
    assert dp16kd_organization(16, 1025) == (9, 2)
    assert dp16kd_organization(33, 4096) == (4, 9)
    assert dp16kd_organization(1, 16384) == (1, 1)
    assert dp16kd_organization(1, 16385) is None


def test_bad_parameters():
    with pytest.raises(ValueError, match=r"^DataRAM depth must be an integer of at least 2, "
                                         r"not 1$"):
        DataRAM(unsigned(8), 1)
    with pytest.raises(ValueError, match=r"^DataRAM readers must be a positive integer, not 0$"):
        DataRAM(unsigned(8), 4, 0)
    assert repr(DataRAM(unsigned(8), 4, readers=2)) == "DataRAM(unsigned(8), 4, readers=2)"


@pytest.mark.parametrize("readers", [1, 2])
def test_reads_in_two_cycles(readers):
    """Random writes and reads against a model: a write is stored at the clock edge after
    next; ``data`` is the word at the address of two cycles before, read where ``en`` was high
    the cycle after; a disabled read keeps the word."""
    depth, width = 24, 12
    dut = DataRAM(unsigned(width), depth, readers)
    rng = random.Random(readers)
    words = {}

    async def bench(ctx):
        # fill, then mixed traffic; a read never hits the address written in the same cycle
        held = [None] * readers
        pipe = [[None, None] for _ in range(readers)]   # word read one and two cycles ago
        staged = None                                   # the write in the write stage
        for cycle in range(400):
            wa = rng.randrange(depth) if cycle >= depth else cycle
            we = cycle < depth or rng.random() < 0.4
            wd = rng.randrange(1 << width)
            ctx.set(dut.write.addr, wa)
            ctx.set(dut.write.data, wd)
            ctx.set(dut.write.en, we)
            reads = []
            for i in range(readers):
                port = dut.read_port(i)
                # never the address written in this cycle or the one before
                ra = rng.choice([a for a in range(depth) if not (we and a == wa)
                                 and not (staged and a == staged[0])])
                en = rng.random() < 0.8
                ctx.set(port.addr, ra)
                ctx.set(port.en, en)
                reads.append((ra, en))
            for i in range(readers):
                if pipe[i][1] is not None:
                    assert ctx.get(dut.read_port(i).data) == pipe[i][1], (cycle, i)
            for i, (ra, en) in enumerate(reads):
                if en and cycle > depth + 1:
                    held[i] = words.get(ra)
                elif en:
                    held[i] = None
                pipe[i] = [held[i], pipe[i][0]]
            if staged:
                words[staged[0]] = staged[1]
            staged = (wa, wd) if we else None
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def _synthesize(tmp_path, name, ram, platform):
    return synth_ecp5(tmp_path, name, verilog.convert(ram, name="top", platform=platform))


def _blocks(module):
    """``[(DATA_WIDTH_B, REGMODE_B, {pin: top-level port bit or constant})]``, each block's
    ``DOB`` pins followed through a flip-flop if one takes them, in the order of their first
    data output."""
    port_bits = {}
    for port, info in module["ports"].items():
        for i, bit in enumerate(info["bits"]):
            port_bits[bit] = f"{port}[{i}]"
    through_ff, behind_ff = {}, {}       # D -> Q (the outputs), Q -> D (the write stage)
    for cell in module["cells"].values():
        if cell["type"] == "TRELLIS_FF":
            d, q = cell["connections"]["DI"][0], cell["connections"]["Q"][0]
            through_ff[d], behind_ff[q] = q, d
    blocks = []
    for cell in module["cells"].values():
        if cell["type"] != "DP16KD":
            continue
        pins = {}
        for pin, bits in cell["connections"].items():
            bit = bits[0]
            if pin.startswith("DOB"):
                bit = through_ff.get(bit, bit)
            elif pin.startswith("DOA"):
                continue
            else:
                bit = behind_ff.get(bit, bit)
            if pin.startswith("DO") and not isinstance(bit, str) and bit not in port_bits:
                continue                                # an output nothing reads
            if isinstance(bit, str):
                pins[pin] = "0" if bit == "x" else bit  # an unused input: Yosys x, the module 0
            else:
                pins[pin] = port_bits.get(bit, "logic")
        params = cell["parameters"]
        blocks.append((int(params["DATA_WIDTH_B"], 2), params["REGMODE_B"], pins))
    return sorted(blocks, key=lambda b: (b[2]["CEB"], b[2]["DOB0"]))


@pytest.mark.slow
@pytest.mark.parametrize("width, depth, readers", [(16, 1024, 1), (8, 2048, 1), (20, 1000, 1),
                                                   (16, 2048, 2)])
def test_ecp5_form_matches_inferred_mapping(tmp_path, width, depth, readers):
    bits, blocks = dp16kd_organization(width, depth)
    inferred = _synthesize(tmp_path, "inferred", DataRAM(unsigned(width), depth, readers), None)
    placed = _synthesize(tmp_path, "placed", DataRAM(unsigned(width), depth, readers),
                         FamilyPlatform("ecp5"))
    a, b = _blocks(inferred), _blocks(placed)
    assert len(a) == len(b) == blocks * readers
    for (wa, ra, pa), (wb, rb, pb) in zip(a, b):
        assert (wa, ra, rb) == (bits, "NOREG", "OUTREG")
        assert pa == pb
    ffs = [sum(c["type"] == "TRELLIS_FF" for c in m["cells"].values()) for m in (inferred, placed)]
    stage = (depth - 1).bit_length() + width + 1       # the write stage: address, data, enable
    # the block's output register replaces the fabric's
    assert ffs == [stage + width * readers, stage]


def test_ecp5_form_only_for_ecp5():
    """The generic form elsewhere, and on ECP5 for a memory deeper than one block."""
    for platform in (None, FamilyPlatform("ice40")):
        assert "DP16KD" not in verilog.convert(DataRAM(unsigned(8), 64), platform=platform)
    assert "DP16KD" not in verilog.convert(DataRAM(unsigned(1), 16385),
                                           platform=FamilyPlatform("ecp5"))
    text = verilog.convert(DataRAM(unsigned(40), 64, readers=2), platform=FamilyPlatform("ecp5"))
    assert text.count("DP16KD #(") == 6
