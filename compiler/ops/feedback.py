"""The feedback edge: a stream declared before the operator that produces it (a cycle).

STeP programs are built in Python by calling operators on streams that already exist, so a
graph built that way has no cycle. The paper's dynamic parallelization (decode attention, P2
Fig. 16) needs one: the regions' completion signals, merged by an EagerMerge, become the selector
of the Partition that dispatches requests to those regions. A :class:`Feedback` node makes that
possible: ``p.feedback(name, shape, dtype)`` declares the stream with its shape and element type,
operators read it like any stream, and ``p.bind(fb, stream)`` later names the operator output it
carries. The node is a wire: in hardware a pass-through unit between two FIFOs.

Decisions (``docs/routing.md``, "Cycles"; the spec is silent on cycles):

* The declared shape is a contract. At :meth:`Feedback.bind` the bound stream must have the
  declared rank and element type, and every dimension must agree where both are static (or are
  the same expression); a static declared size against a symbolic bound size (the EagerMerge's
  fresh sum ``M``) is accepted and checked at run time by the interpreter.
* A program with an unbound feedback is refused wherever it is used (interpreter, metrics,
  lowering) with :class:`~stepforge.compiler.errors.StepShapeError` naming the feedback.
"""

from ..dims import dim_eq, fmt_shape
from ..errors import StepShapeError, StepTypeError
from ..graph import Node, Stream, as_stream
from ..types import ElemType

__all__ = ["Feedback", "check_bound", "feedbacks", "feedback_of"]


class Feedback(Node):
    """A stream declared now and produced later by ``bind``: the edge that closes a cycle.

    Parameters
    ----------
    program : Program
    name : str
        The node's (and the stream's) name.
    shape : sequence
        The declared shape (``ints`` or symbols), outermost first.
    dtype : ElemType
        The declared element type.

    Ports
    -----
    in0
        The bound stream (absent until :meth:`bind`).
    out
        The declared stream, read by the operators inside the cycle.
    """
    output_names = ("out",)

    def __init__(self, program, name, shape, dtype):
        super().__init__(program, [], name=name)
        if not isinstance(dtype, ElemType):
            raise self._err(StepTypeError, "out", f"needs an element type, got {dtype!r}")
        if len(shape) < 1:
            raise self._err(StepShapeError, "out", f"needs a shape of at least one dimension, "
                            f"got {fmt_shape(shape)}")
        self.params = {"shape": list(shape), "dtype": dtype}
        self._output(shape, dtype)
        self._register()

    @property
    def bound(self):
        """Whether :meth:`bind` has named the stream this feedback carries."""
        return bool(self.inputs)

    def bind(self, stream):
        """Make this feedback carry ``stream`` (an output of an operator built after it).

        Raises
        ------
        StepShapeError
            Already bound; a stream of another program; another rank; a dimension that differs
            where both sizes are static (or both are the same kind of expression and differ).
        StepTypeError
            Another element type; not a stream.
        """
        s = as_stream(stream, self.name, "in0")
        out = self.outputs[0]
        if self.bound:
            raise self._err(StepShapeError, "in0", f"is already bound to {self.inputs[0].name}; "
                            f"cannot bind it again to {s.name}")
        if s.program is not self.program:
            raise self._err(StepShapeError, "in0", f"cannot be bound to {s.name}, a stream of "
                            f"another program")
        if s.dtype != out.dtype:
            raise self._err(StepTypeError, "in0", f"is declared as {fmt_shape(out.shape)} of "
                            f"{out.dtype!r}, but {s.name} carries {s.dtype!r} "
                            f"{fmt_shape(s.shape)}")
        if len(s.shape) != len(out.shape):
            raise self._err(StepShapeError, "in0", f"is declared with rank {out.rank} "
                            f"{fmt_shape(out.shape)}, but {s.name} has rank {s.rank} "
                            f"{fmt_shape(s.shape)}")
        for k, (want, got) in enumerate(zip(out.shape, s.shape)):
            if isinstance(want, int) and isinstance(got, int) and want != got:
                raise self._err(StepShapeError, "in0", f"is declared as {fmt_shape(out.shape)}, "
                                f"but {s.name} is {fmt_shape(s.shape)} (dimension {k}: "
                                f"{want} vs {got})")
            if not isinstance(want, int) and not isinstance(got, int) and not dim_eq(want, got):
                bw = self.program.symbols.bound(want)
                bg = self.program.symbols.bound(got)
                if bw is not None and bg is not None and bg > bw:
                    raise self._err(StepShapeError, "in0", f"is declared as "
                                    f"{fmt_shape(out.shape)}, but {s.name} is "
                                    f"{fmt_shape(s.shape)}: dimension {k} ({got}) is bounded "
                                    f"by {bg}, over the declared {want}'s bound {bw}")
        self.inputs = (s,)
        self.input_names = ("in0",)
        return out

    def __repr__(self):
        src = self.inputs[0].name if self.bound else "unbound"
        return f"Feedback({self.name!r}, {fmt_shape(self.outputs[0].shape)}, " \
               f"{self.outputs[0].dtype!r}, from {src})"


def feedbacks(program):
    """The program's :class:`Feedback` nodes, in creation order."""
    return [n for n in program.nodes if isinstance(n, Feedback)]


def check_bound(program):
    """Raise :class:`StepShapeError` naming the first feedback that was never bound."""
    for n in feedbacks(program):
        if not n.bound:
            out = n.outputs[0]
            readers = [m.name for m in program.nodes if out in m.inputs]
            raise StepShapeError(
                f"{n.name}: feedback {fmt_shape(out.shape)} of {out.dtype!r} is never bound "
                f"(read by {', '.join(readers) or 'nothing'}): close the cycle with "
                f"Program.bind({n.name}, stream)", op=n.name, port="in0")


def feedback_of(x):
    """The :class:`Feedback` node ``x`` stands for (the node or its output stream), or None."""
    if isinstance(x, Stream):
        x = x.node
    return x if isinstance(x, Feedback) else None
