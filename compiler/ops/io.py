"""Program inputs and outputs that are streams (not off-chip tensors)."""

from ..graph import Node
from ..types import ElemType
from ..dims import fmt_shape

__all__ = ["Input", "Output", "Discard"]


class Input(Node):
    """A stream the host supplies when the program runs, given as nested lists.

    In hardware it is read from off-chip memory as packed beats, so it counts as off-chip traffic.
    """
    output_names = ("out",)

    def __init__(self, program, name, shape, dtype):
        super().__init__(program, [], name=name)
        if not isinstance(dtype, ElemType):
            raise self._err(TypeError, "out", f"needs an element type, got {dtype!r}")
        if len(shape) < 1:
            raise self._err(ValueError, "out", f"needs a shape of at least one dimension, got {fmt_shape(shape)}")
        self.params = {"shape": list(shape), "dtype": dtype}
        self._output(shape, dtype)
        self._register()

    def __repr__(self):
        return f"Input({self.name!r}, {fmt_shape(self.outputs[0].shape)}, {self.outputs[0].dtype!r})"


class Output(Node):
    """Makes a stream an output of the program (read back as nested lists)."""
    output_names = ()

    def __init__(self, stream, name):
        super().__init__(Node._program_of(stream), [stream], name=name)
        self._register()

    def __repr__(self):
        return f"Output({self.inputs[0].name}, {self.name!r})"


class Discard(Node):
    """Drains a stream nobody reads (inserted by :func:`~stepforge.compiler.passes.tie_off`).

    STeP operators may have outputs a program does not use (store acknowledgements, a
    Partition's unused outputs, EagerMerge data when only its selector is used); in hardware an
    unread output would stall its producer forever, so every one is drained explicitly.
    """
    output_names = ()

    def __init__(self, stream, *, name=None):
        super().__init__(Node._program_of(stream), [stream], name=name)
        self._register()
