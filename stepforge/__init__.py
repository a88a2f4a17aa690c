"""stepforge: Streaming Tensor Programs (STeP) compiled into real hardware.

The public surface of the language, re-exported for programs (``from stepforge import *``): the
:class:`Program`, element and data types, every operator of the semantics' section 4, the
tile-function library, the errors, and :func:`run` (the reference interpreter).
"""

from .compiler.errors import StepError, StepRuntimeError, StepShapeError, StepTypeError
from .compiler.functions import (add, cast, div, empty_cols, empty_rows, exp, full, function,
                                 mac, matmul, maximum, mul, retile_col, retile_row, row_max,
                                 row_sum, rsqrt, scale, silu, sub, zeros)
from .compiler.graph import Program, Stream, Tensor
from .compiler.ops.compute import Accum, AddrGen, Filter, FlatMap, Map, RetileStreamify, Scan
from .compiler.ops.memory import Bufferize, Streamify
from .compiler.ops.offchip import (LinearOffChipLoad, LinearOffChipStore, RandomOffChipLoad,
                                   RandomOffChipStore)
from .compiler.ops.routing import Broadcast, EagerMerge, Parallelize, Partition, Reassemble
from .compiler.ops.shape import Expand, Flatten, Promote, RepeatStatic, Reshape, Zip
from .compiler.types import (Bool, Buffer, Index, Select, Tile, Tuple, bf16, fp32, int8, int16,
                             int32)
from .sim.interpreter import run

__all__ = [
    "Program", "Stream", "Tensor",
    "StepError", "StepShapeError", "StepTypeError", "StepRuntimeError",
    "Tile", "Buffer", "Select", "Tuple", "Index", "Bool", "int8", "int16", "int32", "bf16", "fp32",
    "LinearOffChipLoad", "LinearOffChipStore", "RandomOffChipLoad", "RandomOffChipStore",
    "Bufferize", "Streamify",
    "Map", "Accum", "Scan", "FlatMap", "RetileStreamify", "Filter", "AddrGen",
    "Partition", "Reassemble", "EagerMerge", "Broadcast", "Parallelize",
    "Flatten", "Reshape", "Promote", "Expand", "RepeatStatic", "Zip",
    "function", "add", "sub", "mul", "div", "maximum", "exp", "silu", "rsqrt", "row_sum",
    "row_max", "matmul", "mac", "scale", "cast", "retile_row", "retile_col",
    "zeros", "full", "empty_rows", "empty_cols",
    "run",
]
