"""Errors of the STeP language and its execution.

Every error names the operator it comes from; shape and type errors also name the port and the
shapes involved, run-time errors the beat index. The messages are part of the contract: tests
assert on them.
"""

__all__ = ["StepError", "StepShapeError", "StepTypeError", "StepRuntimeError", "LoweringError"]


class StepError(Exception):
    """Base class of every error raised by stepforge about a STeP program."""

    def __init__(self, message, *, op=None, port=None):
        self.op = op
        self.port = port
        super().__init__(message)


class StepShapeError(StepError, ValueError):
    """A stream's shape or rank does not fit an operator (raised while the graph is built)."""


class StepTypeError(StepError, TypeError):
    """A stream's element type does not fit an operator (raised while the graph is built)."""


class StepRuntimeError(StepError, RuntimeError):
    """A program violated its contract while running (stop mismatch, bound exceeded, early end).

    Attributes
    ----------
    op : str
        Name of the operator instance that detected the fault.
    beat : int or None
        Index of the offending beat on the operator's input (counted from 0).
    """

    def __init__(self, message, *, op=None, port=None, beat=None):
        self.beat = beat
        super().__init__(message, op=op, port=port)


class LoweringError(StepError):
    """The program uses something the hardware cannot build yet (names the node and the reason)."""
