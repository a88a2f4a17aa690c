"""The ECP5 board build's lane RAM instantiates ``DP16KD`` blocks wired as Yosys wires them.

No simulation model of ``DP16KD`` comes with the tools (Yosys's is a black box), so the
instantiated lane (:func:`~stepforge.hdl.memory.lane_ram_verilog` with ``primitives=True``) is
checked against Yosys's own mapping of the inferred lane: both are synthesized with
``synth_ecp5`` and each block's width, address pins and data pins must connect to the same
signals; the instantiated blocks have their output register on, and where the inferred lane
has a flip-flop right after each block (one bank), the instantiated lane has none.
"""


import pytest

from stepforge.hdl.memory import lane_ram_verilog, organize

from .helpers import synth_ecp5

pytestmark = pytest.mark.slow

TOP = """
module top(input clk, input [{aw1}:0] addr, input [{w1}:0] wdata, input we, output [{w1}:0] rdata);
  stepforge_lane_ram #(.WIDTH({width}), .DEPTH({depth}), .AW({aw}), .SLICE({slice}), .ROWS({rows}),
                       .BANKS({banks}), .TSLICE({tslice}), .TROWS({trows})) u (.clk(clk), .addr(addr), .wdata(wdata), .we(we),
                       .rdata(rdata));
endmodule
"""


def _blocks(module):
    """``[(DATA_WIDTH_A, REGMODE_A, {pin: top-level signal bit or constant})]`` in the order of
    their first data input bit."""
    names = {}
    for net, info in module["netnames"].items():
        # a net that a techmapped cell drives (a bank's write enable) is "logic": its name
        # depends on the order Yosys mapped the cells in
        if "." not in net and not net.startswith("$") and "_LUT4_" not in net:
            for i, bit in enumerate(info["bits"]):
                names[bit] = f"{net}[{i}]"
    blocks = []
    for cell in module["cells"].values():
        if cell["type"] != "DP16KD":
            continue
        pins = {}
        for pin in [f"ADA{i}" for i in range(14)] + [f"DIA{i}" for i in range(18)]:
            bit = cell["connections"][pin][0]
            # a data bit beyond the slice is never read back: Yosys leaves it x, the module 0
            pins[pin] = ("0" if bit == "x" else bit) if isinstance(bit, str) else names.get(bit, "logic")
        blocks.append((int(cell["parameters"]["DATA_WIDTH_A"], 2), cell["parameters"]["REGMODE_A"],
                       pins))
    return sorted(blocks, key=lambda b: str(b[2]["DIA0"]))


@pytest.mark.parametrize("width, depth", [(8, 2048), (32, 1024), (16, 4096), (8, 3000), (32, 4176)])
def test_dp16kd_lane_matches_inferred_mapping(tmp_path, width, depth):
    org = organize("ecp5", width, depth)
    aw = max(1, (depth - 1).bit_length())
    top = TOP.format(aw1=aw - 1, w1=width - 1, width=width, depth=depth, aw=aw, slice=org.slice,
                     rows=org.rows, banks=org.banks, tslice=org.last[0], trows=org.last[1])
    inferred = synth_ecp5(tmp_path, "inferred",
                          lane_ram_verilog(zero_init=False, family="ecp5") + top)
    placed = synth_ecp5(tmp_path, "placed",
                        lane_ram_verilog(zero_init=False, family="ecp5", primitives=True) + top)
    a, b = _blocks(inferred), _blocks(placed)
    assert len(a) == len(b) == org.blocks(width)
    for (wa, ra, pa), (wb, rb, pb) in zip(a, b):
        assert (wa, ra, rb) == (wb, "NOREG", "OUTREG")
        assert pa == pb
    ffs = [sum(c["type"] == "TRELLIS_FF" for c in m["cells"].values()) for m in (inferred, placed)]
    if org.banks == 1:
        assert ffs == [width, 0]              # the block's output register replaces the fabric's
    else:
        assert ffs[1] == ffs[0] - org.banks * width   # each bank's held word moves into its blocks


def test_primitives_only_for_an_ecp5_board_build():
    with pytest.raises(ValueError, match="primitives exist for family 'ecp5' only, not 'ice40'"):
        lane_ram_verilog(zero_init=False, family="ice40", primitives=True)
    with pytest.raises(ValueError, match="primitives are for a board build"):
        lane_ram_verilog(zero_init=True, family="ecp5", primitives=True)
