"""Random whole-program differential testing (issue 12).

:func:`generate` draws a random, valid STeP program from a seed; :func:`check` runs it in the
reference interpreter and in Verilator (with and without random stalls) and compares the results
bit for bit; :func:`shrink` removes operators from a failing program while it keeps failing the
same way; :func:`campaign` does all of it for many seeds and writes a reproducer program file for
every failure. ``stepforge fuzz`` is the command (:mod:`stepforge.fuzz.command`).
"""

from .generator import Generator, GeneratorBug
from .motifs import MOTIFS as _COMPUTE, SOURCES
from .motifs_route import MOTIFS as _ROUTE, finish
from .program import FuzzProgram, Line

__all__ = ["generate", "Generator", "GeneratorBug", "FuzzProgram", "Line", "MOTIFS", "SOURCES"]

#: Every motif with its weight.
MOTIFS = _COMPUTE + _ROUTE


def generate(seed, *, min_ops=3, max_ops=12):
    """The random program of ``seed`` (the same program for the same seed).

    Raises
    ------
    GeneratorBug
        The language rejected a line the generator wrote.
    """
    return Generator(seed, min_ops=min_ops, max_ops=max_ops).run(SOURCES, MOTIFS, finish)
