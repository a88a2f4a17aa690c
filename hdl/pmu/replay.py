"""How one read side of a PMU replays buffers: the parameters of one Streamify consumer."""

from ...compiler.types import ElemType
from ..unit import check, check_int, check_ints

__all__ = ["Replay"]


class Replay:
    """How one read side of a :class:`PMU` replays buffers (the parameters of a Streamify).

    Parameters
    ----------
    repeat : int, optional
        Static repeat count ``>= 1``: every replay but the last closes with ``S_B``, the last
        with ``S_(B + 1 + s)`` (``s`` the buffer element's own stop). ``None``: plain replay.
    expand_rank : int, optional
        ``c >= 1``: the reference form; the read side gets a ``ref`` port and replays the
        current buffer once per reference element until the reference shows a stop ``>= c``.
        Exclusive with ``repeat``.
    ref_type : stepforge.compiler.types.ElemType, optional
        Element type of the reference stream (its contents are ignored, but it types the port).
        Required with ``expand_rank``.
    order : tuple, optional
        ``(out_shape, stride)`` or ``(out_shape, stride, offset)``: replay element
        ``offset + sum(idx_d * stride_d)`` (row-major) at each index ``idx`` of a walk over
        ``out_shape``. Static mode only; the buffer must fill its shape (else ``BAD_BUFFER``).

    Raises
    ------
    ValueError
        A parameter of the wrong type or out of range, or ``repeat`` with ``expand_rank``.
    """

    def __init__(self, repeat=None, *, expand_rank=None, ref_type=None, order=None):
        if repeat is not None:
            check_int("Replay", "repeat", repeat, 1)
        if expand_rank is not None:
            check_int("Replay", "expand_rank", expand_rank, 1)
            check(repeat is None, "Replay", "repeat", "None with expand_rank", repeat)
            check(isinstance(ref_type, ElemType), "Replay", "ref_type",
                  "an element type with expand_rank (the reference stream's)", ref_type)
        else:
            check(ref_type is None, "Replay", "ref_type", "None without expand_rank", ref_type)
        if order is not None:
            check(isinstance(order, (tuple, list)) and len(order) in (2, 3), "Replay", "order",
                  "(out_shape, stride) or (out_shape, stride, offset)", order)
            out_shape = check_ints("Replay", "order out_shape", order[0], 1, min_length=1)
            stride = check_ints("Replay", "order stride", order[1], length=len(out_shape))
            offset = check_int("Replay", "order offset", order[2]) if len(order) == 3 else 0
            order = (out_shape, stride, offset)
        self.repeat = repeat
        self.expand_rank = expand_rank
        self.ref_type = ref_type
        self.order = order

    def __repr__(self):
        args = []
        if self.repeat is not None:
            args.append(repr(self.repeat))
        if self.expand_rank is not None:
            args.append(f"expand_rank={self.expand_rank}")
            args.append(f"ref_type={self.ref_type!r}")
        if self.order is not None:
            args.append(f"order={self.order!r}")
        return f"Replay({', '.join(args)})"

    def depth(self, b):
        """Number of levels one replay spans: ``len(out_shape)`` with an order, else ``b``."""
        return len(self.order[0]) if self.order is not None else b

    def out_rank(self, rank, b):
        """Rank of the replayed stream for a PMU buffering ``b`` levels of a rank-``rank`` input."""
        return (rank - b) + self.depth(b) + (1 if self.repeat is not None else 0)
