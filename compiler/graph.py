"""The one graph type of stepforge: a :class:`Program` of :class:`Node` s joined by :class:`Stream` s.

A node is created by calling an operator class (``Flatten(x, 0, 1)``); its constructor checks its
inputs and infers its outputs' shapes and element types, so a malformed program fails at the line
that builds it. Nodes are kept in creation order, which is a topological order (a node's inputs
exist before it) except at a :class:`~stepforge.compiler.ops.feedback.Feedback` node, whose input
is bound after its readers are built (a cycle: :meth:`Program.feedback`, :meth:`Program.bind`). Passes rewrite a program in place through :meth:`Program.replace_input`,
:meth:`Program.insert_after` and :meth:`Program.remove`.
"""

import itertools
from collections import defaultdict

import sympy

from .dims import SymbolTable, fmt_shape, norm_dim
from .errors import StepShapeError, StepTypeError
from .types import DType, ElemType

__all__ = ["Stream", "Node", "Program", "Tensor", "as_stream"]


class Stream:
    """An edge of the graph: output ``port`` of ``node``.

    Attributes
    ----------
    shape : tuple
        Outermost first, ``rank + 1`` entries; each an ``int`` or a SymPy expression.
    dtype : ElemType
        Element type.
    """
    __slots__ = ("node", "port", "shape", "dtype")

    def __init__(self, node, port, shape, dtype):
        self.node = node
        self.port = port
        self.shape = tuple(norm_dim(d) for d in shape)
        self.dtype = dtype

    @property
    def rank(self):
        return len(self.shape) - 1

    @property
    def program(self):
        return self.node.program

    @property
    def name(self):
        if len(self.node.outputs) == 1:
            return self.node.name
        return f"{self.node.name}.{self.node.output_names[self.port]}"

    def __repr__(self):
        return f"<Stream {self.name} {fmt_shape(self.shape)} of {self.dtype!r}>"


def as_stream(x, op, port):
    """``x`` as a :class:`Stream` (a single-output node stands for its output)."""
    if isinstance(x, Stream):
        return x
    if isinstance(x, Node):
        if len(x.outputs) != 1:
            raise StepTypeError(
                f"{op}: port '{port}' expects a stream, got node {x.name} with {len(x.outputs)} "
                f"outputs (pick one: {x.name}[i])", op=op, port=port)
        return x.outputs[0]
    raise StepTypeError(f"{op}: port '{port}' expects a stream, got {type(x).__name__} {x!r}",
                        op=op, port=port)


class Tensor:
    """An off-chip tensor of a program (2-D, row-major, static shape)."""

    def __init__(self, program, name, shape, dtype, role):
        if role not in ("input", "output", "inout"):
            raise ValueError(f"tensor {name!r}: role must be 'input', 'output' or 'inout', not {role!r}")
        if not isinstance(dtype, DType):
            raise StepTypeError(f"tensor {name!r}: dtype must be a DType, not {dtype!r}", op=name)
        shape = tuple(shape)
        if len(shape) != 2 or not all(isinstance(d, int) and d > 0 for d in shape):
            raise StepShapeError(f"tensor {name!r}: shape must be two positive ints, got {shape!r}",
                                 op=name)
        self.program = program
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.role = role

    @property
    def nbytes(self):
        return self.shape[0] * self.shape[1] * self.dtype.nbytes

    def __repr__(self):
        return f"Tensor({self.name!r}, {self.shape}, {self.dtype!r}, role={self.role!r})"


class Node:
    """Base class of every operator of the graph.

    Subclasses check their arguments in ``__init__``, call :meth:`_output` once per output and
    finish with :meth:`_register`. ``params`` holds the constructor's non-stream arguments, in
    order, for ``repr``, the DOT picture and the lowering.
    """
    output_names = ("out",)

    def __init__(self, program, inputs, *, name=None, input_names=None):
        ports = input_names or [f"in{i}" for i in range(len(inputs))]
        if program is None:
            bad = next((p for x, p in zip(inputs, ports) if not isinstance(x, (Stream, Node))),
                       ports[0] if ports else "in0")
            raise StepTypeError(f"{type(self).__name__}: port '{bad}' expects a stream, got "
                                f"{[type(x).__name__ for x in inputs]}", op=type(self).__name__,
                                port=bad)
        self.program = program
        self.name = name if name is not None else program._fresh_name(type(self).__name__)
        self.input_names = tuple(ports)
        self.inputs = tuple(as_stream(x, self.name, p) for x, p in zip(inputs, ports))
        for s, p in zip(self.inputs, ports):
            if s.program is not program:
                raise StepShapeError(f"{self.name}: port '{p}' is a stream of another program",
                                     op=self.name, port=p)
        self.outputs = ()
        self.params = {}

    @staticmethod
    def _program_of(*xs):
        for x in xs:
            if isinstance(x, (Stream, Node, Tensor)):
                return x.program
            if isinstance(x, (list, tuple)):
                p = Node._program_of(*x)
                if p is not None:
                    return p
        return None

    def _output(self, shape, dtype):
        if not isinstance(dtype, ElemType):
            raise TypeError(f"{self.name}: output element type must be an ElemType, not {dtype!r}")
        s = Stream(self, len(self.outputs), shape, dtype)
        self.outputs = self.outputs + (s,)
        return s

    def _register(self):
        self.program._add(self)

    # A single-output node stands for its output stream.
    @property
    def out(self):
        return as_stream(self, self.name, "out")

    @property
    def shape(self):
        return self.out.shape

    @property
    def dtype(self):
        return self.out.dtype

    @property
    def rank(self):
        return self.out.rank

    def __getitem__(self, i):
        return self.outputs[i]

    def __iter__(self):
        return iter(self.outputs)

    def __len__(self):
        return len(self.outputs)

    @property
    def op(self):
        return type(self).__name__

    def _err(self, cls, port, message):
        return cls(f"{self.name}: port '{port}' {message}", op=self.name, port=port)

    def _int_param(self, port, name, value, lo, hi=None, shape=None):
        """``value`` if it is an int in ``lo..hi``, else a StepShapeError naming it and the shape."""
        if (not isinstance(value, int) or isinstance(value, bool) or value < lo
                or (hi is not None and value > hi)):
            rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
            shape = self.inputs[0].shape if shape is None else shape
            raise self._err(StepShapeError, port, f"needs {name} in {rng}, got {value!r} "
                            f"(input shape {fmt_shape(shape)})")
        return value

    # -- symbolic metrics (spec section 5); operators override what applies to them ----------

    def offchip_read_bytes(self):
        """Bytes this node reads from off-chip memory (a SymPy expression or int)."""
        return 0

    def offchip_write_bytes(self):
        """Bytes this node writes to off-chip memory."""
        return 0

    def onchip_bytes(self):
        """On-chip memory this node needs, in the paper's model (section 5)."""
        return 0

    def flops(self):
        """Arithmetic operations this node performs."""
        return 0

    def __repr__(self):
        args = [s.name for s in self.inputs]
        args += [f"{k}={v!r}" for k, v in self.params.items()]
        return f"{self.op}({', '.join(args)})"


class Program:
    """A STeP program: the graph of operator nodes, its off-chip tensors and its symbols.

    Parameters
    ----------
    name : str
        Names the generated hardware and reports.
    """

    def __init__(self, name="program"):
        self.name = name
        self.symbols = SymbolTable()
        self.nodes = []
        self.tensors = {}
        self._names = set()
        self._counters = defaultdict(itertools.count)

    def __repr__(self):
        return f"Program({self.name!r})"

    # -- declarations ---------------------------------------------------------------------

    def symbol(self, name, *, bound=None, ragged=False):
        """Declare a dynamic (or ragged) size, optionally with an upper bound."""
        return self.symbols.symbol(name, ragged=ragged, bound=bound)

    def tensor(self, name, shape, dtype, *, role="input"):
        """Declare an off-chip tensor (``role`` is ``"input"``, ``"output"`` or ``"inout"``)."""
        if name in self.tensors:
            raise ValueError(f"tensor {name!r} is already declared")
        t = Tensor(self, name, shape, dtype, role)
        self.tensors[name] = t
        return t

    def input(self, name, shape, dtype):
        """A stream supplied by the host when the program runs (e.g. a routing selector)."""
        from .ops.io import Input  # a real cycle: ops.io imports Node from here
        return Input(self, name, shape, dtype).out

    def feedback(self, name, shape, dtype):
        """Declare a stream now that an operator built later produces (:meth:`bind`): the edge
        that closes a cycle (``compiler/ops/feedback.py``, ``docs/routing.md`` "Cycles")."""
        from .ops.feedback import Feedback  # a real cycle: ops.feedback imports Node from here
        return Feedback(self, name, shape, dtype).out

    def bind(self, feedback, stream):
        """Make the declared ``feedback`` stream carry ``stream``; returns the feedback stream."""
        from .ops.feedback import feedback_of  # a real cycle: ops.feedback imports Node from here
        node = feedback_of(feedback)
        if node is None or node.program is not self:
            raise StepTypeError(f"{self.name}.bind: the first argument must be a feedback stream "
                                f"of this program (Program.feedback), got {feedback!r}",
                                op="bind", port="in0")
        return node.bind(stream)

    def output(self, stream, name):
        """Make ``stream`` an output of the program, read back as nested lists."""
        from .ops.io import Output  # a real cycle: ops.io imports Node from here
        return Output(stream, name)

    # -- graph ----------------------------------------------------------------------------

    def _fresh_name(self, op):
        while True:
            name = f"{op}_{next(self._counters[op])}"
            if name not in self._names:
                return name

    def _add(self, node):
        if node.name in self._names:
            raise ValueError(f"a node named {node.name!r} already exists in {self.name}")
        self._names.add(node.name)
        self.nodes.append(node)

    def node(self, name):
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    @property
    def streams(self):
        return [s for n in self.nodes for s in n.outputs]

    def consumers(self):
        """Map from every stream to the ``(node, port_index)`` pairs that read it."""
        cons = {s: [] for s in self.streams}
        for n in self.nodes:
            for i, s in enumerate(n.inputs):
                cons[s].append((n, i))
        return cons

    @property
    def inputs(self):
        from .ops.io import Input  # a real cycle: ops.io imports Node from here
        return [n for n in self.nodes if isinstance(n, Input)]

    @property
    def outputs(self):
        from .ops.io import Output  # a real cycle: ops.io imports Node from here
        return [n for n in self.nodes if isinstance(n, Output)]

    def cardinality(self, stream):
        """Number of elements of ``stream``: the product of its dimensions, or, when a dimension is
        ragged, a symbol ``n_<stream>`` of its own (measured by the interpreter's trace)."""
        if any(self.symbols.is_ragged(d) for d in stream.shape):
            return self.symbols.count_symbol(stream.name, [self.symbols.bound(d) for d in stream.shape])
        n = sympy.Integer(1)
        for d in stream.shape:
            n = n * d
        return norm_dim(n)

    # -- rewriting ------------------------------------------------------------------------

    def replace_input(self, node, index, stream):
        """Make ``node`` read ``stream`` on input ``index`` (shape and type must not change)."""
        old = node.inputs[index]
        if len(old.shape) != len(stream.shape) or old.dtype != stream.dtype:
            raise StepShapeError(f"{node.name}: a rewrite may not change the stream on port "
                                 f"'{node.input_names[index]}' from {fmt_shape(old.shape)} of "
                                 f"{old.dtype!r} to {fmt_shape(stream.shape)} of {stream.dtype!r}",
                                 op=node.name)
        node.inputs = node.inputs[:index] + (stream,) + node.inputs[index + 1:]

    def move_after(self, node, anchor):
        """Move a just-built ``node`` to stand right after ``anchor`` in the node order."""
        self.nodes.remove(node)
        self.nodes.insert(self.nodes.index(anchor) + 1, node)

    def remove(self, node):
        cons = self.consumers()
        for s in node.outputs:
            if cons[s]:
                raise ValueError(f"cannot remove {node.name}: {s.name} is still read")
        self.nodes.remove(node)
        self._names.discard(node.name)
