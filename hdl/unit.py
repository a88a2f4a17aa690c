"""What every hardware unit shares: the status port and the error codes.

Each unit of the library is a :class:`~amaranth.lib.wiring.Component` whose stream ports are named
after the ports of the graph node it implements (``in0``, ``in1``, ``ref``, ``select`` in;
``out``, ``flags``, ``out0``..., ``data``, ``select`` out) and which has one more port,
``status``, of :data:`StatusSignature`:

=============  =====  ===========================================================================
member         flow   meaning
=============  =====  ===========================================================================
``busy``       out    the unit holds or is working on a beat this cycle
``stall_in``   out    the unit waits for an input beat (an input it needs is not valid)
``stall_out``  out    the unit has a beat for an output that is not ready
``error``      out    sticky: a run-time fault was detected (stays high until reset)
``code``       out    the :class:`ErrorCode` of the first fault (0 while ``error`` is low)
=============  =====  ===========================================================================

The system top counts ``busy``/``stall_in``/``stall_out`` cycles per unit and reports ``code``
with the unit's id. A unit that raises ``error`` stops accepting input, so a fault never turns
into a silent wrong answer downstream.
"""

import enum
import weakref

from amaranth.hdl import Cat, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

__all__ = ["ErrorCode", "StatusSignature", "ERROR_CODE_BITS", "raise_error", "merge_status",
           "check", "is_int", "check_int", "check_ints", "check_choice"]

ERROR_CODE_BITS = 4

#: The error registers of each status port, per :class:`~amaranth.hdl.Module` being built
#: (``{id(status): (status, error_flag, error_code)}``; the status object is kept so that its id
#: cannot be reused while the module lives).
_ERROR_REGS = weakref.WeakKeyDictionary()


class ErrorCode(enum.IntEnum):
    """Run-time faults a unit can flag (semantics section 6)."""
    NONE = 0
    #: Lock-step inputs disagree on stop/has_data/last (Map, Zip, Accum over several streams).
    STOP_MISMATCH = 1
    #: A dynamic size exceeded its declared bound (buffer, dynamic tile, FIFO sized from a bound).
    OVER_BOUND = 2
    #: A partition selector's stop disagrees with the data chunk's terminating stop.
    SELECT_MISMATCH = 3
    #: An input stream ended while the unit still needed beats from it.
    EARLY_END = 4
    #: A stream ended with a buffer still open (Bufferize).
    UNCLOSED_BUFFER = 5
    #: An address outside its tensor (Random/Linear OffChip Load/Store).
    ADDRESS_RANGE = 6
    #: A reference stop disagrees with the data's stop (Expand, reference-driven Streamify).
    REF_MISMATCH = 7
    #: An input still had beats when the unit finished (data left over).
    LEFTOVER = 8
    #: A selector that must be one-hot was not (EagerMerge consumers, address generators).
    NOT_ONE_HOT = 9
    #: A stop level above the stream's rank, or a level the operator cannot accept.
    BAD_STOP = 10
    #: A buffer reference that names no live buffer, or a buffer that does not fill the static
    #: shape its affine replay order needs (PMU read side).
    BAD_BUFFER = 11
    #: Tiles that must have the same dynamic row count do not (a PCU's lock-step inputs, the
    #: elements of one retile_col accumulation).
    ROW_MISMATCH = 12
    #: The SDRAM chip's model saw a command break one of the chip's timing rules (simulation
    #: target of a ``memory="sdram"`` machine; raised by the memory, not a unit: the System's
    #: ``error_unit`` is :data:`~stepforge.hdl.system.MEMORY_UNIT`, and its ``sdram.violation``
    #: CSR names the rule, :class:`~stepforge.hdl.sdram.SDRAMViolation`).
    SDRAM_TIMING = 13


StatusSignature = wiring.Signature({
    "busy": Out(1),
    "stall_in": Out(1),
    "stall_out": Out(1),
    "error": Out(1),
    "code": Out(ERROR_CODE_BITS),
})


def raise_error(m, status, code, condition):
    """Make ``status.error`` sticky-high with ``code`` the first cycle ``condition`` holds.

    ``status.error`` and ``status.code`` must be driven only through this helper (or
    :func:`merge_status`, for a unit built of parts that each have a status). The registers
    behind them are created the first time it is called for ``status`` while building ``m`` and
    belong to that elaboration alone, so elaborating a unit twice builds its error logic twice.
    """
    per_module = _ERROR_REGS.setdefault(m, {})
    regs = per_module.get(id(status))
    if regs is None:
        err = Signal(name="error_flag")
        code_reg = Signal(ERROR_CODE_BITS, name="error_code")
        m.d.comb += [status.error.eq(err), status.code.eq(code_reg)]
        regs = per_module[id(status)] = (status, err, code_reg)
    _, err, code_reg = regs
    with m.If(condition & ~err):
        m.d.sync += [err.eq(1), code_reg.eq(int(code))]


def merge_status(m, status, parts):
    """Drive ``status`` from the statuses of the parts a unit is built from.

    ``busy``, ``stall_in``, ``stall_out`` and ``error`` are high when any part's is; ``code`` is
    the code of the last part in ``parts`` whose ``error`` is high.

    The parts should stop raising errors once ``status.error`` is high (each part takes it, or
    a register of it, as an input and gates its fault conditions with it, as one unit gates them
    with its own sticky flag). ``error`` rises the cycle after the first fault as with
    :func:`raise_error`. When the parts take a register of ``status.error`` (the PMU does, to
    keep the OR of the flags off its parts' decisions), a second part may fault in the cycle
    after the first; between faults flagged together the order of ``parts`` decides (the last
    wins, as the last :func:`raise_error` does).
    """
    m.d.comb += [
        status.busy.eq(Cat(p.busy for p in parts).any()),
        status.stall_in.eq(Cat(p.stall_in for p in parts).any()),
        status.stall_out.eq(Cat(p.stall_out for p in parts).any()),
        status.error.eq(Cat(p.error for p in parts).any()),
    ]
    for p in parts:
        with m.If(p.error):
            m.d.comb += status.code.eq(p.code)


def check(ok, unit, name, expected, value, *, error=ValueError):
    """``value`` if ``ok``, else an ``error`` (``ValueError``; ``TypeError`` for a value of the
    wrong kind altogether) "``{unit} {name} must be {expected}, not {value!r}``": the wording of
    every constructor check of the units (Amaranth's own).

    Parameters
    ----------
    ok : bool
        The check passed.
    unit : str
        The class being built (``"PMU"``, ``"ZipUnit"``...).
    name : str
        The parameter, as the caller spells it (``"rank"``, ``"readers[1].order"``).
    expected : str
        What the parameter must be (``"an int >= 1"``, ``"'static' or 'dynamic'"``).
    value
        What it is.
    """
    if not ok:
        raise error(f"{unit} {name} must be {expected}, not {value!r}")
    return value


def is_int(value):
    """``value`` is an ``int`` (a ``bool`` is not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _int_range(lo, hi):
    if lo is None:
        return "" if hi is None else f" <= {hi}"
    return f" >= {lo}" if hi is None else f" in {lo}..{hi}"


def _in_range(value, lo, hi):
    return is_int(value) and (lo is None or value >= lo) and (hi is None or value <= hi)


def check_int(unit, name, value, lo=None, hi=None):
    """``value`` if it is an int in ``lo..hi`` (None: no bound on that side), else a
    ``ValueError`` ("``ZipUnit rank must be an int >= 0, not -1``", see :func:`check`)."""
    return check(_in_range(value, lo, hi), unit, name, f"an int{_int_range(lo, hi)}", value)


def check_ints(unit, name, values, lo=None, hi=None, *, length=None, min_length=0):
    """``tuple(values)`` if ``values`` is a sequence of ints each in ``lo..hi``, of ``length``
    ints (``None``: at least ``min_length``), else a ``ValueError`` ("``PMU shape must be 2 ints
    >= 1, not (3,)``", see :func:`check`)."""
    try:
        got = tuple(values)
    except TypeError:
        got = None
    ok = got is not None and (len(got) == length if length is not None else len(got) >= min_length) \
        and all(_in_range(v, lo, hi) for v in got)
    if length is not None:
        count = f"{length} int{'' if length == 1 else 's'}"
    else:
        count = "ints" if min_length == 0 else f"{min_length} or more ints"
    check(ok, unit, name, f"{count}{_int_range(lo, hi)}", values)
    return got


def check_choice(unit, name, value, choices):
    """``value`` if it is one of ``choices``, else a ``ValueError`` ("``PMU mode must be 'static'
    or 'dynamic', not 'x'``", see :func:`check`)."""
    choices = tuple(choices)
    names = [repr(c) for c in choices]
    expected = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return check(value in choices, unit, name, expected, value)
