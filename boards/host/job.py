"""A program's job for a board: what to load into memory, what to read back, how to decode it.

The same job as :func:`~stepforge.sim.rtl.run.run_rtl` hands its cocotb testbench
(:func:`~stepforge.sim.rtl.run.job_regions`: tensors and host input streams preloaded at their
placements, output tensors and streams read back; :func:`~stepforge.sim.rtl.run.decode_readback`),
so a board run and a Verilator run load and decode bytes identically. Over a serial line the
many short regions of a tensor's rows at their pitch are merged first (:func:`coalesce`).
"""

from ...sim.rtl.run import decode_readback, job_regions

__all__ = ["Job", "make_job", "coalesce", "decode", "MAX_GAP"]

#: Preload regions at most this many words apart are loaded as one (:func:`coalesce`).
MAX_GAP = 64


class Job:
    """``preload``: ``[[word address, [words]], ...]``; ``readback``: ``{key: [address,
    words]}`` with keys ``"tensor:NAME"`` and ``"stream:NAME"``."""

    def __init__(self, preload, readback):
        self.preload, self.readback = preload, readback

    @property
    def load_words(self):
        return sum(len(words) for _, words in self.preload)

    @property
    def read_words(self):
        return sum(n for _, n in self.readback.values())


def make_job(program, hw, tensors, inputs):
    """The :class:`Job` of ``program`` (lowered to ``hw``) on ``tensors`` and host ``inputs``."""
    preload, readback = job_regions(program, hw, tensors, inputs)
    return Job(coalesce(preload), readback)


def coalesce(preload, max_gap=MAX_GAP):
    """``preload`` with regions at most ``max_gap`` words apart merged, the gap written with
    zeros: fewer, fuller frames (a tensor's rows at their pitch are many short regions), and the
    gaps hold what the simulation's zero-initialized memory holds there."""
    out = []
    for base, words in sorted(preload, key=lambda r: r[0]):
        if out and base - (out[-1][0] + len(out[-1][1])) in range(max_gap + 1):
            out[-1][1] += [0] * (base - out[-1][0] - len(out[-1][1])) + list(words)
        else:
            out.append([base, list(words)])
    return out


def decode(program, hw, words, csrs):
    """``(tensors, streams)`` from the read-back ``words`` (``{key: [word, ...]}``) and the
    CSRs, as :func:`~stepforge.sim.rtl.run.run_rtl` decodes them."""
    return decode_readback(program, hw, words, csrs)
