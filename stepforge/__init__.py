"""stepforge: Streaming Tensor Programs (STeP) compiled into real hardware.

The public surface of the language, re-exported for programs (``from stepforge import *``): the
:class:`Program`, element and data types, every operator of the semantics' section 4, the
tile-function library, the errors, and :func:`run` (the reference interpreter).

Names are imported on first use (PEP 562), so importing a subpackage that needs none of them,
such as the cocotb testbenches that run inside the simulator, does not pay for SymPy.
"""

import importlib


_HOME = {
    **dict.fromkeys(['StepError', 'StepRuntimeError', 'StepShapeError', 'StepTypeError'], '.compiler.errors'),
    **dict.fromkeys(['add', 'cast', 'div', 'empty_cols', 'empty_rows', 'exp', 'full', 'function', 'mac', 'matmul', 'maximum', 'mul', 'retile_col', 'retile_row', 'row_max', 'row_sum', 'rsqrt', 'scale', 'silu', 'sub', 'zeros'], '.compiler.functions'),
    **dict.fromkeys(['Program', 'Stream', 'Tensor'], '.compiler.graph'),
    **dict.fromkeys(['Accum', 'AddrGen', 'Filter', 'FlatMap', 'Map', 'RetileStreamify', 'Scan'], '.compiler.ops.compute'),
    **dict.fromkeys(['Bufferize', 'Streamify'], '.compiler.ops.memory'),
    **dict.fromkeys(['LinearOffChipLoad', 'LinearOffChipStore', 'RandomOffChipLoad', 'RandomOffChipStore'], '.compiler.ops.offchip'),
    **dict.fromkeys(['Broadcast', 'EagerMerge', 'Parallelize', 'Partition', 'Reassemble'], '.compiler.ops.routing'),
    **dict.fromkeys(['Expand', 'Flatten', 'Promote', 'RepeatStatic', 'Reshape', 'Zip'], '.compiler.ops.shape'),
    **dict.fromkeys(['Bool', 'Buffer', 'Index', 'Select', 'Tile', 'Tuple', 'bf16', 'fp32', 'int8', 'int16', 'int32'], '.compiler.types'),
    **dict.fromkeys(['run'], '.sim.ref.interpreter'),
}

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


def __getattr__(name):
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'stepforge' has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
