"""RetileStreamify as hardware, and the machinery that every FlatMap unit shares.

FlatMap (semantics section 4) expands every input element into a rank-``b`` sub-stream and raises
the input's stop above it. The three FlatMap units (:class:`RetileStreamifyUnit` here,
:class:`~stepforge.hdl.filter.FilterUnit`, :class:`~stepforge.hdl.addrgen.AddrGenUnit`) are built
from the same three parts; only the middle one differs:

1. :class:`~stepforge.hdl.lockstep.LockStep` turns the input ports into one *virtual beat* per step (element, stop,
   ``Done``). With one port it is the port's beat. With two ports (``in0`` with ``valid`` or
   ``flags``) the ports are consumed in lock step *on tokens*: a legal framing may put a stop or
   ``Done`` in a beat of its own on one port and fused on the other (semantics section 2), so a
   virtual beat takes the tokens that every port shows and a port keeps the rest of its beat for
   the next step. Ports that disagree on a token raise ``STOP_MISMATCH``.
2. A *generator* (:class:`PieceGenerator`) walks the current element's pieces, one per cycle,
   while the element waits on its port (it is not copied).
3. :class:`FlatMapOutput` applies FlatMap's stop algebra and holds one beat back, the unit's one
   register stage:

   * piece ``k`` of an element carries the generator's stop (``S_b`` closes a generated tensor;
     ``0`` for ``b = 0``); the element's last piece carries ``S_(s+b)`` instead when the input
     beat has stop ``s``, and ``last`` when it has ``Done``;
   * the last piece of an element whose beat has no stop waits in the register: the next virtual
     beat says whether its stop is final (the next element yields a piece) or must be raised
     to ``S_(s+b)`` (a stop, or a dropped element carrying a stop, follows) or fused with
     ``Done``. This look-ahead is combinational (``out.valid`` follows the input port, never
     ``out.ready``), so pieces flow at one beat per cycle after one cycle of latency;
   * a stop whose fibre generated nothing becomes a stop-only beat ``S_(s+b)``; a ``Done`` with no
     beat left to fuse into becomes a bare ``Done`` beat; a dropped element without stop or
     ``Done`` produces nothing. A beat that carries nothing is never emitted.

   A stop level above the input's rank raises ``BAD_STOP``. On canonical input beats the output
   beats are canonical (``Done`` fused, stops fused into the preceding element's beat).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..compiler.types import Index, Tile
from ..contract.beat import beat_signature, element_layout, stop_width
from .lockstep import LockStep
from .unit import ErrorCode, StatusSignature, check, check_choice, check_int, raise_error

__all__ = ["PieceGenerator", "FlatMapOutput", "RetileStreamifyUnit"]


class PieceGenerator:
    """What a FlatMap unit's generator offers :class:`FlatMapOutput` for the current element.

    The unit creates one and drives its signals from the element on offer and its own counters;
    :class:`FlatMapOutput` reads them and drives ``step``.

    Parameters
    ----------
    data_shape : amaranth.hdl.ShapeLike
        The output element layout.
    stop_bits : int
        Width of the output's ``stop`` field.

    Members
    -------
    empty : Signal
        The element yields nothing at all (a dropped element, a ``b = 0`` split of zero rows).
    data : Signal(data_shape)
        The current piece's element.
    has_data : Signal, init 1
        The current piece carries an element (0: an empty generated tensor, a stop-only piece).
    stop : Signal
        The current piece's own stop (the walk's ``S_j``; 0 for ``b = 0``).
    final : Signal
        The current piece is the element's last.
    step : Signal
        Driven by :class:`FlatMapOutput`: the current piece is taken this cycle; the generator
        moves to the next piece, or back to the first after the final one.
    faults : list of (ErrorCode, Value)
        Run-time faults of the element on offer (checked before any of its pieces is taken).
    """

    def __init__(self, data_shape, stop_bits):
        self.empty = Signal(name="gen_empty")
        self.data = Signal(data_shape, name="gen_data")
        self.has_data = Signal(init=1, name="gen_has_data")
        self.stop = Signal(stop_bits, name="gen_stop")
        self.final = Signal(name="gen_final")
        self.step = Signal(name="gen_step")
        self.faults = []


class FlatMapOutput:
    """FlatMap's stop algebra and one-beat hold register, built into ``m`` (see the module doc).

    Parameters
    ----------
    m : amaranth.hdl.Module
    vb : LockStep
        The virtual input beat.
    gen : PieceGenerator
        The current element's pieces.
    out : stream interface
        The unit's ``out`` port.
    b : int
        Rank of the generated sub-streams: the input's stop ``s`` becomes ``S_(s+b)``.
    rank : int
        The input's rank (a stop above it raises ``BAD_STOP``).
    status : StatusSignature interface
        The unit's status; this class drives ``busy``, ``stall_in`` and ``stall_out`` and raises
        the generator's faults.

    Members
    -------
    held_valid : Signal
        The hold register holds a beat.
    held_raisable : Signal
        ... which is an element's last piece whose stop may still be raised or fused with
        ``Done`` (it is not offered until the next virtual beat decides).
    """

    def __init__(self, m, vb, gen, out, b, rank, status):
        held = Signal(out.payload.shape(), name="held")
        self.held_valid = held_valid = Signal(name="held_valid")
        self.held_raisable = raisable = Signal(name="held_raisable")

        # Faults of the virtual beat on offer: nothing of it is used when one is present.
        bad_stop = Signal(name="bad_stop")
        max_stop = (1 << stop_width(rank)) - 1
        m.d.comb += bad_stop.eq(vb.stop > rank) if max_stop > rank else bad_stop.eq(0)
        raise_error(m, status, ErrorCode.BAD_STOP, vb.valid & bad_stop)
        faulty = [bad_stop]
        for code, cond in gen.faults:
            fault = Signal(name=f"fault_{code.name.lower()}")
            m.d.comb += fault.eq(vb.elem & cond)
            raise_error(m, status, code, vb.valid & fault)
            faulty.append(fault)
        ok = Signal(name="vb_ok")
        m.d.comb += ok.eq(vb.valid & ~Cat(*faulty).any() & ~status.error)

        piece = Signal(name="piece")   # the virtual beat yields a piece now
        event = Signal(name="event")   # it yields none, but carries a stop or Done
        drop = Signal(name="drop")     # it yields nothing at all (a dropped bare element)
        raised = Signal.like(out.payload.stop, name="raised_stop")
        has_stop = vb.stop != 0
        m.d.comb += [
            piece.eq(ok & vb.elem & ~gen.empty),
            event.eq(ok & ~(vb.elem & ~gen.empty) & (has_stop | vb.last)),
            drop.eq(ok & ~(vb.elem & ~gen.empty) & ~has_stop & ~vb.last),
            raised.eq(vb.stop + b),
        ]

        # The output: the held beat, offered when its stop is final (or decided now).
        fuse = Signal(name="fuse")  # the event is merged into the held beat
        free = Signal(name="free")  # the hold register can load a beat this cycle
        m.d.comb += [
            fuse.eq(held_valid & raisable & event),
            out.valid.eq(held_valid & (~raisable | piece | event)),
            out.payload.eq(held),
            free.eq(~held_valid | (out.valid & out.ready)),
        ]
        with m.If(fuse):
            with m.If(has_stop):
                m.d.comb += out.payload.stop.eq(raised)
            m.d.comb += out.payload.last.eq(vb.last)

        with m.If(out.valid & out.ready):
            m.d.sync += held_valid.eq(0)
        with m.If(piece):
            with m.If(free):
                m.d.comb += [gen.step.eq(1), vb.take.eq(gen.final)]
                m.d.sync += [
                    held_valid.eq(1),
                    held.data.eq(gen.data),
                    held.has_data.eq(gen.has_data),
                    held.stop.eq(Mux(gen.final & has_stop, raised, gen.stop)),
                    held.last.eq(gen.final & vb.last),
                    raisable.eq(gen.final & ~has_stop & ~vb.last),
                ]
        with m.Elif(fuse):
            m.d.comb += vb.take.eq(out.ready)
        with m.Elif(event):
            with m.If(free):
                m.d.comb += vb.take.eq(1)
                m.d.sync += [
                    held_valid.eq(1),
                    held.has_data.eq(0),
                    held.stop.eq(Mux(has_stop, raised, 0)),
                    held.last.eq(vb.last),
                    raisable.eq(0),
                ]
        with m.Elif(drop):
            m.d.comb += vb.take.eq(1)

        m.d.comb += [
            status.busy.eq(held_valid | vb.any_valid),
            status.stall_in.eq(~vb.all_valid & ~status.error),
            status.stall_out.eq(out.valid & ~out.ready),
        ]


def _tile_type(elem_type, unit):
    check(isinstance(elem_type, Tile), unit, "elem_type", "a Tile", elem_type)
    return check(isinstance(elem_type.cols, int) and elem_type.cols >= 1, unit, "elem_type",
                 "a Tile with a static column count", elem_type)


class RetileStreamifyUnit(wiring.Component):
    """Split every tile into its rows or columns (semantics section 4, FlatMap; RetileStreamify).

    ``split="row"``: an ``[R, C]`` tile becomes ``R`` tiles ``[1, C]``, in order; ``split="col"``:
    ``C`` tiles ``[R, 1]``. With ``b=0`` the pieces join the input's innermost fibre (the input's
    stop is carried by the tile's last piece); with ``b=1`` every tile's pieces form a fibre of
    their own (its last piece carries ``S_1``, or ``S_(s+1)`` when the input beat has stop
    ``s``). With ``valid=True`` a second input, ``valid``, gives each tile's count of valid rows
    (columns), consumed in lock step with ``in0``: only the first ``n`` pieces are emitted. A
    dynamic-row tile (``rows`` field on the wire) splits into its actual rows; its columns have
    its row count.

    A tile that yields no piece (``n = 0``, or a dynamic tile of zero rows split by rows) yields
    nothing for ``b = 0`` and an empty generated fibre (a stop-only ``S_1`` piece, raised like any
    other) for ``b = 1``, as the interpreter's ``retile_rows``/``retile_cols`` do. The tile waits
    on ``in0`` while its pieces are emitted, one per cycle (a tile of ``R`` rows takes ``R``
    cycles); the output goes through one hold register (see the module doc).

    Parameters
    ----------
    elem_type : stepforge.compiler.types.Tile
        The input tiles: static columns, static or dynamic (bounded) rows.
    rank : int
        Rank of the input stream (``>= 0``).
    split : {"row", "col"}, default "row"
    valid : bool, default False
        Add the ``valid`` input (an ``Index`` stream of the input's rank).
    b : {0, 1}, default 0
        Rank of each tile's generated sub-stream.
    row_bound : int or Mapping, optional
        Bound of a dynamic tile row count (see :func:`~stepforge.contract.beat.element_layout`).

    Members
    -------
    in0 : ``In(beat_signature(elem_type, rank))``
        Input tiles.
    valid : ``In(beat_signature(Index(), rank))``
        Only with ``valid=True``: the valid count of each tile.
    out : ``Out(beat_signature(out_type, rank + b))``
        The pieces; ``out_type`` is ``Tile(dtype, 1, C)`` (rows) or ``Tile(dtype, R, 1)``
        (columns).
    status : ``Out(StatusSignature)``
        ``busy`` while a beat is held or offered. Raises ``STOP_MISMATCH`` (``in0`` and ``valid``
        disagree on a token), ``OVER_BOUND`` (a valid count above the tile's row (column) count,
        or a dynamic tile's row count above its bound) and ``BAD_STOP`` (a stop above ``rank``).

    Raises
    ------
    ValueError
        A parameter out of range or an element type that is not a tile with static columns.
    """

    def __init__(self, elem_type, rank, split="row", *, valid=False, b=0, row_bound=None):
        _tile_type(elem_type, "RetileStreamifyUnit")
        check_int("RetileStreamifyUnit", "rank", rank, 0)
        check_choice("RetileStreamifyUnit", "split", split, ("row", "col"))
        check_int("RetileStreamifyUnit", "b", b, 0, 1)  # rank-0 or rank-1 sub-streams
        self.elem_type, self.rank, self.split, self.b = elem_type, rank, split, b
        self.with_valid = bool(valid)
        self.row_bound = row_bound
        t = elem_type
        self.out_type = Tile(t.dtype, 1, t.cols) if split == "row" else Tile(t.dtype, t.rows, 1)
        self.out_rank = rank + b
        members = {"in0": In(beat_signature(elem_type, rank, row_bound=row_bound))}
        if self.with_valid:
            members["valid"] = In(beat_signature(Index(), rank))
        members["out"] = Out(beat_signature(self.out_type, self.out_rank, row_bound=row_bound))
        members["status"] = Out(StatusSignature)
        super().__init__(members)

    def __repr__(self):
        extra = ", valid=True" if self.with_valid else ""
        extra += f", b={self.b}" if self.b else ""
        return f"RetileStreamifyUnit({self.elem_type!r}, {self.rank}, split={self.split!r}{extra})"

    def elaborate(self, platform):
        m = Module()
        ports = [("in0", self.in0)] + ([("valid", self.valid)] if self.with_valid else [])
        vb = LockStep(m, ports, self.status)
        t = self.elem_type
        layout = element_layout(t, row_bound=self.row_bound)
        tile = vb.data[0]
        dynamic = not isinstance(t.rows, int)
        if dynamic:
            bound = layout.members["data"].length
            rows_now, body = tile.rows, tile.data
        else:
            bound = t.rows
            rows_now, body = Const(t.rows, unsigned(bound.bit_length())), tile
        cols = t.cols
        limit_max = bound if self.split == "row" else cols   # most pieces of one tile
        limit = rows_now if self.split == "row" else Const(cols, unsigned(cols.bit_length()))

        gen = PieceGenerator(self.out.payload.data.shape(), stop_width(self.out_rank))
        count = Signal(range(limit_max + 1), name="count")  # pieces of the tile on offer
        if self.with_valid:
            n_valid = vb.data[1]
            gen.faults.append((ErrorCode.OVER_BOUND, n_valid > limit))
            m.d.comb += count.eq(n_valid)
        else:
            m.d.comb += count.eq(limit)
        if dynamic:
            gen.faults.append((ErrorCode.OVER_BOUND, rows_now > bound))

        if limit_max > 1:
            k = Signal(range(limit_max), name="piece_index")
            with m.If(gen.step):
                m.d.sync += k.eq(Mux(gen.final, 0, k + 1))
        else:
            k = Const(0, 1)  # one piece at most: no index register
        none = Signal(name="no_piece")  # the tile yields zero pieces
        m.d.comb += none.eq(count == 0)
        if self.b == 0:
            m.d.comb += [gen.empty.eq(none), gen.final.eq(k + 1 == count), gen.stop.eq(0)]
        else:  # zero pieces: one stop-only piece, the empty generated fibre
            m.d.comb += [
                gen.empty.eq(0),
                gen.final.eq(none | (k + 1 == count)),
                gen.has_data.eq(~none),
                gen.stop.eq(Mux(gen.final, 1, 0)),
            ]

        d = gen.data
        if self.split == "row":
            m.d.comb += d[0].eq(body[k])
        else:
            rows_out = d.data if dynamic else d
            if dynamic:
                m.d.comb += d.rows.eq(rows_now)
            for i in range(bound):
                m.d.comb += rows_out[i][0].eq(body[i][k])

        FlatMapOutput(m, vb, gen, self.out, self.b, self.rank, self.status)
        return m
