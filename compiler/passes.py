"""Graph passes: small rewrites of a :class:`~stepforge.compiler.graph.Program`, one each.

Each pass takes a program, rewrites it in place and returns it, so passes chain:
``insert_broadcasts(p)``.
"""

from .ops.io import Discard
from .ops.routing import Broadcast

__all__ = ["insert_broadcasts", "tie_off"]


def insert_broadcasts(program):
    """Give every stream read by more than one port its own Broadcast (spec: inserted on fan-out).

    After this pass every stream has at most one consumer; the Broadcast's outputs feed the former
    consumers in their order. Running the pass twice changes nothing.
    """

    for stream, readers in list(program.consumers().items()):
        if len(readers) < 2:
            continue
        bc = Broadcast(stream, len(readers), name=program._fresh_name(f"Broadcast_{stream.name}".replace(".", "_")))
        program.move_after(bc, stream.node)
        for out, (node, index) in zip(bc.outputs, readers):
            program.replace_input(node, index, out)
    return program


def tie_off(program):
    """Give every stream that no port reads a :class:`~stepforge.compiler.ops.io.Discard`."""

    for stream, readers in list(program.consumers().items()):
        if not readers:
            d = Discard(stream, name=program._fresh_name(f"Discard_{stream.name}".replace(".", "_")))
            program.move_after(d, stream.node)
    return program
