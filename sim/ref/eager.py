"""Checking an EagerMerge whose chunk order is not known in advance.

EagerMerge forwards chunks in the order they arrive, which depends on timing: hardware and the
reference interpreter may legitimately disagree on it. What must agree is, for every input, the
subsequence of chunks that the selector attributes to it: that subsequence must be the input,
token for token and bit for bit (spec section 4). :func:`check_eager_merge` recovers the
subsequences through the selector and compares them.

Compare token sequences (``stepforge.contract.tokens.from_beats`` decodes a beat capture), never raw
beats: ``Done`` may arrive fused or as a bare beat.
"""

from ...compiler.errors import StepRuntimeError
from ...contract.tokens import beat_index, format_tokens, is_stop
from ...contract.values import values_equal
from .ops_routing import chunk_tokens, iter_chunks

__all__ = ["check_eager_merge"]


def _tokens_equal(a, b):
    if is_stop(a) or is_stop(b):
        return is_stop(a) and is_stop(b) and a.level == b.level
    return values_equal(a, b)


def _chunks(tokens, b, what, op):
    try:
        return list(iter_chunks(tokens, b, rank=b, op=op, port=what))
    except StepRuntimeError as e:
        raise AssertionError(f"{op} check: {what} is not a rank-{b} stream: {e}") from None


def check_eager_merge(inputs, data, select, b, *, op="EagerMerge"):
    """Check that an EagerMerge output is an interleaving of whole chunks of its inputs.

    Parameters
    ----------
    inputs : list of list
        Token lists of the ``n`` rank-``b`` inputs.
    data : list
        Token list of the merged data (rank ``b``).
    select : list
        Token list of the merged selector (rank 0, one ``int`` one-hot mask per chunk).
    b : int
        Chunk rank.
    op : str
        Name used in messages.

    Returns
    -------
    list of list
        The chunks recovered for each input (token lists), which equal ``inputs`` chunk by chunk.

    Raises
    ------
    AssertionError
        The selector is not one-hot or has stops; the selector and the data disagree on the
        number of chunks; or the chunks attributed to an input differ from it (the message names
        the input, its chunk, the merged position and the data beat).
    """
    n = len(inputs)
    expected = [[chunk_tokens(c, b) for c in _chunks(t, b, f"in{j}", op)]
                for j, t in enumerate(inputs)]
    merged_chunks = _chunks(data, b, "data", op)
    recovered = [[] for _ in range(n)]
    where = [[] for _ in range(n)]  # (merged position, data beat of the chunk's first token)
    for m, t in enumerate(select):
        if is_stop(t):
            raise AssertionError(f"{op} check: the selector is a rank-0 stream, but token {m} is "
                                 f"{t!r}")
        if not isinstance(t, int) or isinstance(t, bool) or t <= 0 or t & (t - 1) or t >> n:
            raise AssertionError(f"{op} check: selector element {m} is {t!r}, not a one-hot mask "
                                 f"over {n} inputs")
        if m >= len(merged_chunks):
            raise AssertionError(f"{op} check: the selector has {len(select)} elements but the "
                                 f"data only {len(merged_chunks)} chunks")
        j = t.bit_length() - 1
        c = merged_chunks[m]
        recovered[j].append(chunk_tokens(c, b))
        where[j].append((m, beat_index(data, c.first)))
    if len(merged_chunks) != len(select):
        raise AssertionError(f"{op} check: the data has {len(merged_chunks)} chunks but the "
                             f"selector {len(select)} elements")
    for j in range(n):
        got, want = recovered[j], expected[j]
        for q, (g, w) in enumerate(zip(got, want)):
            if len(g) != len(w) or not all(_tokens_equal(x, y) for x, y in zip(g, w)):
                m, db = where[j][q]
                raise AssertionError(f"{op} check: chunk {q} of in{j} (merged chunk {m}, data beat "
                                     f"{db}) differs: expected {format_tokens(w)}, got "
                                     f"{format_tokens(g)}")
        if len(got) != len(want):
            raise AssertionError(f"{op} check: the selector attributes {len(got)} chunks to in{j}, "
                                 f"which has {len(want)}")
    return recovered
