"""How one read side of a PMU replays buffers: the parameters of one Streamify consumer."""

from ...compiler.types import ElemType

__all__ = ["Replay"]


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


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
        if repeat is not None and (not _is_int(repeat) or repeat < 1):
            raise ValueError(f"Replay needs repeat >= 1, not {repeat!r}")
        if expand_rank is not None:
            if not _is_int(expand_rank) or expand_rank < 1:
                raise ValueError(f"Replay needs expand_rank >= 1, not {expand_rank!r}")
            if repeat is not None:
                raise ValueError("Replay takes either repeat or expand_rank, not both")
            if not isinstance(ref_type, ElemType):
                raise ValueError(f"Replay with expand_rank needs ref_type (the reference stream's "
                                 f"element type), not {ref_type!r}")
        elif ref_type is not None:
            raise ValueError("Replay: ref_type needs expand_rank")
        if order is not None:
            if not isinstance(order, (tuple, list)) or len(order) not in (2, 3):
                raise ValueError(f"Replay needs order = (out_shape, stride[, offset]), not {order!r}")
            out_shape, stride = tuple(order[0]), tuple(order[1])
            offset = order[2] if len(order) == 3 else 0
            if not out_shape or not all(_is_int(d) and d > 0 for d in out_shape):
                raise ValueError(f"Replay: order out_shape must be positive ints, not {order[0]!r}")
            if len(stride) != len(out_shape) or not all(_is_int(s) for s in stride) \
                    or not _is_int(offset):
                raise ValueError(f"Replay: order needs one int stride per dimension and an int "
                                 f"offset, not {order!r}")
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
