"""Reassemble as hardware: gather one chunk from each selected input, close a new dimension."""

from amaranth.hdl import Cat, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..compiler.types import Select
from ..contract.beat import beat_signature, stop_above
from .mux import one_hot_mux
from .unit import ErrorCode, StatusSignature, check_int, raise_error

__all__ = ["ReassembleUnit"]


class ReassembleUnit(wiring.Component):
    """For each selector element, forward one chunk of every selected input in ascending input
    index, then close a new dimension (semantics section 4, Reassemble; ``docs/routing.md``).

    Every input is a rank-``b`` stream: a chunk is everything up to and including its stop
    ``S_b`` (one element beat when ``b = 0``). For a selector element with mask ``M`` and stop
    ``S_k`` (``k = 0``: none) the unit forwards, for each set bit ``j`` of ``M`` from the lowest,
    the next chunk of ``in{j}`` unchanged, except that the last chunk of the group ends with
    ``S_(b+1+k)`` instead of ``S_b`` (at ``b = 0`` its element gets the stop ``S_(1+k)``). A mask
    with no bit set, and a stop-only selector beat ``S_k``, give one stop-only beat
    ``S_(b+1+k)`` (an empty group). The output has rank ``select_rank + b + 1``.

    Timing. The selector element sits in a register with the bits still to serve; the input
    with the lowest remaining bit is multiplexed onto ``out``. The next selector element loads
    in the same cycle as the last beat of a group moves, so groups follow each other with no
    gap: one beat per cycle on ``out``, 0 extra cycles per chunk and per group (the first
    selector element costs one cycle of latency; an empty group costs its one stop-only beat).
    After the selector has ended, every input must show its ``Done`` (fused into its last beat or
    as a bare beat, consumed then, all inputs in the same cycle), and ``out`` sends a bare
    ``Done`` beat (one cycle; one more when an input's bare ``Done`` is still to be consumed).
    Cost: ``out``'s payload is an ``n``-to-1 AND-OR multiplexer over the one-hot choice, about
    ``n - 1`` LUT4 per payload bit; everything else is a few registers of ``n`` bits.

    Run-time faults (sticky ``status.error``; the unit stops moving beats), detected on the beat
    that shows them, before it is forwarded:

    ===========================  ==========================================================
    code                         when
    ===========================  ==========================================================
    ``EARLY_END``                a selected input has ended (``Done``) or ends inside a chunk
    ``LEFTOVER``                 the selector has ended and an input offers another beat than
                                 a bare ``Done``
    ``NOT_ONE_HOT``              ``count`` is given and a mask names another number of inputs
                                 (``count = 1``: the mask is not one-hot)
    ``BAD_STOP``                 an input stop above ``b`` or a selector stop above
                                 ``select_rank`` (only when the stop field can hold one)
    ===========================  ==========================================================

    Parameters
    ----------
    elem_type : stepforge.compiler.types.ElemType
        Element type of the inputs and the output.
    n : int
        Number of inputs (``>= 1``).
    b : int
        Chunk rank and rank of every input (``>= 0``).
    select_rank : int
        Rank of the selector stream (``>= 0``).
    count : int, optional
        The number of inputs every mask must name, ``1 <= count <= n`` (the node's ``count``).
    row_bound : int or Mapping, optional
        Bound of a dynamic tile row count (see :func:`~stepforge.contract.beat.element_layout`).

    Members
    -------
    in0 .. in{n-1} : ``In(beat_signature(elem_type, b))``
        The chunk streams.
    select : ``In(beat_signature(Select(n), select_rank))``
        One mask per group.
    out : ``Out(beat_signature(elem_type, select_rank + b + 1))``
        The groups.
    status : ``Out(StatusSignature)``
        ``busy`` until ``out`` has sent ``Done``; ``stall_in`` while the beat the unit needs next
        (selector, the chunk's input, or an input's ``Done``) is not offered; ``stall_out``
        while ``out`` offers a beat that is not taken; ``error``/``code`` as above.

    Raises
    ------
    ValueError
        ``n``, ``b``, ``select_rank`` or ``count`` out of range.
    """

    def __init__(self, elem_type, n, b, select_rank, *, count=None, row_bound=None):
        self.elem_type, self.n, self.b, self.select_rank = elem_type, n, b, select_rank
        self.count, self._row_bound = count, row_bound
        check_int("ReassembleUnit", "n", n, 1)
        check_int("ReassembleUnit", "b", b, 0)
        check_int("ReassembleUnit", "select_rank", select_rank, 0)
        if count is not None:
            check_int("ReassembleUnit", "count", count, 1, n)
        members = {f"in{j}": In(beat_signature(elem_type, b, row_bound=row_bound))
                   for j in range(n)}
        members["select"] = In(beat_signature(Select(n), select_rank))
        members["out"] = Out(beat_signature(elem_type, select_rank + b + 1, row_bound=row_bound))
        members["status"] = Out(StatusSignature)
        super().__init__(members)

    def __repr__(self):
        extra = f", count={self.count}" if self.count is not None else ""
        extra += f", row_bound={self._row_bound!r}" if self._row_bound is not None else ""
        return (f"ReassembleUnit({self.elem_type!r}, {self.n}, {self.b}, "
                f"{self.select_rank}{extra})")

    @property
    def inputs(self):
        """The input ports ``in0 .. in{n-1}`` in order."""
        return [getattr(self, f"in{j}") for j in range(self.n)]

    def elaborate(self, platform):
        m = Module()
        n, b = self.n, self.b
        ins, s, o = self.inputs, self.select.payload, self.out
        status = self.status

        err = Signal(name="err")
        m.d.comb += err.eq(status.error)

        # -- state ------------------------------------------------------------------------
        cur_valid = Signal(name="cur_valid")          # a selector element is held
        cur_rem = Signal(n, name="cur_rem")           # inputs still to serve in this group
        cur_k = Signal.like(s.stop, name="cur_k")
        sel_done = Signal(name="sel_done")            # the selector's Done was taken
        in_done = Signal(n, name="in_done")           # inputs whose Done was taken
        end_sent = Signal(name="end_sent")            # out's bare Done was taken

        # -- the input whose chunk moves: the lowest remaining bit ----------------------------
        pick = Signal(n, name="pick")
        m.d.comb += pick.eq(cur_rem & (~cur_rem + 1))
        x_data = Signal(Value.cast(ins[0].payload.data).shape(), name="x_data")
        x_has = Signal(name="x_has_data")
        x_stop = Signal(Value.cast(ins[0].payload.stop).shape(), name="x_stop")
        x_last = Signal(name="x_last")
        x_valid = Signal(name="x_valid")
        x_done = Signal(name="x_done")
        # AND-OR multiplexer over the one-hot pick
        m.d.comb += [
            x_data.eq(one_hot_mux(pick, [Value.cast(p.payload.data) for p in ins])),
            x_has.eq(Cat(pick[j] & ins[j].payload.has_data for j in range(n)).any()),
            x_stop.eq(one_hot_mux(pick, [p.payload.stop for p in ins])),
            x_last.eq(Cat(pick[j] & ins[j].payload.last for j in range(n)).any()),
            x_valid.eq(Cat(pick[j] & ins[j].valid for j in range(n)).any()),
            x_done.eq((pick & in_done).any()),
        ]
        ends = Signal(name="ends")
        last_of_group = Signal(name="last_of_group")
        m.d.comb += [
            ends.eq(x_stop >= b if b > 0 else x_has),
            last_of_group.eq((cur_rem & ~pick) == 0),
        ]

        chunk_mode = Signal(name="chunk_mode")        # a chunk of in{pick} moves
        empty_mode = Signal(name="empty_mode")        # an empty group: one stop-only beat
        tail_mode = Signal(name="tail_mode")          # selector ended; inputs show their Done
        end_mode = Signal(name="end_mode")            # everything ended: out sends Done
        m.d.comb += [
            chunk_mode.eq(cur_valid & (cur_rem != 0)),
            empty_mode.eq(cur_valid & (cur_rem == 0)),
            tail_mode.eq(sel_done & ~cur_valid & ~in_done.all()),
            end_mode.eq(sel_done & ~cur_valid & in_done.all()),
        ]

        # -- faults ---------------------------------------------------------------------------
        bad_stop = Signal(name="bad_stop")
        f_early = Signal(name="f_early")
        f_leftover = Signal(name="f_leftover")
        f_sel_stop = Signal(name="f_sel_stop")
        f_count = Signal(name="f_count")
        leftover = Signal(n, name="leftover")
        in_bad = Signal(n, name="in_bad_stop")
        bare = Signal(n, name="bare")                 # inputs offering a bare Done beat
        for j, p in enumerate(ins):
            m.d.comb += [
                bare[j].eq(p.valid & ~p.payload.has_data & (p.payload.stop == 0) & p.payload.last),
                in_bad[j].eq(p.valid & stop_above(p.payload.stop, b)),
                leftover[j].eq(tail_mode & ~in_done[j] & p.valid & ~bare[j]),
            ]
        fault = Signal(name="fault")
        m.d.comb += [
            bad_stop.eq((chunk_mode & (pick & in_bad).any())
                        | (tail_mode & (leftover & in_bad).any())),
            f_early.eq(chunk_mode & ~bad_stop & (x_done | (x_valid & x_last & ~ends))),
            f_leftover.eq(~bad_stop & leftover.any()),
            fault.eq(bad_stop | f_early | f_leftover),
        ]

        # -- output -----------------------------------------------------------------------
        close = Signal.like(o.payload.stop, name="close")  # S_(b+1+k) closes a group
        m.d.comb += close.eq(cur_k + (b + 1))
        # The data field and has_data come from the multiplexer, always: outside a chunk no
        # bit remains to serve, so pick is 0 and they are 0 (stable, and no gating per bit).
        m.d.comb += [
            o.payload.data.eq(x_data),
            o.payload.has_data.eq(x_has),
        ]
        with m.If(chunk_mode):
            m.d.comb += o.valid.eq(x_valid & ~fault & ~err)
            with m.If(ends & last_of_group):
                m.d.comb += o.payload.stop.eq(close)
            with m.Elif(ends):
                m.d.comb += o.payload.stop.eq(b)
            with m.Else():
                m.d.comb += o.payload.stop.eq(x_stop)
        with m.Elif(empty_mode):
            m.d.comb += [
                o.valid.eq(~err),
                o.payload.stop.eq(close),
            ]
        with m.Elif(end_mode):
            m.d.comb += [
                o.valid.eq(~end_sent & ~err),
                o.payload.last.eq(1),
            ]
        o_fire = Signal(name="o_fire")
        m.d.comb += o_fire.eq(o.valid & o.ready)
        with m.If(end_mode & o_fire):
            m.d.sync += end_sent.eq(1)

        for j, p in enumerate(ins):
            m.d.comb += p.ready.eq(((chunk_mode & pick[j] & o_fire)
                                    | (tail_mode & ~in_done[j] & bare[j])) & ~fault & ~err)
            with m.If(p.valid & p.ready & p.payload.last):
                m.d.sync += in_done[j].eq(1)

        # -- selector: the next element loads as the last beat of a group moves ----------------
        advance = Signal(name="advance")
        m.d.comb += [
            advance.eq(o_fire & (empty_mode | (chunk_mode & ends & last_of_group))),
            self.select.ready.eq((~cur_valid | advance) & ~sel_done & ~err),
        ]
        popcount = sum(s.data[j] for j in range(n))
        sel_fire = Signal(name="sel_fire")
        m.d.comb += [
            sel_fire.eq(self.select.valid & self.select.ready),
            f_sel_stop.eq(sel_fire & stop_above(s.stop, self.select_rank)),
            f_count.eq(sel_fire & ~f_sel_stop & s.has_data & (popcount != self.count)
                       if self.count is not None else 0),
        ]
        with m.If(sel_fire):
            m.d.sync += [
                cur_valid.eq(s.has_data | (s.stop != 0)),
                cur_rem.eq(s.data & s.has_data.replicate(n)),
                cur_k.eq(s.stop),
                sel_done.eq(s.last),
            ]
        with m.Else():
            with m.If(advance):
                m.d.sync += cur_valid.eq(0)
            with m.If(o_fire & chunk_mode & ends):
                m.d.sync += cur_rem.eq(cur_rem & ~pick)

        raise_error(m, status, ErrorCode.BAD_STOP, bad_stop | f_sel_stop)
        raise_error(m, status, ErrorCode.EARLY_END, f_early)
        raise_error(m, status, ErrorCode.LEFTOVER, f_leftover)
        raise_error(m, status, ErrorCode.NOT_ONE_HOT, f_count)

        # -- status -------------------------------------------------------------------------
        in_valid = Signal(n, name="in_valid")
        m.d.comb += in_valid.eq(Cat(p.valid for p in ins))
        m.d.comb += [
            status.busy.eq(~err & ~(end_mode & end_sent)
                           & (cur_valid | sel_done | self.select.valid
                              | in_valid.any())),
            status.stall_in.eq(~err & ((chunk_mode & ~x_valid)
                                       | (~cur_valid & ~sel_done & ~self.select.valid)
                                       | (tail_mode & ~(in_valid | in_done).all()))),
            status.stall_out.eq(o.valid & ~o.ready),
        ]
        return m
