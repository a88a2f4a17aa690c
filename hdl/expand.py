"""Expand as hardware: repeat each data element along a reference stream's inner levels."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..contract.beat import beat_signature
from .unit import ErrorCode, StatusSignature, check_int, raise_error

__all__ = ["ExpandUnit"]


class ExpandUnit(wiring.Component):
    """Repeat each data element for every reference element (semantics section 4, Expand).

    The data stream has ``b`` trailing size-1 dimensions where the reference has real ones. Every
    reference beat gives one output beat with the reference's ``has_data``, ``stop`` and
    ``last`` and, as its element, the *current* data element. A reference stop ``S_r`` with
    ``r >= b`` ends the current element's repetition (possibly after zero copies): the data
    element and the stop that follows it are consumed, and that stop must be ``S_r``. The
    reference's ``Done`` must meet the data's ``Done``.

    The current element is read straight from ``in0`` while its beat also carries its stop (the
    canonical framing): then the unit is combinational from ``ref`` to ``out``, one output beat
    per reference beat per cycle, and takes the data beat with the reference beat that ends its
    repetition. When a legal framing puts the element's stop or ``Done`` in a later data beat,
    the element moves into a register (the unit's one register stage) and the reference waits
    for the data beats that carry the stop (and ``Done``) before the ending beat is sent.

    Run-time faults (``status.error`` is sticky and the unit stops accepting input):

    * ``REF_MISMATCH``: the data shows a stop where the reference needs an element, an element
      where the repetition's closing stop is due, or a stop of another level than the reference's.
    * ``EARLY_END``: one input ends while the other still needs beats from it (the data ends
      before the reference needs no more elements, or the reference ends with data left).

    Parameters
    ----------
    elem_type : stepforge.compiler.types.ElemType
        Element type of the data stream (and of the output).
    ref_type : stepforge.compiler.types.ElemType
        Element type of the reference stream (its elements are ignored).
    rank : int
        Rank of both streams (``>= 1``).
    b : int
        Number of expanded (size-1 in the data) levels, ``1 <= b <= rank``.
    row_bound : int or Mapping, optional
        Bound of a dynamic tile row count (see :func:`~stepforge.contract.beat.element_layout`).

    Members
    -------
    in0 : ``In(beat_signature(elem_type, rank))``
        Data beats.
    ref : ``In(beat_signature(ref_type, rank))``
        Reference beats.
    out : ``Out(beat_signature(elem_type, rank))``
        Output beats: the reference's structure, the data's elements.
    status : ``Out(StatusSignature)``
        ``busy`` while a beat is offered or state is held; raises ``REF_MISMATCH`` or
        ``EARLY_END`` (above).

    Raises
    ------
    ValueError
        ``rank`` or ``b`` out of range.
    """

    def __init__(self, elem_type, ref_type, rank, b, *, row_bound=None):
        check_int("ExpandUnit", "rank", rank, 1)
        check_int("ExpandUnit", "b", b, 1, rank)
        self.elem_type, self.ref_type, self.rank, self.b = elem_type, ref_type, rank, b
        super().__init__({
            "in0": In(beat_signature(elem_type, rank, row_bound=row_bound)),
            "ref": In(beat_signature(ref_type, rank, row_bound=row_bound)),
            "out": Out(beat_signature(elem_type, rank, row_bound=row_bound)),
            "status": Out(StatusSignature),
        })

    def __repr__(self):
        return f"ExpandUnit({self.elem_type!r}, {self.ref_type!r}, {self.rank}, {self.b})"

    def elaborate(self, platform):
        m = Module()
        d, r, o = self.in0, self.ref, self.out
        D, R = d.payload, r.payload
        error = self.status.error

        # State. ``have_cur``: the current element sits in ``cur`` (its beat has been taken, its
        # stop is still to come). ``d_tail``: the data beat on ``in0`` has had its element and stop
        # consumed; only its Done is left. ``matched``: the reference beat on ``ref`` has had its
        # repetition-ending stop matched; it waits for the data's bare Done.
        cur = Signal.like(D.data, name="cur")
        have_cur = Signal(name="have_cur")
        d_tail = Signal(name="d_tail")
        matched = Signal(name="matched")

        d_elem = Signal(name="d_elem")    # an unconsumed data element heads ``in0``
        cur_ok = Signal(name="cur_ok")    # a current element exists
        d_bare = Signal(name="d_bare")    # ``in0`` holds a bare Done
        m.d.comb += [
            d_elem.eq(d.valid & ~d_tail & ~have_cur & D.has_data),
            cur_ok.eq(have_cur | d_elem),
            d_bare.eq(d.valid & ~D.has_data & (D.stop == 0) & D.last),
        ]
        # An element whose stop is not in its own beat moves into ``cur`` at once.
        hoist = Signal(name="hoist")
        m.d.comb += hoist.eq(d_elem & (D.stop == 0) & ~D.last)

        # What the reference beat needs, decided in one cycle:
        ok = Signal(name="ok")              # send the output beat (then take ``ref``)
        take_d = Signal(name="take_d")      # ... and take the data beat with it
        tail_d = Signal(name="tail_d")      # ... and keep the data beat for its Done
        wait_done = Signal(name="wait_done")  # take the data beat now, keep ``ref`` (-> matched)
        mismatch = Signal(name="mismatch")
        early = Signal(name="early")
        r_end = Signal(name="r_end")
        m.d.comb += r_end.eq(R.stop >= self.b)

        def stop_found(level, done_here):
            # The data stop that ends the repetition is ``level``; ``done_here``: Done follows it.
            with m.If(level != R.stop):
                m.d.comb += mismatch.eq(1)
            with m.Elif(R.last & ~done_here):
                m.d.comb += wait_done.eq(1)
            with m.Else():
                m.d.comb += ok.eq(1)
                with m.If(done_here & ~R.last):
                    m.d.comb += tail_d.eq(1)
                with m.Else():
                    m.d.comb += take_d.eq(1)

        with m.If(r.valid & ~error):
            with m.If(R.has_data & ~cur_ok):
                with m.If(d_tail):
                    m.d.comb += early.eq(1)
                with m.Elif(d.valid):  # the data shows a stop or a bare Done
                    with m.If(D.stop != 0):
                        m.d.comb += mismatch.eq(1)
                    with m.Else():
                        m.d.comb += early.eq(1)
            with m.Elif(matched):
                with m.If(d_bare):
                    m.d.comb += [ok.eq(1), take_d.eq(1)]
                with m.Elif(d.valid):
                    m.d.comb += early.eq(1)
            with m.Elif(r_end):
                with m.If(have_cur):
                    with m.If(d.valid):
                        with m.If(D.has_data):
                            m.d.comb += mismatch.eq(1)
                        with m.Elif(D.stop == 0):
                            m.d.comb += early.eq(1)
                        with m.Else():
                            stop_found(D.stop, D.last)
                with m.Elif(d_tail):
                    m.d.comb += early.eq(1)
                with m.Elif(d.valid):
                    with m.If(D.stop != 0):
                        stop_found(D.stop, D.last)
                    with m.Elif(D.has_data & ~D.last):
                        pass  # the element is hoisted this cycle; its stop comes next
                    with m.Else():
                        m.d.comb += early.eq(1)
            with m.Elif(R.last):  # Done with no repetition to end: the data must be at Done
                with m.If(have_cur):
                    m.d.comb += early.eq(1)
                with m.Elif(d_tail | d_bare):
                    m.d.comb += [ok.eq(1), take_d.eq(1)]
                with m.Elif(d.valid):
                    m.d.comb += early.eq(1)
            with m.Else():
                m.d.comb += ok.eq(1)
        raise_error(m, self.status, ErrorCode.REF_MISMATCH, mismatch)
        raise_error(m, self.status, ErrorCode.EARLY_END, early & ~mismatch)

        go = Signal(name="go")
        m.d.comb += [
            o.payload.has_data.eq(R.has_data),
            o.payload.stop.eq(R.stop),
            o.payload.last.eq(R.last),
            o.valid.eq(ok),
            go.eq(ok & o.ready),
            r.ready.eq(go),
            d.ready.eq((go & take_d) | wait_done | (hoist & ~error & ~mismatch & ~early)),
        ]
        with m.If(R.has_data):  # else the data field stays 0 (it is ignored, but stable)
            with m.If(have_cur):
                m.d.comb += o.payload.data.eq(cur)
            with m.Else():
                m.d.comb += o.payload.data.eq(D.data)

        with m.If(hoist & d.ready | wait_done & R.has_data & ~have_cur):
            m.d.sync += [cur.eq(D.data), have_cur.eq(1)]
        with m.If(wait_done):
            m.d.sync += matched.eq(1)
        with m.If(go & (r_end | matched | R.last)):
            m.d.sync += [have_cur.eq(0), matched.eq(0), d_tail.eq(tail_d)]

        m.d.comb += [
            self.status.busy.eq(r.valid | d.valid | have_cur | d_tail | matched),
            self.status.stall_in.eq(~r.valid | (~ok & ~wait_done & ~error & ~mismatch & ~early)),
            self.status.stall_out.eq(o.valid & ~o.ready),
        ]
        return m
