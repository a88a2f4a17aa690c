"""AddrGen as hardware: every value expands into an affine walk of ``Index`` addresses."""

from amaranth.hdl import Cat, Const, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..compiler.types import Index, Select, Tile
from ..contract.beat import INDEX_BITS, beat_signature, stop_width
from .flags import trailing_count
from .lockstep import LockStep
from .retile import FlatMapOutput, PieceGenerator
from .unit import ErrorCode, StatusSignature, check, check_int, check_ints

__all__ = ["AddrGenUnit"]


class AddrGenUnit(wiring.Component):
    """Expand every value ``v`` into the addresses ``offset + scale * v + sum(i[k] * strides[k])``
    over the multi-indices ``i`` of ``shape`` (semantics section 4, FlatMap; AddrGen).

    The walk is innermost-fastest; after the last index of the innermost ``j`` dimensions
    (``j <= b = len(shape) - 1``) the address carries ``S_j``, and the element's last address
    carries ``S_(s+b)`` when the input beat has stop ``s`` (FlatMap's stop algebra, module doc of
    :mod:`stepforge.hdl.retile`). ``v`` is an ``Index``, the set bit of a one-hot ``Select`` (an
    expert id) or the value of an integer ``[1, 1]`` tile (signed), exactly as the interpreter's
    ``addr_gen`` reads it. The walk keeps its multi-index and its running offset in registers
    (one adder, no multiplier per address); the element waits on ``in0`` while its
    ``prod(shape)`` addresses are emitted, one per cycle.

    With ``counted=True`` a second input, ``count``, gives each element's length of the walk's
    innermost dimension (``0 <= count <= shape[-1]``, the ragged range of ``addr_gen(...,
    counted=True)``): the innermost index stops at ``count - 1``, and its offset is a register
    of its own that restarts at 0, so the outer dimensions step by constants as before. A count
    of 0 makes each innermost fibre a stop only (``b >= 1``) or the element yield nothing
    (``b = 0``).

    Before any address of an element is emitted the whole walk is checked: a selector that is not
    one-hot raises ``NOT_ONE_HOT``; a walk that leaves the 32-bit unsigned range (the smallest
    address below 0 or the largest at or above ``2**32``) raises ``ADDRESS_RANGE``; a count
    above ``shape[-1]`` raises ``OVER_BOUND``. The interpreter refuses all three.

    Parameters
    ----------
    elem_type : stepforge.compiler.types.Index, Select or Tile
        The input elements (a tile must be an integer ``[1, 1]`` tile).
    rank : int
        Rank of the input stream (``>= 0``).
    shape : sequence of int
        The generated sub-stream's shape, outermost first (``b + 1`` positive ints).
    strides : sequence of int
        One stride per dimension of ``shape`` (any sign).
    scale, offset : int
        The affine map of the value.
    counted : bool, default False
        Add the ``count`` input.

    Members
    -------
    in0 : ``In(beat_signature(elem_type, rank))``
        Input values.
    count : ``In(beat_signature(Index(), rank))``
        Only with ``counted=True``: each element's innermost length, in lock step with ``in0``.
    out : ``Out(beat_signature(Index(), rank + len(shape) - 1))``
        The addresses.
    status : ``Out(StatusSignature)``
        ``busy`` while a beat is held or offered. Raises ``NOT_ONE_HOT``, ``ADDRESS_RANGE``,
        ``OVER_BOUND`` (above), ``STOP_MISMATCH`` (``in0`` and ``count`` disagree on a token)
        and ``BAD_STOP`` (a stop above ``rank``).

    Raises
    ------
    ValueError
        A parameter out of range or an element type that ``addr_gen`` does not take.
    """

    def __init__(self, elem_type, rank, shape, strides, *, scale=1, offset=0, counted=False):
        check_int("AddrGenUnit", "rank", rank, 0)
        shape = check_ints("AddrGenUnit", "shape", shape, 1, min_length=1)
        strides = check_ints("AddrGenUnit", "strides", strides, length=len(shape))
        check_int("AddrGenUnit", "scale", scale)
        check_int("AddrGenUnit", "offset", offset)
        ok = isinstance(elem_type, (Index, Select)) or (
            isinstance(elem_type, Tile) and not elem_type.dtype.is_float
            and elem_type.rows == 1 and elem_type.cols == 1)
        check(ok, "AddrGenUnit", "elem_type", "Index, Select or an integer Tile(dtype, 1, 1)",
              elem_type)
        self.elem_type, self.rank = elem_type, rank
        self.shape, self.strides, self.scale, self.offset = shape, strides, scale, offset
        self.counted = bool(counted)
        self.b = len(shape) - 1
        self.out_type = Index()
        self.out_rank = rank + self.b
        members = {"in0": In(beat_signature(elem_type, rank))}
        if self.counted:
            members["count"] = In(beat_signature(Index(), rank))
        members.update({"out": Out(beat_signature(Index(), self.out_rank)),
                        "status": Out(StatusSignature)})
        super().__init__(members)

    def __repr__(self):
        extra = f", scale={self.scale}" if self.scale != 1 else ""
        extra += f", offset={self.offset}" if self.offset else ""
        extra += ", counted=True" if self.counted else ""
        return (f"AddrGenUnit({self.elem_type!r}, {self.rank}, {list(self.shape)}, "
                f"{list(self.strides)}{extra})")

    def elaborate(self, platform):
        m = Module()
        ports = [("in0", self.in0)] + ([("count", self.count)] if self.counted else [])
        vb = LockStep(m, ports, self.status)
        gen = PieceGenerator(self.out.payload.data.shape(), stop_width(self.out_rank))
        shape, strides, b = self.shape, self.strides, self.b
        raw = vb.data[0]
        inner = len(shape) - 1        # the innermost dimension
        ragged = self.counted         # its length is the element's count

        # Offsets of the walk relative to its first address: their extremes (for the range
        # check) and the step taken when dimension j advances and the inner ones wrap to 0. A
        # ragged innermost dimension keeps its offset in a register of its own (restarting at
        # 0), so the outer steps stay constants.
        spans = [(d - 1) * s for d, s in zip(shape, strides)]
        outer_spans = spans[:inner] if ragged else spans
        lo_off = sum(min(0, x) for x in outer_spans)
        hi_off = sum(max(0, x) for x in outer_spans)
        delta = [strides[j] - sum(outer_spans[j + 1:]) for j in range(len(shape))]
        v_max = 1 << INDEX_BITS
        if isinstance(self.elem_type, Select):
            v_max = self.elem_type.n
        extreme = abs(self.offset) + abs(self.scale) * v_max + sum(abs(x) for x in spans)
        width = extreme.bit_length() + 2
        wide = signed(width)

        value = Signal(wide, name="value")
        if isinstance(self.elem_type, Select):
            n = self.elem_type.n
            for i in range(n):
                with m.If(raw[i]):
                    m.d.comb += value.eq(i)
            gen.faults.append((ErrorCode.NOT_ONE_HOT, (raw == 0) | ((raw & (raw - 1)) != 0)))
        elif isinstance(self.elem_type, Tile):
            m.d.comb += value.eq(raw[0][0])
        else:
            m.d.comb += value.eq(raw)

        base = Signal(wide, name="base")  # the walk's first address
        m.d.comb += base.eq(self.offset + value * self.scale)

        # A size-1 dimension has no index register: it is always at its end.
        idx = [Signal(range(d), name=f"walk_index{k}") if d > 1 else None
               for k, d in enumerate(shape)]
        acc = Signal(wide, name="walk_offset")  # sum(i[k] * strides[k]) of the current index
        at_end = [Signal(name=f"walk_at_end{k}") for k in range(len(shape))]
        for k, d in enumerate(shape[:inner] if ragged else shape):
            m.d.comb += at_end[k].eq(idx[k] == d - 1 if d > 1 else 1)
        address = base + acc
        if ragged:
            count = Signal(range(shape[-1] + 1), name="count")
            over = vb.data[1] > shape[-1]
            m.d.comb += count.eq(vb.data[1])
            last_span = Signal(wide, name="count_span")    # (count - 1) * stride, count >= 1
            m.d.comb += last_span.eq((count - 1) * strides[-1])
            inner_acc = Signal(wide, name="walk_inner_offset")
            address = address + inner_acc
            # the innermost index is at its end at index count - 1 (at once for a count of 0)
            idx_next = (idx[-1] + 1) if idx[-1] is not None else 1
            m.d.comb += at_end[-1].eq(idx_next >= count)
            lo_check = base + lo_off + (last_span if strides[-1] < 0 else 0)
            hi_check = base + hi_off + (last_span if strides[-1] > 0 else 0)
            m.d.comb += gen.has_data.eq(count != 0)
            if b == 0:
                m.d.comb += gen.empty.eq(count == 0)
            else:
                m.d.comb += gen.empty.eq(0)
            in_range = (count != 0) & ((lo_check < 0) | (hi_check >= (1 << INDEX_BITS)))
        else:
            m.d.comb += gen.empty.eq(0)
            in_range = (base + lo_off < 0) | (base + hi_off >= (1 << INDEX_BITS))
        gen.faults.append((ErrorCode.ADDRESS_RANGE, in_range))
        if ragged:
            gen.faults.append((ErrorCode.OVER_BOUND, over))
        # The stop of the current address: S_j when the innermost j dimensions (j <= b) are all
        # at their last index.
        if b:
            m.d.comb += gen.stop.eq(trailing_count(at_end[1:]))
        m.d.comb += [
            gen.final.eq(Cat(*at_end).all()),
            gen.data.eq(address),
        ]
        with m.If(gen.step):
            with m.If(gen.final):
                m.d.sync += [acc.eq(0)] + [x.eq(0) for x in idx if x is not None]
                if ragged:
                    m.d.sync += inner_acc.eq(0)
            # Advance the innermost dimension that is not at its end; the inner ones wrap.
            for j in range(len(shape)):
                inner_at_end = Cat(*at_end[j + 1:]).all() \
                    if j + 1 < len(shape) else Const(1)
                if idx[j] is None:
                    continue  # never advances
                with m.If(~gen.final & ~at_end[j] & inner_at_end):
                    m.d.sync += idx[j].eq(idx[j] + 1)
                    m.d.sync += [idx[k].eq(0) for k in range(j + 1, len(shape))
                                 if idx[k] is not None]
                    if ragged and j == inner:
                        m.d.sync += inner_acc.eq(inner_acc + strides[-1])
                    else:
                        m.d.sync += acc.eq(acc + delta[j])
                        if ragged:
                            m.d.sync += inner_acc.eq(0)

        FlatMapOutput(m, vb, gen, self.out, b, self.rank, self.status)
        return m

