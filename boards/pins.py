"""The ports of a Verilog top module, and a pin wrapper for packages with too few pins.

A build puts every port of the top module on a package pin when the package has enough
(the ECP5-85F's CABGA381 has 365). The iCE40 UP5K's SG48 has 39 user pins, fewer than a
stepforge system has port bits, so there the design is placed inside :func:`pin_wrapper`: the
clock and the reset stay on pins, every other input bit comes from a shift register loaded
through one pin, and every output bit is registered and XOR-reduced into one registered pin.
Nothing of the design can then be optimized away (each input is unknown, each output is
observed) and every path into or out of the design starts or ends at a flip-flop. The wrapper
costs one flip-flop per port bit and an XOR tree over the outputs; a report counts it apart
from the design (the ``(pins)`` row).
"""

import re
from dataclasses import dataclass

__all__ = ["Port", "top_ports", "pin_wrapper", "WRAPPER", "INSTANCE"]

#: the module name of the pin wrapper and the instance name of the design inside it
WRAPPER = "stepforge_pins"
INSTANCE = "dut"

_DECL = re.compile(r"^\s*(input|output|inout)\b\s*(?:wire\b|reg\b)?\s*(?:signed\b)?\s*"
                   r"(?:\[\s*(\d+)\s*:\s*(\d+)\s*\])?\s*([A-Za-z_][\w$]*)", re.M)


@dataclass(frozen=True)
class Port:
    """A port of a Verilog module: ``direction`` (``"input"``, ``"output"``, ``"inout"``),
    ``name`` and ``width`` in bits."""
    direction: str
    name: str
    width: int


def _module_text(verilog, top):
    m = re.search(rf"^\s*module\s+{re.escape(top)}\s*[(#;]", verilog, re.M)
    if m is None:
        raise ValueError(f"the Verilog has no module {top!r}")
    end = verilog.find("endmodule", m.end())
    return verilog[m.start():end if end >= 0 else len(verilog)]


def top_ports(verilog, top="top"):
    """The ports of module ``top`` in ``verilog`` (port declarations in the body or the header).

    Raises
    ------
    ValueError
        The text has no module ``top``, or it declares no port.
    """
    body = _module_text(verilog, top)
    ports = {}
    for direction, msb, lsb, name in _DECL.findall(re.sub(r"[,(]", "\n", body)):
        width = abs(int(msb) - int(lsb)) + 1 if msb else 1
        ports.setdefault(name, Port(direction, name, width))
    if not ports:
        raise ValueError(f"module {top!r} declares no port")
    return list(ports.values())


def pin_wrapper(ports, top="top", *, clock="clk", reset="rst"):
    """Verilog of module :data:`WRAPPER` that instantiates ``top`` as :data:`INSTANCE` on four
    pins: ``clock``, ``reset``, ``sdi`` (shifted into every other input) and ``sdo`` (the XOR
    of every output bit, registered).

    Raises
    ------
    ValueError
        ``ports`` has no input called ``clock``, or has an ``inout`` port.
    """
    by_name = {p.name: p for p in ports}
    if by_name.get(clock, Port("output", clock, 1)).direction != "input":
        raise ValueError(f"the top module must have an input {clock!r} (its clock)")
    if any(p.direction == "inout" for p in ports):
        raise ValueError("a pin wrapper cannot shift an inout port: "
                         f"{', '.join(p.name for p in ports if p.direction == 'inout')}")
    direct = [n for n in (clock, reset) if n in by_name and by_name[n].direction == "input"]
    ins = [p for p in ports if p.direction == "input" and p.name not in direct]
    outs = [p for p in ports if p.direction == "output"]
    n_in, n_out = sum(p.width for p in ins), sum(p.width for p in outs)
    lines = [f"module {WRAPPER}({', '.join(direct)}, sdi, sdo);"]
    lines += [f"  input {n};" for n in direct]
    lines += ["  input sdi;", "  output reg sdo;"]
    conns = [f".{n}({n})" for n in direct]
    if n_in:
        lines.append(f"  reg [{n_in - 1}:0] shift_in;")
        lines.append(f"  always @(posedge {clock}) shift_in <= "
                     + ("sdi;" if n_in == 1 else f"{{shift_in[{n_in - 2}:0], sdi}};"))
    if n_out:
        lines.append(f"  wire [{n_out - 1}:0] outs;")
        lines.append(f"  reg [{n_out - 1}:0] outs_q;")
        lines.append(f"  always @(posedge {clock}) begin outs_q <= outs; sdo <= ^outs_q; end")
    else:
        lines.append(f"  always @(posedge {clock}) sdo <= 1'b0;")
    lo = 0
    for p in ins:
        conns.append(f".{p.name}(shift_in[{lo + p.width - 1}:{lo}])")
        lo += p.width
    lo = 0
    for p in outs:
        conns.append(f".{p.name}(outs[{lo + p.width - 1}:{lo}])")
        lo += p.width
    lines.append(f"  {top} {INSTANCE}(" + ", ".join(conns) + ");")
    lines.append("endmodule")
    return "\n".join(lines) + "\n"
