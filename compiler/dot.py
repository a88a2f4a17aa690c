"""A Graphviz (DOT) picture of a program: one box per node, one edge per stream.

Each edge is labelled with its stream's shape and element type; off-chip tensors are drawn as
cylinders joined to the nodes that read or write them.
"""

from .dims import fmt_shape

__all__ = ["to_dot"]


def _q(s):
    """A DOT string literal (quotes and backslashes escaped, newlines as \\n)."""
    s = str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + s + '"'


def to_dot(program):
    """Return the DOT text of ``program``."""
    lines = [f"digraph {_q(program.name)} {{", "  rankdir=TB;",
             '  node [shape=box, fontname="monospace", fontsize=10];',
             '  edge [fontname="monospace", fontsize=9];']
    for t in program.tensors.values():
        lines.append(f"  {_q('tensor:' + t.name)} [shape=cylinder, label={_q(f'{t.name} {list(t.shape)} {t.dtype!r}')}];")
    for node in program.nodes:
        params = ", ".join(f"{k}={v!r}" for k, v in node.params.items())
        label = f"{node.name}\n{node.op}({params})" if params else f"{node.name}\n{node.op}"
        lines.append(f"  {_q(node.name)} [label={_q(label)}];")
        tensor = getattr(node, "tensor", None)
        if tensor is not None:
            if node.outputs:
                lines.append(f"  {_q('tensor:' + tensor.name)} -> {_q(node.name)} [style=dashed];")
            else:
                lines.append(f"  {_q(node.name)} -> {_q('tensor:' + tensor.name)} [style=dashed];")
    for node in program.nodes:
        for port, s in zip(node.input_names, node.inputs):
            label = f"{fmt_shape(s.shape)} {s.dtype!r}"
            if len(s.node.outputs) > 1:
                label = f"{s.node.output_names[s.port]}: {label}"
            lines.append(f"  {_q(s.node.name)} -> {_q(node.name)} [label={_q(label)}, headlabel={_q(port)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
