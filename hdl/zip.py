"""Zip as hardware: pair lock-step streams into a stream of tuples."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..compiler.types import Tuple
from .beat import beat_signature
from .unit import ErrorCode, StatusSignature, raise_error

__all__ = ["ZipUnit"]


class ZipUnit(wiring.Component):
    """Pair streams of identical shape and stops (semantics section 4, Zip).

    The inputs advance in lock step: each output beat pairs the inputs' elements and carries
    their common stop and ``Done``. When the inputs' beats are framed alike (the usual case) one
    beat of every input makes one output beat, one per cycle, combinationally. Because a legal
    framing may carry a stop or ``Done`` in a beat of its own (semantics section 2: checkers
    compare tokens, not beats), the lock step is on *tokens*: each input keeps a cursor into its
    current beat, an output beat takes the tokens that every input shows, and an input whose beat
    is used up is taken while the others keep the rest of theirs for the next output beat. So
    ``a S1`` in one beat on ``in0`` and ``a`` then ``S1`` in two beats on ``in1`` pair up
    (in two output beats) instead of being a fault.

    A token that differs between the inputs (an element against a stop or ``Done``, two stop
    levels, a stop against ``Done``) raises ``STOP_MISMATCH``; the unit then stops accepting
    input.

    Parameters
    ----------
    elem_types : sequence of stepforge.compiler.types.ElemType
        Element type of each input (at least two).
    rank : int
        Rank of every input (``>= 0``).
    row_bound : int or Mapping, optional
        Bound of a dynamic tile row count (see :func:`~stepforge.hdl.beat.element_layout`).

    Members
    -------
    in0, in1, ... : ``In(beat_signature(elem_types[k], rank))``
        Input beats.
    out : ``Out(beat_signature(Tuple(*elem_types), rank))``
        Output beats; element field ``f{k}`` comes from ``in{k}``.
    status : ``Out(StatusSignature)``
        ``busy`` while a beat is offered; raises ``STOP_MISMATCH``.

    Raises
    ------
    ValueError
        Fewer than two element types, or ``rank`` is not an int ``>= 0``.
    """

    def __init__(self, elem_types, rank, *, row_bound=None):
        elem_types = tuple(elem_types)
        if len(elem_types) < 2:
            raise ValueError(f"ZipUnit needs at least two element types, got {len(elem_types)}")
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ValueError(f"ZipUnit needs an int rank >= 0, not {rank!r}")
        self.elem_types, self.rank = elem_types, rank
        members = {f"in{k}": In(beat_signature(t, rank, row_bound=row_bound))
                   for k, t in enumerate(elem_types)}
        members["out"] = Out(beat_signature(Tuple(*elem_types), rank, row_bound=row_bound))
        members["status"] = Out(StatusSignature)
        super().__init__(members)

    def __repr__(self):
        return f"ZipUnit({list(self.elem_types)!r}, {self.rank})"

    def elaborate(self, platform):
        m = Module()
        o = self.out
        ports = [getattr(self, f"in{k}") for k in range(len(self.elem_types))]

        # Per input: ``pos`` = tokens of the current beat already consumed (0: none, 1: its
        # element, 2: its element and stop; only Done is left). ``e``, ``s``, ``dn``: the element,
        # stop and Done of the current beat that are still to be consumed.
        pos, e, s, dn = [], [], [], []
        for k, p in enumerate(ports):
            pos_k = Signal(range(3), name=f"pos{k}")
            e_k = Signal(name=f"elem{k}")
            s_k = Signal(name=f"stop{k}")
            m.d.comb += [
                e_k.eq(p.payload.has_data & (pos_k == 0)),
                s_k.eq((p.payload.stop != 0) & (pos_k != 2)),
            ]
            pos.append(pos_k)
            e.append(e_k)
            s.append(s_k)
            dn.append(p.payload.last)


        all_valid = Signal(name="all_valid")
        take_e = Signal(name="take_e")  # every input shows an element
        take_s = Signal(name="take_s")  # ... then every input shows a stop
        take_d = Signal(name="take_d")  # ... then every input shows Done
        mismatch = Signal(name="mismatch")
        s0 = ports[0].payload.stop
        same_level = Cat(*[p.payload.stop == s0 for p in ports[1:]]).all()
        # After the element stage, an input's next token is its stop, else its Done, else the
        # end of its beat (its next token lies in its next beat).
        nxt_d = [~s_k & d_k for s_k, d_k in zip(s, dn)]
        m.d.comb += [
            all_valid.eq(Cat(*[p.valid for p in ports]).all()),
            take_e.eq(Cat(*e).all()),
            take_s.eq(Cat(*s).all()),
            take_d.eq((take_s | ~Cat(*s).any()) & Cat(*dn).all()),
            mismatch.eq(all_valid & (
                (Cat(*e).any() & ~take_e)
                | (take_s & ~same_level)
                | (Cat(*s).any() & Cat(*nxt_d).any()))),
        ]
        raise_error(m, self.status, ErrorCode.STOP_MISMATCH, mismatch)

        empty = Signal(name="empty")  # nothing to send (cannot happen on legal input beats)
        offer = Signal(name="offer")
        go = Signal(name="go")
        m.d.comb += [
            empty.eq(~take_e & ~take_s & ~take_d),
            offer.eq(all_valid & ~mismatch & ~self.status.error),
            o.valid.eq(offer & ~empty),
            go.eq(offer & (empty | o.ready)),
            o.payload.has_data.eq(take_e),
            o.payload.last.eq(take_d),
        ]
        with m.If(take_s):
            m.d.comb += o.payload.stop.eq(s0)
        for k, p in enumerate(ports):
            with m.If(take_e):
                m.d.comb += o.payload.data[f"f{k}"].eq(p.payload.data)
            # The beat is used up when none of its tokens is left after this output beat.
            left = (e[k] & ~take_e) | (s[k] & ~take_s) | (dn[k] & ~take_d)
            m.d.comb += p.ready.eq(go & ~left)
            with m.If(go):
                with m.If(~left):
                    m.d.sync += pos[k].eq(0)
                with m.Elif(take_s):
                    m.d.sync += pos[k].eq(2)
                with m.Elif(take_e):
                    m.d.sync += pos[k].eq(1)

        m.d.comb += [
            self.status.busy.eq(Cat(*[p.valid for p in ports]).any()),
            self.status.stall_in.eq(~all_valid),
            self.status.stall_out.eq(o.valid & ~o.ready),
        ]
        return m
