"""Lowering: a :class:`~stepforge.compiler.graph.Program` becomes a :class:`HardwareGraph`.

The hardware graph is the typed object between the compiler and the system top: one hardware
unit per node (built by the registry :data:`BUILDERS`), one FIFO per stream, a placement of every
off-chip tensor and host stream in the memory, and the JSON manifest that the harness, the
reports and the host driver read. Lowering first runs the graph passes it needs
(:func:`~stepforge.compiler.passes.insert_broadcasts`, :func:`~stepforge.compiler.passes.tie_off`)
on the program, in place: they change its structure, never its meaning.

FIFO depths come from the integer program of :mod:`stepforge.compiler.fifo_sizing` (the least
FIFO bits that keep every reconvergence free of deadlock and the streams at full rate;
``docs/perf.md``). The first sizing rule stays reachable (``fifo_sizing="rule"``;
``docs/lowering.md``): every stream gets ``config.fifo_depth`` entries, except
the outputs of a node with several outputs (a Broadcast, a Partition, a Reshape with its padding
flags, ...) whose branches meet again (a reconvergent fork): there a branch must hold what the
other branch swallows before it produces anything, so each branch gets ``fifo_depth + max hold
of the other branches``, where the hold of a branch is the largest bounded fibre an Accum or
Bufferize on it reduces (the product of the bounds of its ``b`` innermost dimensions), or, when a
data-dependent router (Partition, Filter, EagerMerge) stands before that Accum on the branch, the
bound of the fork's whole stream (the Accum may wait for its last element until the very end). A
program may pin a stream's depth with ``depths={stream: n}``.
"""

import math
import warnings
from dataclasses import dataclass, field

from ..contract.beat import beat_layout
from ..hdl.config import HardwareConfig
from ..hdl.memory import MemoryGeometry, MemoryPort, TensorPlacement
from ..hdl.memory.lane_ram import DP16KD_SHAPES
from ..hdl.sdram import MACHINE_SDRAM
from .dims import fmt_shape
from .errors import LoweringError
from .fifo_sizing import (chunk_beats, check_deadlocks, downstream, looks_ahead, lp_depths,
                          unit_timing)
from .graph import Program
from .metrics import metrics
from .ops.feedback import check_bound
from .ops.compute import Accum, Filter
from .ops.io import Input, Output
from .ops.memory import Bufferize
from .ops.offchip import LinearOffChipLoad
from .ops.routing import EagerMerge, Partition
from .passes import insert_broadcasts, tie_off
from .tiling import TilingError, element_tiles, tile_for_hardware
from .types import Tile, Tuple

__all__ = ["BUILDERS", "builds", "UnitInstance", "EdgeInstance", "HardwareGraph", "lower",
           "LoweringError"]

BUILDERS = {}


def builds(*node_classes):
    """Register ``fn(node, lc) -> component`` as the builder of ``node_classes``."""
    def register(fn):
        for cls in node_classes:
            BUILDERS[cls] = fn
        return fn
    return register


class Part:
    """A node implemented by part of another node's unit (a Streamify by its PMU's read side).

    ``ports`` maps the node's port names to the shared component's port names.
    """

    def __init__(self, component, ports):
        self.component, self.ports = component, dict(ports)

    def __repr__(self):
        return f"Part({self.component!r}, {self.ports!r})"


@dataclass
class UnitInstance:
    """One hardware unit of the system: its id, the node it implements and its component.

    ``ports`` maps the node's port names to the component's (identity unless the builder
    renamed them); ``shared`` marks a node implemented by another unit's component (a part).
    """
    uid: int
    name: str
    node: object
    component: object
    memory: list = field(default_factory=list)   # [(port name, "read" | "write")]
    sink: bool = False
    ports: dict = field(default_factory=dict)
    shared: bool = False

    @property
    def kind(self):
        return type(self.component).__name__

    def port(self, name):
        """The component's port that implements the node's port ``name``."""
        return getattr(self.component, self.ports.get(name, name))


#: Edge FIFOs of this many entries or more are buffered queues (their storage read
#: synchronously, so it may be block RAM; :class:`~stepforge.hdl.fifo.StreamFIFO`).
BUFFERED_DEPTH = 8
#: Entries of a block-RAM edge FIFO at least: a buffered queue moves a beat a cycle from 3 on.
BLOCK_RAM_DEPTH = 3


@dataclass
class EdgeInstance:
    """One stream of the system: the FIFO between a producer port and a consumer port.

    ``block_ram``: the FIFO keeps its beats in block RAM (:func:`fifo_storage`)."""
    eid: int
    stream: object
    src: tuple      # (unit name, port name)
    dst: tuple      # (unit name, port name)
    layout: object
    depth: int
    block_ram: bool = False

    @property
    def name(self):
        return self.stream.name

    @property
    def buffered(self):
        """Whether the FIFO is a buffered queue (:func:`buffered_queue`)."""
        return buffered_queue(self.depth, self.block_ram)

    @property
    def storage(self):
        """What holds the FIFO's beats: ``"block RAM"``, ``"buffered"`` (a buffered queue whose
        storage Yosys maps as it sees fit) or ``"registers"``."""
        return "block RAM" if self.block_ram else "buffered" if self.buffered else "registers"


def buffered_queue(depth, block_ram):
    """Whether an edge FIFO of ``depth`` entries is a buffered queue, whose beat is offered two
    cycles after its push, not one: a deep FIFO, or one in block RAM."""
    return block_ram or depth >= BUFFERED_DEPTH


#: One block RAM's organizations ``(data bits, rows)`` by family: ``SB_RAM40_4K`` (also the
#: estimate without a family) and ``DP16KD``.
BLOCK_RAM_SHAPES = {"ice40": ((16, 256), (8, 512), (4, 1024), (2, 2048)),
                    "ecp5": DP16KD_SHAPES}


def block_rams(width, rows, family):
    """Block RAMs of ``family`` that a memory of ``rows`` words of ``width`` bits takes, in the
    organization that needs the fewest."""
    shapes = BLOCK_RAM_SHAPES.get(family, BLOCK_RAM_SHAPES["ice40"])
    return min(-(-width // bits) * -(-rows // deep) for bits, deep in shapes)


def fifo_storage(fifos, config):
    """``[(depth, blocks)]`` of edge FIFOs given as ``[(width, depth)]`` (beat bits, entries):
    ``blocks`` is the block RAMs a FIFO takes, 0 when it is not in block RAM.

    A FIFO of 2 entries or more whose beats are at least ``config.fifo_block_ram_width`` bits
    wide goes to block RAM, with at least :data:`BLOCK_RAM_DEPTH` entries (so that it moves a
    beat a cycle; the entries cost nothing there), the widest first while the FIFOs take at
    most ``config.fifo_block_rams`` block RAMs in all (a buffered queue of ``depth`` entries
    stores ``depth - 1``; :func:`block_rams`). Any other FIFO keeps its depth."""
    limit = config.fifo_block_ram_width
    left = math.inf if config.fifo_block_rams is None else config.fifo_block_rams
    out = [(depth, 0) for _, depth in fifos]
    if limit is None:
        return out
    wide = sorted((k for k, (w, d) in enumerate(fifos) if d >= 2 and w >= limit),
                  key=lambda k: (-fifos[k][0], k))
    for k in wide:
        width, depth = fifos[k]
        depth = max(depth, BLOCK_RAM_DEPTH)
        cost = block_rams(width, depth - 1, config.family)
        if cost <= left:
            out[k] = (depth, cost)
            left -= cost
    return out


class LoweringContext:
    """What builders need: the program, the hardware configuration and the memory layout."""

    def __init__(self, program, config, geometry, tensor_base, stream_base):
        self.program, self.config, self.geometry = program, config, geometry
        self.tensor_base = tensor_base
        self.stream_base = stream_base
        self.parts = {}     # node -> Part, filled by builders of shared units
        self.tensor_layout = {}  # tensor name -> its layout (tensor_layouts)

    def row_bound(self, elem_type):
        """``{rows expression: bound}`` for every dynamic tile inside ``elem_type`` (or None)."""
        bounds = {}

        def visit(t):
            if isinstance(t, Tile) and not isinstance(t.rows, int):
                b = self.program.symbols.bound(t.rows)
                if b is None:
                    raise LoweringError(f"a tile with {t.rows} rows has no bound: declare the "
                                        f"bound of every symbol in {t.rows}")
                bounds[t.rows] = max(b, 1)
            elif isinstance(t, Tuple):
                for e in t.elems:
                    visit(e)
        visit(elem_type)
        return bounds or None

    def layout(self, stream):
        return beat_layout(stream.dtype, stream.rank, row_bound=self.row_bound(stream.dtype))

    def placement(self, tensor, tile):
        lay = self.tensor_layout[tensor.name]
        return TensorPlacement(self.geometry, tensor.dtype, tensor.shape, tuple(tile),
                               base=self.tensor_base[tensor.name], pitch=lay.get("pitch_words"),
                               tile_pitch=lay.get("tile_pitch_words"),
                               tile_order=lay.get("tile_order", "row"))


@dataclass
class HardwareGraph:
    """Units, FIFOs and memory layout of one program on one :class:`HardwareConfig`.

    Attributes
    ----------
    program : Program
    config : HardwareConfig
    geometry : MemoryGeometry
    units : list of UnitInstance
    edges : list of EdgeInstance
    tensors : dict of str to dict
        ``{name: {"base", "bytes", "shape", "dtype", "role", "row_words", ...}}`` (word
        addresses) and the tensor's layout (:func:`tensor_layouts`): ``"pitch_words"`` (row
        ``r`` starts at ``base + r * pitch_words``) or ``"tile"``, ``"tile_row_words"`` and
        ``"tile_pitch_words"`` (tile ``k`` starts at ``base + k * tile_pitch_words``, its rows
        one after another; with ``"tile_order": "col"`` the tiles are numbered column-major);
        :func:`~stepforge.hdl.memory.word_addresses` maps either.
    streams_in, streams_out : dict of str to dict
        Host streams: ``{name: {"base", "words_per_beat", "max_beats", "rank", "elem"}}``.
    memory_bytes : int
    tiling : str
        What hierarchical tiling did: ``"not needed"`` (every tile fits the hardware tile),
        ``"applied"``, ``"off"``, or why it was not applied (tiles then move as wide beats).
    """
    program: object
    config: object
    geometry: object
    units: list
    edges: list
    tensors: dict
    streams_in: dict
    streams_out: dict
    memory_bytes: int
    tiling: str = "not needed"
    fifo_sizing: dict = field(default_factory=dict)     # {"method", "bits", "fifos": {name: why},
    #                                                      "block_ram": {name: {"depth", "block_rams"}}}
    deadlocks: list = field(default_factory=list)       # the static check's findings

    def unit(self, name):
        for u in self.units:
            if u.name == name:
                return u
        raise KeyError(name)

    def memory_extents(self):
        """``[(base, words)]``: the memory words of every tensor (its layout's padding
        included) and of every host stream's region, in word addresses of :attr:`geometry`."""
        word = self.geometry.word_bytes
        extents = [(info["base"], _layout_words(self.program.tensors[name], info, word))
                   for name, info in self.tensors.items()]
        extents += [(info["base"], info["max_beats"] * info["words_per_beat"])
                    for info in (*self.streams_in.values(), *self.streams_out.values())]
        return extents

    @property
    def onchip_memory_bits(self):
        """Bits of the tensors' memory that the FPGA itself holds: the whole memory, or 0 when
        the tensors live in an SDRAM chip beside it (``config.memory == "sdram"``)."""
        if self.config.memory == "sdram":
            return 0
        return self.geometry.size_words * self.geometry.word_bytes * 8

    def manifest(self):
        """A JSON-able description of the system (ports, memory map, units, FIFOs, metrics)."""
        m = metrics(self.program)
        return {
            "program": self.program.name,
            "config": repr(self.config),
            "hierarchical_tiling": self.tiling,
            "memory": {"bytes": self.memory_bytes, "word_bytes": self.geometry.word_bytes,
                       "lanes": self.geometry.lanes, "channels": self.geometry.channels,
                       "bytes_per_channel": self.geometry.bytes_per_channel,
                       "latency": self.geometry.latency},
            "tensors": self.tensors,
            "streams_in": self.streams_in,
            "streams_out": self.streams_out,
            "units": [{"id": u.uid, "name": u.name, "op": u.node.op, "unit": u.kind,
                       "memory": [p for p, _ in u.memory], "sink": u.sink} for u in self.units],
            "fifos": [{"id": e.eid, "stream": e.name, "src": list(e.src), "dst": list(e.dst),
                       "depth": e.depth, "width": e.layout.size,
                       "storage": e.storage,
                       "shape": fmt_shape(e.stream.shape), "element": repr(e.stream.dtype)}
                      for e in self.edges],
            "metrics": {"offchip_read": str(m.offchip_read), "offchip_write": str(m.offchip_write),
                        "onchip": str(m.onchip), "flops": str(m.flops)},
            # how the depths were chosen, not how long that took: the manifest describes the
            # design, so two compilations of one program give the same manifest (and design id)
            "fifo_sizing": {k: v for k, v in self.fifo_sizing.items() if k != "seconds"},
            "static_deadlocks": self.deadlocks,
        }


def _hold(node):
    """Beats a node swallows before it produces its first output (bounded), for FIFO sizing."""
    b = getattr(node, "b", None)
    if isinstance(node, (Accum, Bufferize)) and b:
        x = node.inputs[0]
        n = 1
        for d in x.shape[len(x.shape) - b:]:
            bound = node.program.symbols.bound(d)
            if bound is None:
                return 0
            n *= bound
        return n
    return 0


def _fifo_depths(program, base, pinned):
    """The sizing rule of the module doc."""
    selective = (Partition, Filter, EagerMerge)   # how many beats pass is data-dependent
    depths = {s: base for s in program.streams}
    cons = program.consumers()
    sym = program.symbols

    def reach(stream):
        """Nodes reachable from ``stream``, each with the largest hold on the way to it."""
        whole = sym.bound(program.cardinality(stream))
        out = {}
        stack = [(stream, 0, 0, False)]
        while stack:
            s, hold, last, filtered = stack.pop()
            for node, _ in cons[s]:
                h = _hold(node)
                if h and filtered:
                    # behind a data-dependent router a hold of h beats may take the fork's whole
                    # stream to fill (an expert waits for its 4th token while the others pass)
                    h = max(h, whole or 0)
                new_last = max(last, h)
                total = max(hold, h)
                if looks_ahead(node):
                    # it keeps one element until the next arrives: one more upstream hold
                    total = hold + max(last, 1)
                f = filtered or isinstance(node, selective)
                if out.get(node, (-1, False, -1))[:2] >= (total, f):
                    continue
                out[node] = (total, f, hold)        # hold after the node, flag, hold before it
                for o in node.outputs:
                    stack.append((o, total, new_last, f))
        return {n: (after, before) for n, (after, _, before) in out.items()}

    for node in program.nodes:
        if len(node.outputs) < 2:
            continue
        reaches = [reach(o) for o in node.outputs]
        for i, o in enumerate(node.outputs):
            extra = 0
            for j, other in enumerate(reaches):
                if i == j:
                    continue
                meets = set(reaches[i]) & set(other)
                later = set().union(*(downstream(m, cons) for m in meets)) if meets else set()
                for meet in meets - later:      # the first places the branches meet again
                    # a chunk-wise join (EagerMerge, Reassemble) may take a whole chunk of the
                    # other branch first
                    chunk = chunk_beats(meet, [[s] for s in meet.inputs])[0]
                    extra = max(extra, other[meet][1], chunk)
            depths[o] = base + extra
    for s, d in (pinned or {}).items():
        depths[s] = d
    return depths


#: The widest beat, and the most beat bits over all streams, that the lowering accepts. Units,
#: FIFOs and PCUs are built for the bounds, and converting them costs time and memory in
#: proportion: MoE at T=32 (16,448-bit beats, 0.2 Mbit over its streams) converts in minutes
#: and 0.4 GB; at T=4000 it would need tens of GB. Larger designs are refused up front.
MAX_BEAT_BITS = 65_536
MAX_STREAM_BITS = 1 << 20
#: The largest memory (tensors and host streams, in bytes) the lowering accepts: the generic
#: memory is a Verilog array (24 MB convert in 0.15 GB), an FPGA family's is built of its block
#: RAM primitives in Amaranth (384 KB on iCE40: 0.2 GB; 24 MB exhaust 8 GB).
MAX_MEMORY_BYTES = {None: 64 << 20, "ecp5": 4 << 20, "ice40": 4 << 20}


def _check_size(program, config, tiling="not needed"):
    """Refuse a program whose beats have no wire encoding (a dynamic column count that
    hierarchical tiling, ``tiling`` saying what it did, left in place) or are too wide to
    elaborate (:data:`MAX_BEAT_BITS`). Returns every stream's beat width in bits."""
    lc = LoweringContext(program, config, None, {}, {})
    widths = {}
    for s in program.streams:
        try:
            widths[s] = lc.layout(s).size
        except ValueError as e:
            why = f" (hierarchical tiling {tiling})" if tiling.startswith("not applied") else ""
            raise LoweringError(f"{s.node.name}: stream {s.name} {fmt_shape(s.shape)} cannot be "
                                f"built in hardware: {e}{why}") from None
    if not widths:
        return widths
    widest = max(widths, key=widths.get)
    total = sum(widths.values())
    if widths[widest] > MAX_BEAT_BITS or total > MAX_STREAM_BITS:
        raise LoweringError(
            f"{widest.name} carries beats of {widths[widest]:,} bits ({widest.dtype!r} at its "
            f"bounds) and the program's {len(widths)} streams {total:,} bits in all; the "
            f"hardware is built for the bounds, and a design over {MAX_BEAT_BITS:,} bits per "
            f"beat or {MAX_STREAM_BITS:,} bits in all would exhaust memory while it is "
            f"elaborated: lower the bounds (or the sizes behind them), or use smaller tiles")
    return widths



#: A tile-major layout may pad each tile to whole lines by at most this many bytes in all (or
#: by a quarter of the tensor, if that is more).
TILE_PADDING_BYTES = 1024


def _tensor_tiles(program):
    """``(tensor, (rows, cols))`` of every off-chip operator: the tile it moves (a store's is
    its input's element)."""
    for node in program.nodes:
        tensor, tile = getattr(node, "tensor", None), getattr(node, "tile", None)
        if tensor is None:
            continue
        if tile is None:
            t = node.inputs[-1].dtype
            tile = (t.rows, t.cols)
        yield tensor, tuple(tile)


def _tile_order(program, tensor, grid):
    """``"col"`` when every operator that moves ``tensor`` is a linear load whose walk goes down
    the tile columns (its innermost moving dimension steps one tile row, ``grid[1]`` tiles of
    the row-major index), else ``"row"``."""
    rows, cols = grid
    if rows < 2 or cols < 2:
        return "row"
    for node in program.nodes:
        if getattr(node, "tensor", None) is not tensor:
            continue
        if not isinstance(node, LinearOffChipLoad):
            return "row"
        moving = [s for n, s in zip(node.out_shape, node.stride) if n > 1 and s != 0]
        if not moving or abs(moving[-1]) != cols:
            return "row"
    return "col"


def tensor_layouts(program, word, lanes, spare_bytes=0, contiguous_tiles=False):
    """How each tensor that off-chip operators move is laid out in memory, by name.

    **Row-major** (``{"pitch_words": P}``): row ``r`` at ``base + r * P``. The pitch is padded
    so that the rows of one tile fall in distinct lanes (one line per tile instead of one per
    row) when a tile is narrower than the tensor.

    **Tile-major** (``{"tile": [tr, tc], "tile_row_words": w, "tile_pitch_words": T}``): tile
    ``k`` (row-major over the tile grid) at ``base + k * T``, its rows one after another, ``T``
    the tile's words rounded up to whole lines. **Decision:** a tensor that every operator moves
    in one tile shape is laid out by tiles when the row-major layout would start its tiles in
    different lanes (so every response and write would pass the memory's lane crossbar) and the
    padding costs at most :data:`TILE_PADDING_BYTES` or a quarter of the tensor, or fits in
    ``spare_bytes`` (memory the RAMs hold anyway, :attr:`HardwareConfig.fixed_memory_bytes`,
    shared by the tensors in program order): every tile then starts in lane 0, and the memory
    wires the client's words to its lanes at build time. Idle memory is spent before logic: on
    the iCE40's SPRAM a 1x2 int16 tile padded to a whole line removes the lane crossbar of every
    client that moves such tiles (about 500 LUT4 for elementwise). The host loads and reads
    tensors through :func:`~stepforge.hdl.memory.word_addresses`, so the layout is invisible to
    a program.

    ``contiguous_tiles`` (an SDRAM machine, ``HardwareConfig.memory == "sdram"``): a tensor that
    every operator moves in one tile shape is laid out by tiles whenever its tiles have several
    rows narrower than the tensor, so a tile is one run of words: one SDRAM command instead
    of one per tile row (**decision**: GEMV 64x32's tiles of 4 x 4 int8 took four commands of
    two chip words each, half the cycles in the controller's per-command steps).
    On such a machine the tiles of a tensor that every operator reads down its tile columns
    (SwiGLU's weights, walked ``stride=(0, 1, cols)``) are laid out column-major
    (``"tile_order": "col"``, **decision**): consecutive reads are consecutive tiles in one
    SDRAM row instead of a row apart, each a row change of the chip.
    """
    tiles = {}
    for tensor, tile in _tensor_tiles(program):
        tiles.setdefault(tensor.name, (tensor, []))[1].append(tile)
    layouts = {}
    for name, (tensor, shapes) in tiles.items():
        (rows, cols), (tr, tc) = tensor.shape, shapes[0]
        natural = cols * tensor.dtype.nbytes // word
        row_words = tc * tensor.dtype.nbytes // word
        if tc == cols or tr * row_words > lanes:
            pitch = natural
        else:
            pitch = natural + (row_words - natural) % lanes
        grid = (rows // tr, cols // tc)
        steps = [step for step, n in ((row_words, grid[1]), (tr * pitch, grid[0])) if n > 1]
        tile_words = tr * row_words
        tile_pitch = -(-tile_words // lanes) * lanes
        padding = (tile_pitch - tile_words) * grid[0] * grid[1] * word
        cheap = padding <= max(TILE_PADDING_BYTES, tensor.nbytes // 4)
        split = any(step % lanes for step in steps) or (contiguous_tiles and tr > 1 and tc < cols)
        if len(set(shapes)) == 1 and split and (cheap or padding <= spare_bytes):
            if not cheap:
                spare_bytes -= padding
            layouts[name] = {"tile": [tr, tc], "tile_row_words": row_words,
                             "tile_pitch_words": tile_pitch}
            if contiguous_tiles and _tile_order(program, tensor, grid) == "col":
                layouts[name]["tile_order"] = "col"
        else:
            layouts[name] = {"pitch_words": pitch}
    return layouts


def _layout_words(tensor, layout, word):
    """Words a tensor spans in memory in ``layout`` (padding included)."""
    if "tile_pitch_words" in layout:
        tr, tc = layout["tile"]
        return (tensor.shape[0] // tr) * (tensor.shape[1] // tc) * layout["tile_pitch_words"]
    return tensor.shape[0] * layout["pitch_words"]


def _memory_map(program, config, layouts, word, lanes):
    """Bases of the tensors (in ``layouts``) and of the host streams, each aligned to a line:
    ``(tensor_base, tensors, stream_base, streams_in, streams_out, words)``, ``words`` the end
    of the highest.

    One after another from address 0; on an SDRAM machine (**decision**) in the chip's banks in
    turn, in program order (tensors, then host streams), each bank filled from its first word
    (the machine's chip has the bank on top of the address, :data:`~stepforge.hdl.sdram.
    MACHINE_SDRAM`): streams that a program reads at once (SwiGLU's X, Wg and Wu, a tile of each
    in turn) then keep one row open in each bank instead of closing each other's rows at every
    tile, which cost the chip's precharge and activate beside every 8-word tile."""
    if config.memory == "sdram":
        region = MACHINE_SDRAM.bank_words * (MACHINE_SDRAM.data_bits // 8) // word
        starts = [b * region for b in range(MACHINE_SDRAM.banks)]
    else:
        starts = [0]
    cursors = list(starts)
    placed = 0

    def take(nbytes):
        nonlocal placed
        k = placed % len(cursors)
        placed += 1
        base = cursors[k]
        words = -(-nbytes // word)
        cursors[k] += -(-words // lanes) * lanes
        if len(starts) > 1 and cursors[k] > starts[k] + region:
            raise LoweringError(f"{nbytes:,} bytes do not fit bank {k} of the SDRAM chip "
                                f"({region * word:,} bytes a bank)")
        return base

    tensor_base, tensors = {}, {}
    for t in program.tensors.values():
        lay = layouts.get(t.name) or {"pitch_words": t.shape[1] * t.dtype.nbytes // word}
        tensor_base[t.name] = take(_layout_words(t, lay, word) * word)
        tensors[t.name] = {"base": tensor_base[t.name], "bytes": t.nbytes, "shape": list(t.shape),
                           "dtype": t.dtype.name, "role": t.role,
                           "row_words": t.shape[1] * t.dtype.nbytes // word, **lay}
    streams_in, streams_out, stream_base = {}, {}, {}
    probe = LoweringContext(program, config, None, {}, {})   # layouts with their row bounds
    for node in program.nodes:
        if isinstance(node, (Input, Output)):
            s = node.outputs[0] if isinstance(node, Input) else node.inputs[0]
            layout = probe.layout(s)
            wpb = -(-layout.size // (8 * word))
            card = program.symbols.bound(program.cardinality(s))
            if card is None:
                raise LoweringError(f"{node.name}: stream {s.name} {fmt_shape(s.shape)} has no bound "
                                    f"on its length; declare bounds for its symbols")
            max_beats = 2 * card + 2      # every element plus at most one stop-only beat each
            stream_base[node.name] = take(max_beats * wpb * word)
            info = {"base": stream_base[node.name], "words_per_beat": wpb, "max_beats": max_beats,
                    "rank": s.rank, "elem": repr(s.dtype)}
            (streams_in if isinstance(node, Input) else streams_out)[node.name] = info
    end = max((c for c, start in zip(cursors, starts) if c > start), default=0)
    return tensor_base, tensors, stream_base, streams_in, streams_out, end


def wide_tiles(program, config):
    """The streams of ``program`` whose tiles are larger than ``config``'s hardware tile at
    their bounds: ``[(stream, tile, rows, cols)]`` with the bounds of the tile's sides. After
    :func:`~stepforge.compiler.tiling.tile_for_hardware` these are the tiles that move whole,
    as one wide beat each: a dynamic tile (rows up to a symbol's bound), or a static one that
    hierarchical tiling left in place."""
    found = []
    for s in program.streams:
        for tile in element_tiles(s.dtype):
            rows, cols = (program.symbols.bound(d) for d in (tile.rows, tile.cols))
            if (rows or 0) > config.tile_rows or (cols or 0) > config.tile_cols:
                found.append((s, tile, rows, cols))
    return found


def _refuse_wide_tiles(program, config, note, bits):
    """The FPGA target's check (``lower(..., wide_beats=False)``): no tile moves as a wide
    beat. ``bits``: every stream's beat width (:func:`_check_size`)."""
    wide = wide_tiles(program, config)
    if not wide:
        return
    wide.sort(key=lambda w: -bits[w[0]])              # the widest first
    lines = []
    for s, tile, rows, cols in wide[:6]:
        lines.append(f"  {s.node.name}: stream {s.name} {fmt_shape(s.shape)} of {tile!r} "
                     f"(up to {rows} x {cols}, beats of {bits[s]:,} bits)")
    more = f"\n  ... and {len(wide) - 6} more" if len(wide) > 6 else ""
    why = (f"hierarchical tiling {note}" if note.startswith("not applied") else
           "hierarchical tiling splits static tiles only; a dynamic tile is moved whole")
    raise LoweringError(
        f"{len(wide)} stream(s) move tiles larger than the hardware tile "
        f"({config.tile_rows}x{config.tile_cols}) as single wide beats ({why}):\n"
        + "\n".join(lines) + more + "\nan FPGA build refuses wide beats: use smaller tiles or "
        "bounds, or allow them explicitly (stepforge build --wide-beats; lower(..., "
        "wide_beats=True))")


def lower(program, config=None, *, depths=None, memory_slack_bytes=0, tiling="auto",
          fifo_sizing="lp", throughput=1.0, deadlock_check="warn", wide_beats=True):
    """Lower ``program`` for ``config`` (default :meth:`HardwareConfig.sim`).

    Parameters
    ----------
    program : Program
        Rewritten in place by the graph passes (broadcasts, tie-offs). A program moving tiles
        larger than ``config``'s hardware tile is first rewritten into a new one over hardware
        tiles (:func:`~stepforge.compiler.tiling.tile_for_hardware`); the result's ``program``
        is the one the hardware runs.
    tiling : {"auto", "on", "off"}
        Hierarchical tiling. ``"auto"``: applied when every operator on a large tile has a rule,
        else the tiles move whole as wide beats (the reason is in ``HardwareGraph.tiling``);
        ``"on"``: a missing rule raises :class:`~stepforge.compiler.tiling.TilingError`.
    config : HardwareConfig, optional
    depths : dict of Stream to int, optional
        FIFO depths that override the sizing rule (e.g. to provoke a deadlock in a test).
    fifo_sizing : {"lp", "rule"}
        ``"lp"`` (the default): the integer program of :mod:`stepforge.compiler.fifo_sizing`
        (least FIFO bits, ``throughput`` between 0: only deadlock-free, and 1: full rate);
        ``"rule"``: the first sizing rule of the module doc, kept for comparison.
    throughput : float
        The LP's knob, 0 (minimal area) to 1 (full rate, the default).
    deadlock_check : {"warn", "raise", "off"}
        The static deadlock check (:func:`~stepforge.compiler.fifo_sizing.check_deadlocks`) on
        the chosen depths: its findings are in ``HardwareGraph.deadlocks`` and the manifest;
        ``"warn"`` also warns, ``"raise"`` raises :class:`LoweringError`.
    wide_beats : bool, default True
        Whether a tile larger than the hardware tile may move whole as one wide beat (a dynamic
        tile; a static one that hierarchical tiling left in place; :func:`wide_tiles`). The
        FPGA builds pass False: such a program is refused with a :class:`LoweringError` naming
        the streams, their tiles and beat widths, instead of a design no device holds.

    Returns
    -------
    HardwareGraph
    """
    if not isinstance(program, Program):
        raise TypeError(f"lower() needs a Program, not {type(program).__name__}")
    config = config or HardwareConfig.sim()
    if tiling not in ("auto", "on", "off"):
        raise ValueError(f"lower(): tiling must be 'auto', 'on' or 'off', not {tiling!r}")
    if fifo_sizing not in ("rule", "lp"):
        raise ValueError(f"lower(): fifo_sizing must be 'rule' or 'lp', not {fifo_sizing!r}")
    if deadlock_check not in ("warn", "raise", "off"):
        raise ValueError(f"lower(): deadlock_check must be 'warn', 'raise' or 'off', not "
                         f"{deadlock_check!r}")
    check_bound(program)
    note = "off" if tiling == "off" else "not needed"
    if tiling != "off":
        try:
            tiled = tile_for_hardware(program, config)    # ``program`` itself when every tile fits
            if tiled is not program:
                program, note = tiled, "applied"
        except TilingError as e:
            if tiling == "on":
                raise
            note = f"not applied: {e}"
    insert_broadcasts(program)
    tie_off(program)
    widths = _check_size(program, config, note)
    if not wide_beats:
        _refuse_wide_tiles(program, config, note, widths)

    # Memory words: the largest size that divides a channel's bytes per cycle and every tile row
    # the program moves, so every tile row is whole words.
    word = config.mem_bytes_per_channel
    for tensor, tile in _tensor_tiles(program):
        word = math.gcd(word, tile[1] * tensor.dtype.nbytes)
    # Memory map: tensors first, then host streams, each aligned to a line.
    probe = MemoryGeometry.from_config(config, 1 << 20, word_bytes=word)
    word, lanes = probe.word_bytes, probe.lanes
    contiguous = config.memory == "sdram"
    layouts = tensor_layouts(program, word, lanes, contiguous_tiles=contiguous)
    tensor_base, tensors, stream_base, streams_in, streams_out, cursor = _memory_map(
        program, config, layouts, word, lanes)
    fixed = config.fixed_memory_bytes
    if fixed is not None:    # pad tiles to lines in the memory the RAMs hold anyway
        spare = fixed - cursor * word - memory_slack_bytes
        padded = tensor_layouts(program, word, lanes, spare_bytes=max(spare, 0),
                                contiguous_tiles=contiguous)
        if padded != layouts:
            layouts = padded
            tensor_base, tensors, stream_base, streams_in, streams_out, cursor = _memory_map(
                program, config, layouts, word, lanes)
    memory_bytes = max(cursor * word + memory_slack_bytes, word * lanes)
    limit = (MACHINE_SDRAM.words * MACHINE_SDRAM.data_bits // 8 if config.memory == "sdram"
             else MAX_MEMORY_BYTES.get(config.family, MAX_MEMORY_BYTES[None]))
    if memory_bytes > limit:
        sizes = ", ".join(f"{t.name} {t.nbytes:,}" for t in program.tensors.values())
        raise LoweringError(f"the program's memory needs {memory_bytes:,} bytes (tensors: {sizes}); "
                            f"the memory of the {config.family or 'simulation'} machine is built "
                            f"for at most {limit:,} bytes, more would exhaust memory while it "
                            f"is elaborated: choose smaller sizes")
    geometry = MemoryGeometry.from_config(config, memory_bytes, word_bytes=word)
    lc = LoweringContext(program, config, geometry, tensor_base, stream_base)
    lc.tensor_layout = layouts

    units = []
    for node in program.nodes:
        part = lc.parts.get(node)
        if part is not None:
            units.append(UnitInstance(len(units), node.name, node, part.component, [],
                                      ports=part.ports, shared=True))
            continue
        fn = BUILDERS.get(type(node))
        if fn is None:
            raise LoweringError(f"{node.name}: the hardware library has no unit for {node.op}")
        try:
            built = fn(node, lc)
        except (ValueError, TypeError) as e:
            raise LoweringError(f"{node.name}: {node.op} cannot be built in hardware: {e}") from e
        comp, ports = (built.component, built.ports) if isinstance(built, Part) else (built, {})
        memory = list(_memory_ports(comp))
        units.append(UnitInstance(len(units), node.name, node, comp, memory,
                                  sink=not node.outputs, ports=ports))
    by_node = {u.node: u for u in units}
    sizes, sizing, found = _size_fifos(program, lc, by_node, config, depths, fifo_sizing,
                                       throughput, deadlock_check)
    cons = program.consumers()
    layouts = [lc.layout(s) for s in program.streams]
    storage = fifo_storage([(lay.size, sizes[s]) for lay, s in zip(layouts, program.streams)],
                           config)
    # the manifest's record: which FIFOs went to block RAM, their depth and block RAMs
    sizing["block_ram"] = {s.name: {"depth": d, "block_rams": n}
                           for s, (d, n) in zip(program.streams, storage) if n}
    edges = []
    for s, layout, (depth, blocks) in zip(program.streams, layouts, storage):
        (reader, index), = cons[s]
        src = by_node[s.node]
        dst = by_node[reader]
        edges.append(EdgeInstance(len(edges), s, (src.name, s.node.output_names[s.port]),
                                  (dst.name, reader.input_names[index]), layout, depth,
                                  blocks > 0))
    return HardwareGraph(program, config, geometry, units, edges, tensors, streams_in,
                         streams_out, memory_bytes, note, sizing, found)


def _size_fifos(program, lc, by_node, config, pinned, method, throughput, check):
    """FIFO depths by the rule or the integer program, the manifest's record of them, and the
    static deadlock check's findings."""
    widths = {s: lc.layout(s).size for s in program.streams}
    timing = {}

    def timing_of(node):
        if node not in timing:
            timing[node] = unit_timing(by_node[node].component, node)
        return timing[node]
    if method == "lp":
        plan = lp_depths(program, widths, timing_of, throughput=throughput, pinned=pinned,
                         base=config.fifo_depth)
        sizes = plan.depths
        record = {"method": "lp", "throughput": throughput, "seconds": round(plan.seconds, 4),
                  "fifos": {s.name: plan.notes[s] for s in program.streams}}
    else:
        sizes = _fifo_depths(program, config.fifo_depth, pinned)
        record = {"method": "rule", "fifos": {}}
    record["bits"] = sum(sizes[s] * widths[s] for s in program.streams)
    needs = plan.needs if method == "lp" else None
    found = [] if check == "off" else check_deadlocks(program, sizes, timing_of, needs)
    if found and check == "raise":
        raise LoweringError("\n".join(found))
    if found and check == "warn":
        warnings.warn("\n".join(found), stacklevel=3)
    return sizes, record, found


def _memory_ports(comp):
    for name, member in comp.signature.members.items():
        if member.is_signature and isinstance(member.signature, MemoryPort):
            yield name, member.signature.kind


# The builders register themselves with ``builds`` when their module is imported. It imports
# ``builds`` and ``Part`` from this module, so it comes last (a real cycle, resolved by order).
from . import lower_units  # noqa: E402, F401
