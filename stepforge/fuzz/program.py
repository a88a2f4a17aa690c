"""A generated program as text: the lines that build it, its host-data hints, its source file.

A :class:`FuzzProgram` is a list of :class:`Line` s, each one Python statement over the names
of ``from stepforge import *`` and the variables that earlier lines bind (``p`` is the
:class:`~stepforge.compiler.graph.Program`). Every stream that no line reads becomes a program
output (``p.output(s, "o_s")``), so removing lines (shrinking) leaves a complete program. The same
text is what :meth:`FuzzProgram.build` executes and what :meth:`FuzzProgram.source` writes as a
reproducer: a program file that ``stepforge run`` accepts.
"""

import re
from dataclasses import dataclass, field, replace

__all__ = ["Line", "FuzzProgram"]

#: Kinds of the variables a line binds (a ``drained`` stream is read by nobody on purpose, e.g.
#: EagerMerge's arrival order: it is no program output; the lowering drains it).
KINDS = ("stream", "buffer", "tensor", "symbol", "drained")


@dataclass(frozen=True)
class Line:
    """One statement of a generated program.

    Attributes
    ----------
    text : str
        The statement.
    defines : tuple of (str, str)
        ``(variable, kind)`` for every variable it binds (kind in :data:`KINDS`).
    uses : tuple of str
        The variables it reads.
    group : int
        The generator step that wrote it (lines of one step are removed together first).
    """
    text: str
    defines: tuple = ()
    uses: tuple = ()
    group: int = 0


@dataclass
class FuzzProgram:
    """A generated program: its lines, host-data hints and where it came from.

    Attributes
    ----------
    name : str
    seed : int
        The generator seed that produced it.
    lines : list of Line
    hints : dict of str to dict
        Per host input, what :func:`~stepforge.fuzz.data.random_data` must respect.
    meta : dict
        Free-form notes written into a reproducer (outcome, data seed, stall).
    """
    name: str
    seed: int
    lines: list
    hints: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    def used(self):
        return {u for line in self.lines for u in line.uses}

    def sinks(self):
        """The streams no line reads, in definition order: the program's outputs."""
        used = self.used()
        return [v for line in self.lines for v, kind in line.defines
                if kind == "stream" and v not in used]

    def live_lines(self):
        """The lines without the declarations nothing uses (tensors, symbols)."""
        used = self.used()
        return [line for line in self.lines
                if not line.defines or any(k in ("stream", "buffer", "drained") or v in used
                                           for v, k in line.defines)]

    @property
    def operators(self):
        """How many operator calls (not declarations, inputs or outputs) the program makes."""
        return sum(1 for line in self.lines if _OPERATOR.search(line.text))

    def body(self):
        """The statements of ``program()``, outputs included."""
        out = [f"p = Program({self.name!r})"]
        out += [line.text for line in self.live_lines()]
        out += [f"p.output({v}, {'o_' + v!r})" for v in self.sinks()]
        out.append("return p")
        return out

    def source(self, doc=None):
        """The program file: ``program()``, ``data(program, seed)`` and a ``FUZZ`` record."""
        hints = {k: v for k, v in self.hints.items() if re.search(rf"\b{k}\b", "\n".join(
            line.text for line in self.live_lines()))}
        lines = [f'"""{doc or f"A random STeP program (stepforge fuzz, seed {self.seed})."}"""',
                 "",
                 "from stepforge import *  # noqa: F401,F403",
                 "from stepforge.fuzz.data import random_data",
                 "",
                 f"FUZZ = {dict(self.meta, seed=self.seed)!r}",
                 f"HINTS = {hints!r}",
                 "",
                 "",
                 "def program():"]
        lines += ["    " + s for s in self.body()]
        lines += ["", "", "def data(program, seed=FUZZ.get('data_seed', 0)):",
                  "    return random_data(program, seed, HINTS)", ""]
        return "\n".join(lines)

    def namespace(self):
        """The module namespace of :meth:`source`, executed."""
        ns = {"__name__": f"stepforge_fuzz_{self.name}"}
        exec(compile(self.source(), f"<fuzz program {self.name}>", "exec"), ns)
        return ns

    def build(self):
        """A fresh :class:`~stepforge.compiler.graph.Program` from the text."""
        return self.namespace()["program"]()

    def without(self, drop):
        """A copy without the lines at the indices ``drop`` and every line that reads what they
        bind (transitively)."""
        gone = set()
        keep = []
        for i, line in enumerate(self.lines):
            if i in drop or gone & set(line.uses):
                gone |= {v for v, _ in line.defines}
                continue
            keep.append(line)
        return replace(self, lines=keep)

    def substituted(self, index, old, new):
        """A copy in which line ``index`` is gone and later lines read ``new`` for ``old``."""
        pattern = re.compile(rf"\b{re.escape(old)}\b")
        lines = []
        for i, line in enumerate(self.lines):
            if i == index:
                continue
            if i > index and old in line.uses:
                line = replace(line, text=pattern.sub(new, line.text),
                               uses=tuple(new if u == old else u for u in line.uses))
            lines.append(line)
        return replace(self, lines=lines)


_OPERATOR = re.compile(r"^(?:[\w, ]+=\s*)?(?!p\.)([A-Z]\w*)\(")
