"""The geometry of the memory system: words, lanes, lines, and the line rule of a burst."""

import math
from dataclasses import dataclass

from amaranth.hdl import Const, unsigned
from amaranth.lib import data
from amaranth.utils import ceil_log2

from ..config import HardwareConfig

__all__ = ["MemoryGeometry", "index_shape", "quiet_on_error", "check_count", "times_const"]


class _Unbuilt:
    """What an object whose unit constructor raised becomes: no longer an ``Elaboratable``."""

    def __repr__(self):
        return f"<{self.unbuilt} whose constructor raised>"


def quiet_on_error(init):
    """Decorate a unit's ``__init__``: a unit whose construction fails is not reported later as
    "created but never used" (Amaranth's check would call ``repr`` on a half-built object).

    The half-built object, which the caller never receives, stops being an ``Elaboratable``:
    its class becomes a plain one, so Amaranth's check (made when an ``Elaboratable`` is
    collected) does not see it. No private Amaranth name is used.
    """
    def wrapper(self, *args, **kwargs):
        try:
            init(self, *args, **kwargs)
        except Exception:
            if not isinstance(self, _Unbuilt):     # (a subclass's __init__ may call a base's)
                unbuilt = type(self).__qualname__
                self.__class__ = _Unbuilt
                self.unbuilt = unbuilt
            raise
    wrapper.__doc__, wrapper.__name__, wrapper.__wrapped__ = init.__doc__, init.__name__, init
    return wrapper


def index_shape(n):
    """The shape of an index into ``n`` things: ``range(n)``, but at least one bit wide (a
    zero-width signal draws Verilator's ASCRANGE warning)."""
    return range(max(n, 2))


def times_const(value, k):
    """``value * k`` for a constant ``k >= 0`` as a sum of shifts: no multiplier is inferred (a
    constant product in an address path would otherwise become a DSP block on an FPGA)."""
    terms = [value << i for i in range(k.bit_length()) if k >> i & 1]
    if not terms:
        return Const(0)
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total


def check_count(name, value, minimum=1):
    """``value`` if it is an int ``>= minimum``, else ``ValueError("<name> must be an int >= <minimum>, not <value>")``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, not {value!r}")
    return value


@dataclass(frozen=True)
class MemoryGeometry:
    """Shape of a :class:`~stepforge.hdl.memory.MemoryModel` and of its ports (package doc).

    Parameters
    ----------
    word_bytes : int
        Bytes of one addressable word; divides ``bytes_per_channel``.
    channels : int
        Memory channels.
    bytes_per_channel : int
        Bytes one channel moves per cycle.
    latency : int
        Cycles from a line's grant to its data on ``resp`` (``>= 0``).
    size_words : int
        Capacity in words (``>= 1``).
    count_bits : int, default 16
        Width of a request's ``count`` and ``rows``: at most ``2**count_bits - 1`` words per
        segment and segments per burst.
    max_segments : int, default 8
        At most this many segments share a line (the hardware compares every lane with this
        many segments; the effective limit is ``min(lanes, max_segments)``).
    """

    word_bytes: int
    channels: int
    bytes_per_channel: int
    latency: int
    size_words: int
    count_bits: int = 16
    max_segments: int = 8

    def __post_init__(self):
        check_count("MemoryGeometry.word_bytes", self.word_bytes)
        check_count("MemoryGeometry.channels", self.channels)
        check_count("MemoryGeometry.bytes_per_channel", self.bytes_per_channel)
        check_count("MemoryGeometry.latency", self.latency, 0)
        check_count("MemoryGeometry.size_words", self.size_words)
        check_count("MemoryGeometry.count_bits", self.count_bits)
        check_count("MemoryGeometry.max_segments", self.max_segments)
        if self.bytes_per_channel % self.word_bytes:
            raise ValueError(f"MemoryGeometry: word_bytes {self.word_bytes} does not divide "
                             f"bytes_per_channel {self.bytes_per_channel}")

    @classmethod
    def from_config(cls, config, size_bytes, *, word_bytes=None, count_bits=16, max_segments=8):
        """The geometry of a memory of ``size_bytes`` for ``config``.

        Parameters
        ----------
        config : HardwareConfig
        size_bytes : int
            Capacity, rounded up to whole words.
        word_bytes : int, optional
            Default ``gcd(config.mem_bytes_per_channel, config.tile_cols * bytes(config.dtype))``.
        count_bits, max_segments : int
            See the class.

        Returns
        -------
        MemoryGeometry
        """
        if not isinstance(config, HardwareConfig):
            raise TypeError(f"expected a HardwareConfig, not {config!r}")
        check_count("size_bytes", size_bytes)
        if word_bytes is None:
            word_bytes = math.gcd(config.mem_bytes_per_channel,
                                  config.tile_cols * config.dtype.nbytes)
        check_count("word_bytes", word_bytes)
        return cls(word_bytes=word_bytes, channels=config.mem_channels,
                   bytes_per_channel=config.mem_bytes_per_channel, latency=config.mem_latency,
                   size_words=-(-size_bytes // word_bytes), count_bits=count_bits,
                   max_segments=max_segments)

    @property
    def word_bits(self):
        return 8 * self.word_bytes

    @property
    def lanes(self):
        """Words moved per cycle at peak (one line)."""
        return self.channels * self.bytes_per_channel // self.word_bytes

    @property
    def line_bytes(self):
        """Peak bytes per cycle, ``channels * bytes_per_channel``."""
        return self.channels * self.bytes_per_channel

    @property
    def rows(self):
        """Depth of each lane's storage."""
        return -(-self.size_words // self.lanes)

    @property
    def addr_bits(self):
        """Width of a word address."""
        return max(1, ceil_log2(self.rows * self.lanes))

    @property
    def size_bytes(self):
        return self.size_words * self.word_bytes

    @property
    def request_layout(self):
        """``StructLayout({"addr"})`` of a burst request: its first word (the burst's shape is a
        property of the port, :class:`~stepforge.hdl.memory.MemoryPort`)."""
        return data.StructLayout({"addr": unsigned(self.addr_bits)})

    @property
    def lane_bits(self):
        """``log2(lanes)``; ``ValueError`` unless ``lanes`` is a power of two (the memory splits
        an address into lane and row with bit slices, not a division)."""
        if self.lanes & (self.lanes - 1):
            raise ValueError(f"the memory's lanes must be a power of two, not {self.lanes} "
                             f"({self.channels} channels x {self.bytes_per_channel} B / "
                             f"{self.word_bytes} B words)")
        return self.lanes.bit_length() - 1

    @property
    def pack_limit(self):
        """Segments that may share a line: ``min(lanes, max_segments)``."""
        return min(self.lanes, self.max_segments)

    def segments_per_line(self, count, stride):
        """How many whole segments of ``count`` words, ``stride`` apart, one line can take."""
        L = self.lanes
        if count > L or count == 0:
            return 1
        taken = set(range(count))            # lanes relative to segment 0's first word
        m = 1
        for k in range(1, self.pack_limit):
            if (k + 1) * count > L:
                break
            lanes = {(k * stride + o) % L for o in range(count)}
            if lanes & taken:
                break
            taken |= lanes
            m += 1
        return m

    def burst_lines(self, count, rows=1, stride=0):
        """Word counts of the lines of a burst (module doc); ``[]`` when ``count`` is 0."""
        rows = max(rows, 1)
        L = self.lanes
        if count == 0:
            return []
        if count > L:
            return [min(L, count - i) for _ in range(rows) for i in range(0, count, L)]
        m = self.segments_per_line(count, stride)
        return [min(m, rows - r) * count for r in range(0, rows, m)]

    def line_offsets(self, count, rows=1, stride=0):
        """The words of each line of a burst, as offsets from its first word: one list per line
        of :meth:`burst_lines` (burst word ``w`` is at ``(w // count) * stride + w % count``).
        The offsets of one line fall in distinct lanes."""
        offsets = [(w // count) * stride + w % count for w in range(count * max(rows, 1))]
        out, w = [], 0
        for n in self.burst_lines(count, rows, stride):
            out.append(offsets[w:w + n])
            w += n
        return out

    @property
    def line_layout(self):
        """``ArrayLayout(unsigned(8 * word_bytes), lanes)``: one line of words."""
        return data.ArrayLayout(unsigned(self.word_bits), self.lanes)

    def lines(self, count, rows=1, stride=0):
        """Lines (cycles of the memory) that a burst takes."""
        return len(self.burst_lines(count, rows, stride))

    def words(self, nbytes, what="a transfer"):
        """``nbytes`` in words; ``ValueError`` unless it is a whole number of words."""
        if nbytes % self.word_bytes:
            raise ValueError(f"{what} of {nbytes} bytes is not a whole number of "
                             f"{self.word_bytes}-byte memory words")
        return nbytes // self.word_bytes

