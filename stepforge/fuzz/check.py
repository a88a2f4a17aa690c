"""Running a generated program both ways and classifying what happened.

:func:`check` builds the program twice from its text (the lowering rewrites the program it is
given), runs one copy in the reference interpreter and the other in Verilator, and compares every
output stream token for token, every output tensor bit for bit and the off-chip traffic the
hardware counted against the interpreter's. The :class:`Outcome`'s ``kind`` is one of
:data:`KINDS`; everything but ``pass`` is a failure worth a reproducer.
"""

import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from ..compiler.errors import LoweringError, StepError, StepRuntimeError
from ..hdl.unit import ErrorCode
from ..runner import _tokens_equal
from ..sim.ref.interpreter import run
from ..sim.rtl import compile_program, deadlock_report, error_report, run_rtl
from .data import random_data

__all__ = ["Outcome", "check", "KINDS", "FAILURES"]

#: Every outcome, in the order the summary lists them.
KINDS = ("pass", "rejected", "invalid", "interp-crash", "unsupported", "crash", "mismatch",
         "traffic", "flag", "deadlock", "timeout")
#: The outcomes that are bugs (``rejected`` and ``invalid`` are bugs of the generator).
FAILURES = KINDS[1:]


@dataclass
class Outcome:
    """What one run of one program gave.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    detail : str
        What differed, the error report, or the exception.
    signature : str
        What must stay the same while shrinking (the kind, and the exception type of a crash).
    seconds : dict
        Time spent per phase.
    cycles : int or None
    """
    kind: str
    detail: str = ""
    signature: str = ""
    seconds: dict = field(default_factory=dict)
    cycles: int = None

    @property
    def failed(self):
        return self.kind != "pass"


def _exception(kind, e):
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-6))
    return Outcome(kind, f"{type(e).__name__}: {e}\n{tb}", f"{kind}:{type(e).__name__}")


def interpret(fp, data_seed=0):
    """``(program, data, result or Outcome)``: the program built and run in the interpreter."""
    try:
        program = fp.build()
    except (StepError, ValueError, TypeError) as e:
        return None, None, _exception("rejected", e)
    data = random_data(program, data_seed, fp.hints)
    try:
        ref = run(program, data["tensors"], data["inputs"], keep_edges=True)
    except StepRuntimeError as e:
        return program, data, _exception("invalid", e)
    except Exception as e:  # noqa: BLE001 (any interpreter crash is an outcome)
        return program, data, _exception("interp-crash", e)
    return program, data, ref


def compare(program, ref, res, hw_ref):
    """The first difference between the hardware's results and the interpreter's, or None."""
    for name, t in program.tensors.items():
        if t.role not in ("output", "inout"):
            continue
        got, want = res.tensors.get(name), ref.tensors[name]
        if got is None or got.dtype != want.dtype or not np.array_equal(got, want):
            bad = "missing" if got is None else int(np.count_nonzero(got != want))
            return "mismatch", f"tensor {name}: {bad} of {want.size} elements differ"
    for node in program.outputs:
        got, want = res.outputs.get(node.name), ref.edges[node.inputs[0]]
        if got is None or not _tokens_equal(got, want):
            n = "missing" if got is None else f"{len(got)} tokens, expected {len(want)}"
            first = next((i for i, (a, b) in enumerate(zip(got or [], want))
                          if not _tokens_equal([a], [b])), None)
            return "mismatch", f"output {node.name}: {n}; first difference at token {first}"
    read = sum(hw_ref.offchip_read.values())
    written = sum(hw_ref.offchip_written.values())
    if (res.tensor_bytes_read, res.tensor_bytes_written) != (read, written):
        return "traffic", (f"off-chip bytes read/written: hardware {res.tensor_bytes_read}/"
                           f"{res.tensor_bytes_written}, interpreter {read}/{written}")
    return None


def check(fp, *, data_seed=0, stall=False, rtl=True, watchdog=10_000, max_cycles=2_000_000,
          ref=None, design=None):
    """Run ``fp`` and classify the result; see :data:`KINDS`.

    Parameters
    ----------
    fp : FuzzProgram
    data_seed : int
        Seed of the host data (:func:`~stepforge.fuzz.data.random_data`).
    stall : bool
        Random back-pressure on every FIFO and the memory.
    rtl : bool
        Also run in Verilator (else the interpreter only).
    ref : tuple, optional
        A previous :func:`interpret` of the same program and data seed, to reuse.
    design : dict, optional
        Where the program's hardware build is kept between the runs of one program (its built
        program and :func:`~stepforge.sim.rtl.compile_program`'s result, filled by the first
        run): a run under stalls reuses the Verilog of the run without.
    """
    t0 = time.perf_counter()
    program, data, ref = ref or interpret(fp, data_seed)
    seconds = {"interpret": time.perf_counter() - t0}
    if isinstance(ref, Outcome):
        ref.seconds = seconds
        return ref
    if not rtl:
        return Outcome("pass", seconds=seconds)
    t0 = time.perf_counter()
    design = {} if design is None else design
    try:
        if "program" not in design:
            built = fp.build()
            design.update(compiled=compile_program(built), program=built)
        hw_program = design["program"]
        res = run_rtl(hw_program, data["tensors"], data["inputs"], stall=stall, watchdog=watchdog,
                      max_cycles=max_cycles, compiled=design["compiled"])
    except LoweringError as e:
        out = _exception("unsupported", e)
        out.seconds = seconds
        return out
    except Exception as e:  # noqa: BLE001 (a crash anywhere in the flow is an outcome)
        out = _exception("crash", e)
        out.seconds = seconds
        return out
    seconds.update(res.timings)
    seconds["rtl"] = time.perf_counter() - t0
    cycles = res.csrs.get("cycles")
    if res.status == "deadlock":
        return Outcome("deadlock", deadlock_report(res), "deadlock", seconds, cycles)
    if res.status == "error":
        unit = res.hw.units[res.csrs["error_unit"]]
        code = ErrorCode(res.csrs["error_code"]).name
        return Outcome("flag", error_report(res), f"flag:{unit.kind}:{code}", seconds, cycles)
    if res.status != "done":
        return Outcome("timeout", f"status {res.status} after {cycles} cycles", res.status,
                       seconds, cycles)
    hw_ref = ref if res.hw.program is hw_program else run(res.hw.program, data["tensors"],
                                                          data["inputs"])
    diff = compare(program, ref, res, hw_ref)
    if diff:
        return Outcome(diff[0], diff[1], diff[0], seconds, cycles)
    return Outcome("pass", seconds=seconds, cycles=cycles)
