"""Where a tensor lives in memory, and the burst that moves one of its tiles."""

import numpy as np
from amaranth.hdl import Value
from amaranth.utils import ceil_log2

from .geometry import MemoryGeometry, check_count, times_const
from .port import MemoryPort

__all__ = ["TensorPlacement", "word_addresses"]


class TensorPlacement:
    """Where a 2-D tensor lives in memory, and the burst that moves one of its tiles.

    Row-major (the default): the tensor starts at word address ``base``; element ``(r, c)`` is at
    byte ``base * word_bytes + r * pitch * word_bytes + c * bytes(dtype)``. Tile-major (with
    ``tile_pitch``): tile ``k`` starts at word ``base + k * tile_pitch``, its rows one after
    another (:func:`word_addresses` maps both). Its ``tr x tc`` tiles are numbered
    row-major over the tile grid (linear tile index ``k = i * (cols / tc) + j``, as in
    :mod:`stepforge.compiler.ops.offchip`). A tile moves as **one burst**: ``tr`` segments of
    ``tc * bytes(dtype)`` bytes (one per tile row), a tensor row apart, or a single segment of the
    whole tile when its rows are contiguous (the tile spans the full tensor width, ``tc == cols``,
    or the layout is tile-major).
    Either way exactly ``bytes(tile)`` bytes move per tile; :attr:`tile_lines` lists the words of
    each line of that burst (the memory's cycles per tile when it serves this client alone).

    Parameters
    ----------
    geometry : MemoryGeometry
    dtype : stepforge.compiler.types.DType
    shape : (int, int)
        Tensor rows and columns.
    tile : (int, int)
        Tile rows and columns; they divide ``shape``.
    base : int, default 0
        Word address of element ``(0, 0)``.
    pitch : int, optional
        Words from one tensor row to the next (default: the row's own words). A padded pitch
        with ``pitch % lanes == tile row words`` puts the rows of a tile in distinct memory lanes,
        so a tile moves in one line instead of one line per row (the lowering chooses it).
    tile_pitch : int, optional
        A tile-major layout: words from one tile to the next (at least the tile's words; a
        multiple of the lanes starts every tile in one lane, :attr:`start_lane`). Excludes
        ``pitch``.
    tile_order : {"row", "col"}, default "row"
        With ``tile_pitch``: the order of the tiles in memory, row-major over the tile grid
        (tile ``(i, j)`` at ``base + (i * cols/tc + j) * tile_pitch``) or column-major (at
        ``base + (j * rows/tr + i) * tile_pitch``: the tiles of one tile column follow each
        other, for walks that go down the columns). The linear tile index of the walks stays
        row-major either way.

    Raises
    ------
    ValueError
        The tile does not divide the tensor, a tile row is not a whole number of words, or the
        tensor does not fit the memory.
    """

    def __init__(self, geometry, dtype, shape, tile, base=0, pitch=None, tile_pitch=None,
                 tile_order="row"):
        if not isinstance(geometry, MemoryGeometry):
            raise TypeError(f"TensorPlacement geometry must be a MemoryGeometry, not {geometry!r}")
        self.geometry, self.dtype = geometry, dtype
        if len(tuple(shape)) != 2 or len(tuple(tile)) != 2:
            raise ValueError(f"a tensor placement needs a 2-D shape and tile, not {shape!r}, {tile!r}")
        self.shape = tuple(check_count("a tensor dimension", d) for d in shape)
        self.tile = tuple(check_count("a tile dimension", d) for d in tile)
        self.base = check_count("base", base, 0)
        (rows, cols), (tr, tc) = self.shape, self.tile
        if rows % tr or cols % tc:
            raise ValueError(f"tile {self.tile} does not divide tensor {self.shape}")
        nb = dtype.nbytes
        #: Words of one tile row and of one tensor row.
        self.row_words = geometry.words(tc * nb, f"a tile row ({tc} x {dtype!r})")
        natural = cols * nb // geometry.word_bytes
        if pitch is not None and (isinstance(pitch, bool) or not isinstance(pitch, int)
                                  or pitch < natural):
            raise ValueError(f"the pitch of a tensor row must be an int >= its {natural} words, "
                             f"not {pitch!r}")
        self.grid = (rows // tr, cols // tc)
        self.tile_words = tr * self.row_words
        if tile_pitch is not None and (pitch is not None or isinstance(tile_pitch, bool)
                                       or not isinstance(tile_pitch, int)
                                       or tile_pitch < self.tile_words):
            raise ValueError(f"the pitch of a tile-major layout must be an int >= the tile's "
                             f"{self.tile_words} words, without a row pitch, not "
                             f"tile_pitch={tile_pitch!r}, pitch={pitch!r}")
        if tile_order not in ("row", "col") or (tile_order == "col" and tile_pitch is None):
            raise ValueError(f"the tile order of a placement must be 'row' or 'col' (with a "
                             f"tile_pitch), not tile_order={tile_order!r}, "
                             f"tile_pitch={tile_pitch!r}")
        #: Words from one tile to the next in a tile-major layout (None: row-major).
        self.tile_pitch = tile_pitch
        #: The order of the tiles of a tile-major layout over the tile grid.
        self.tile_order = tile_order
        #: Words from one tensor row to the next in memory (the row's words, plus padding).
        self.pitch = natural if pitch is None else pitch
        self.tensor_row_words = self.pitch
        self.contiguous = tile_pitch is not None or (tc == cols and self.pitch == natural)
        #: The burst of one tile: segment length, segments, stride (words).
        if self.contiguous:
            self.burst_words, self.burst_rows, self.burst_stride = self.tile_words, 1, 0
        else:
            self.burst_words, self.burst_rows, self.burst_stride = (self.row_words, tr,
                                                                    self.tensor_row_words)
        #: Word counts of the lines of one tile's burst.
        self.tile_lines = geometry.burst_lines(self.burst_words, self.burst_rows,
                                               self.burst_stride)
        #: Address step between horizontally / vertically adjacent tiles.
        if tile_pitch is None:
            self.col_step = self.row_words
            self.row_step = tr * self.tensor_row_words
            self.words = rows * self.pitch
        elif tile_order == "row":
            self.col_step = tile_pitch
            self.row_step = self.grid[1] * tile_pitch
            self.words = self.grid[0] * self.row_step
        else:
            self.row_step = tile_pitch
            self.col_step = self.grid[0] * tile_pitch
            self.words = self.grid[1] * self.col_step
        if self.base + self.words > geometry.size_words:
            raise ValueError(f"tensor {self.shape} of {dtype!r} ({self.words} words at {self.base}) "
                             f"does not fit the memory's {geometry.size_words} words")
        if max(self.burst_words, self.burst_rows) >= 1 << geometry.count_bits:
            raise ValueError(f"a burst of {self.burst_rows} x {self.burst_words} words does not "
                             f"fit count_bits={geometry.count_bits}")

    @property
    def ntiles(self):
        return self.grid[0] * self.grid[1]

    @property
    def tile_bytes(self):
        return self.tile[0] * self.tile[1] * self.dtype.nbytes

    def tile_addr(self, k):
        """Word address of the first word of tile ``k``."""
        i, j = divmod(k, self.grid[1])
        return self.base + i * self.row_step + j * self.col_step

    def address_of(self, index):
        """The word address of tile ``index`` as an Amaranth expression.

        ``index`` is a :class:`~amaranth.hdl.Value` holding a linear tile index below
        :attr:`ntiles` (the caller checks the range); the quotient and remainder by the tile-grid
        width are constant divisions, the products by the steps sums of shifts.
        """
        k = Value.cast(index)
        k = k[:max(1, ceil_log2(self.ntiles))]
        if self.tile_pitch is not None and self.tile_order == "row":
            return self.base + times_const(k, self.tile_pitch)
        gc = self.grid[1]
        return self.base + times_const(k // gc, self.row_step) + times_const(k % gc, self.col_step)

    def burst(self, k):
        """The request ``(addr, count, rows, stride)`` that moves tile ``k``."""
        return (self.tile_addr(k), self.burst_words, self.burst_rows, self.burst_stride)

    @property
    def start_lane(self):
        """The lane of every tile's first word, when all tiles start in one lane (both steps
        between tiles a multiple of the lanes, or only one tile along a grid dimension), else
        None."""
        L = self.geometry.lanes
        steps = [step for step, n in ((self.col_step, self.grid[1]), (self.row_step, self.grid[0]))
                 if n > 1]
        return self.base % L if all(step % L == 0 for step in steps) else None

    def port(self, kind):
        """The :class:`MemoryPort` (``"read"`` or ``"write"``) whose bursts move this tensor's
        tiles (with its :attr:`start_lane`)."""
        return MemoryPort(self.geometry, kind, (self.burst_words, self.burst_rows,
                                                self.burst_stride), start_lane=self.start_lane)

    def request(self, m, port, addr):
        """Drive ``port.req.payload`` (comb) with the burst of the tile at word ``addr``."""
        m.d.comb += port.req.payload.addr.eq(addr)

    def __repr__(self):
        base = f", base={self.base}" if self.base else ""
        natural = self.shape[1] * self.dtype.nbytes // self.geometry.word_bytes
        pitch = f", pitch={self.pitch}" if self.pitch != natural else ""
        if self.tile_pitch is not None:
            pitch = f", tile_pitch={self.tile_pitch}"
            if self.tile_order != "row":
                pitch += f", tile_order={self.tile_order!r}"
        return (f"TensorPlacement({self.geometry!r}, {self.dtype!r}, {self.shape}, {self.tile}"
                f"{base}{pitch})")


def word_addresses(info):
    """The word address of each word of a tensor, in row-major order of its words.

    Parameters
    ----------
    info : Mapping
        The tensor's entry in the lowering's tensor map: ``"base"``, ``"shape"``, ``"row_words"``
        (words of one tensor row) and its layout, ``"pitch_words"`` (row-major) or ``"tile"``,
        ``"tile_row_words"``, ``"tile_pitch_words"`` and optionally ``"tile_order"`` (tile-major;
        :func:`~stepforge.compiler.lower.tensor_layouts`).

    Returns
    -------
    numpy.ndarray of int64
        ``rows * row_words`` addresses; word ``c`` of tensor row ``r`` is entry
        ``r * row_words + c``.
    """
    rows, n = info["shape"][0], info["row_words"]
    r, c = np.meshgrid(np.arange(rows), np.arange(n), indexing="ij")
    if "tile_pitch_words" in info:
        tr, w = info["tile"][0], info["tile_row_words"]
        if info.get("tile_order", "row") == "col":
            tile = (c // w) * (rows // tr) + r // tr
        else:
            tile = (r // tr) * (n // w) + c // w
        addr = tile * info["tile_pitch_words"] + (r % tr) * w + c % w
    else:
        addr = r * info["pitch_words"] + c
    return (info["base"] + addr).reshape(-1).astype(np.int64)

