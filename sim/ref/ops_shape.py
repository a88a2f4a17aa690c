"""Meaning of the shape operators and Zip on token sequences (spec section 4).

Each operator is a pure function from token lists to token lists, usable on its own by the
hardware unit tests, plus its registration with the interpreter.
"""

from ...compiler.errors import StepRuntimeError
from ...compiler.ops.io import Discard, Input, Output
from ...compiler.ops.shape import Expand, Flatten, Promote, RepeatStatic, Reshape, Zip
from ...contract.tokens import beat_index, from_nested, is_stop, stop, to_beats
from ...contract.values import pad_value, to_value
from .interpreter import semantics

__all__ = ["flatten", "reshape", "promote", "expand", "repeat_static", "zip_streams"]


def flatten(tokens, lo, hi):
    out = []
    for t in tokens:
        if is_stop(t):
            s = t.level
            if s <= lo:
                out.append(t)
            elif s <= hi:
                if lo:
                    out.append(stop(lo))
            else:
                out.append(stop(s - (hi - lo)))
        else:
            out.append(t)
    return out


def reshape(tokens, chunk, b, pad=None, *, op="Reshape"):
    """Returns ``(data_tokens, flag_tokens)``; flags are ``True`` on padded elements."""
    out, flags = [], []
    if b == 0:
        count = 0
        i = 0
        n = len(tokens)
        while i < n:
            t = tokens[i]
            if is_stop(t):
                s = t.level
                if count:  # a partial chunk: pad it, the last pad carries s + 1
                    if pad is None:
                        raise StepRuntimeError(f"{op}: a stop at beat {beat_index(tokens, i)} ends a "
                                               f"partial chunk of {count}/{chunk} and no pad is given",
                                               op=op, beat=beat_index(tokens, i))
                    for _ in range(chunk - count):
                        out.append(pad)
                        flags.append(True)
                    count = 0
                out.append(stop(s + 1))
                flags.append(stop(s + 1))
                i += 1
                continue
            out.append(t)
            flags.append(False)
            count += 1
            if count == chunk:
                count = 0
                nxt = tokens[i + 1] if i + 1 < n else None
                if nxt is not None and is_stop(nxt):
                    out.append(stop(nxt.level + 1))
                    flags.append(stop(nxt.level + 1))
                    i += 2
                    continue
                out.append(stop(1))
                flags.append(stop(1))
            i += 1
        if count:  # Done inside a partial chunk (rank-0 input)
            if pad is None:
                raise StepRuntimeError(f"{op}: the stream ends inside a partial chunk of "
                                       f"{count}/{chunk} and no pad is given", op=op,
                                       beat=beat_index(tokens, n - 1) if n else 0)
            for _ in range(chunk - count):
                out.append(pad)
                flags.append(True)
            out.append(stop(1))
            flags.append(stop(1))
        return out, flags
    count = 0
    for i, t in enumerate(tokens):
        if is_stop(t):
            s = t.level
            if s >= b:
                count += 1
                if count == chunk:
                    count = 0
                    t = stop(s + 1)
                elif s > b:
                    raise StepRuntimeError(f"{op}: stop S{s} at beat {beat_index(tokens, i)} closes "
                                           f"dimension {b} after {count} of {chunk} runs", op=op,
                                           beat=beat_index(tokens, i))
            out.append(t)
            flags.append(t)
        else:
            out.append(t)
            flags.append(False)
    return out, flags


def promote(tokens, b, rank):
    if b == rank + 1:
        if not tokens:
            return []
        if rank == 0:
            return list(tokens) + [stop(1)]
        out = list(tokens)
        out[-1] = stop(rank + 1)
        return out
    out = []
    for i, t in enumerate(tokens):
        if is_stop(t):
            out.append(stop(t.level + 1) if t.level >= b else t)
        else:
            out.append(t)
            if b == 0 and not (i + 1 < len(tokens) and is_stop(tokens[i + 1])):
                out.append(stop(1))
    return out


def expand(data, ref, b, *, op="Expand"):
    out = []
    di = 0
    nd = len(data)
    current = None  # the data element being repeated
    for ri, t in enumerate(ref):
        if is_stop(t):
            r = t.level
            if r < b:
                out.append(t)
                continue
            # the repetition ends (possibly after zero copies): the data's next stop must be S_r
            if current is not None or (di < nd and not is_stop(data[di])):
                di += 1
            if di >= nd or not is_stop(data[di]):
                got = "the end of the data" if di >= nd else "an element"
                raise StepRuntimeError(f"{op}: reference stop S{r} at beat {beat_index(ref, ri)} "
                                       f"ends a repetition, but the data shows {got}", op=op,
                                       beat=beat_index(ref, ri))
            if data[di].level != r:
                raise StepRuntimeError(f"{op}: reference stop S{r} at beat {beat_index(ref, ri)} "
                                       f"does not match the data's stop S{data[di].level} at beat "
                                       f"{beat_index(data, di)}", op=op, beat=beat_index(ref, ri))
            di += 1
            current = None
            out.append(t)
        else:
            if current is None:
                if di >= nd or is_stop(data[di]):
                    got = "the end of the data" if di >= nd else f"stop {data[di]!r}"
                    raise StepRuntimeError(f"{op}: reference element at beat {beat_index(ref, ri)} "
                                           f"needs a data element, but the data shows {got}", op=op,
                                           beat=beat_index(ref, ri))
                current = data[di]
            out.append(current)
    if current is not None or di != nd:
        raise StepRuntimeError(f"{op}: the reference ended but the data has "
                               f"{nd - di} more tokens", op=op)
    return out


def repeat_static(tokens, n):
    out = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if is_stop(t):
            out.append(stop(t.level + 1))
            i += 1
            continue
        out.extend([t] * n)
        if i + 1 < len(tokens) and is_stop(tokens[i + 1]):
            out.append(stop(tokens[i + 1].level + 1))
            i += 2
        else:
            out.append(stop(1))
            i += 1
    return out


def zip_streams(streams, *, op="Zip"):
    """Pair the elements of streams consumed in lock step.

    The streams must agree beat by beat on ``has_data``, ``stop`` and ``last`` (compared on their
    canonical beats, as the hardware compares them); the first beat where they differ is named.
    """
    first = to_beats(streams[0])
    for k, other in enumerate(streams[1:], 1):
        beats = to_beats(other)
        for i in range(max(len(first), len(beats))):
            a = first[i] if i < len(first) else None
            b = beats[i] if i < len(beats) else None
            if a is None or b is None:
                short = 0 if a is None else k
                raise StepRuntimeError(f"{op}: in{short} ended early: Done at beat {i - 1} while "
                                       f"in{k if short == 0 else 0} goes on", op=op, port=f"in{short}",
                                       beat=i - 1)
            if (a.has_data, a.stop, a.last) != (b.has_data, b.stop, b.last):
                raise StepRuntimeError(f"{op}: stop mismatch between in0 and in{k} at beat {i}: "
                                       f"{_beat(a)} vs {_beat(b)}", op=op, beat=i)
    out = []
    for toks in zip(*streams):
        out.append(toks[0] if is_stop(toks[0]) else tuple(toks))
    return out


def _beat(b):
    parts = ["element" if b.has_data else "no element", f"stop {b.stop}"]
    if b.last:
        parts.append("last")
    return "(" + ", ".join(parts) + ")"


def _tok(t):
    return repr(t) if is_stop(t) else "an element"


# -- registration ------------------------------------------------------------------------------

@semantics(Input)
def _input(node, ins, ctx):
    s = node.outputs[0]
    if node.name not in ctx.inputs:
        raise StepRuntimeError(f"{node.name}: no stream given (inputs={{{node.name!r}: ...}})", op=node.name)
    try:
        toks = from_nested(ctx.inputs[node.name], s.rank)
    except ValueError as e:
        raise StepRuntimeError(f"{node.name}: input is not a rank-{s.rank} stream: {e}", op=node.name) from None
    return [[t if is_stop(t) else to_value(t, s.dtype, node.name) for t in toks]]


@semantics(Output, Discard)
def _output(node, ins, ctx):
    return []


@semantics(Flatten)
def _flatten(node, ins, ctx):
    return [flatten(ins[0], node.lo, node.hi)]


@semantics(Reshape)
def _reshape(node, ins, ctx):
    pad = None if node.pad is None else pad_value(node.inputs[0].dtype, node.pad)
    data, flags = reshape(ins[0], node.chunk, node.b, pad, op=node.name)
    return [data, flags] if node.flags else [data]


@semantics(Promote)
def _promote(node, ins, ctx):
    return [promote(ins[0], node.b, node.inputs[0].rank)]


@semantics(Expand)
def _expand(node, ins, ctx):
    return [expand(ins[0], ins[1], node.b, op=node.name)]


@semantics(RepeatStatic)
def _repeat(node, ins, ctx):
    return [repeat_static(ins[0], node.n)]


@semantics(Zip)
def _zip(node, ins, ctx):
    return [zip_streams(ins, op=node.name)]
