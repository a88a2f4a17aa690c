"""GEMV keeps the vector on chip: x is read from off-chip memory once (Bufferize) and replayed once
per output column tile (Streamify, repeat), instead of re-read n times by a stride-0 walk."""

import numpy as np
import pytest

from stepforge.compiler.metrics import metrics
from stepforge.compiler.ops.memory import Bufferize, Streamify
from stepforge.compiler.ops.offchip import LinearOffChipLoad
from stepforge.loader import ProgramError, load
from stepforge.sim.ref.interpreter import run

from .helpers import EXAMPLES

GEMV = load(EXAMPLES / "gemv.py")


def _run(**params):
    program = GEMV.build(**params)
    tensors = GEMV.data(program, seed=2)["tensors"]
    return program, tensors, run(program, tensors=tensors)


def _reads(program, result, tensor):
    """Bytes the loads of ``tensor`` read, measured by the interpreter."""
    return sum(result.offchip_read.get(node.name, 0) for node in program.nodes
               if isinstance(node, LinearOffChipLoad) and node.tensor.name == tensor)


@pytest.mark.parametrize("K,N,t", [(256, 256, 4), (64, 32, 16), (16, 8, 4)])
def test_x_is_read_once_on_chip_and_n_times_off_chip(K, N, t):
    n = N // t
    on, tensors, r_on = _run(K=K, N=N, t=t)
    off, _, r_off = _run(K=K, N=N, t=t, x_reuse="offchip")
    assert (_reads(on, r_on, "X"), _reads(on, r_on, "W")) == (K, K * N)
    assert (_reads(off, r_off, "X"), _reads(off, r_off, "W")) == (n * K, K * N)
    assert metrics(on).offchip_read == K * N + K
    assert metrics(off).offchip_read == K * N + n * K
    assert metrics(on).offchip_write == metrics(off).offchip_write == 4 * N
    want = tensors["X"].astype(np.int32) @ tensors["W"].astype(np.int32)
    for result in (r_on, r_off):
        assert result.tensors["Y"].dtype == np.int32
        assert np.array_equal(result.tensors["Y"], want)


def test_the_on_chip_form_buffers_one_vector_and_replays_it_per_column_tile():
    program = GEMV.build(K=64, N=32, t=4)
    (buf,) = [node for node in program.nodes if isinstance(node, Bufferize)]
    (rep,) = [node for node in program.nodes if isinstance(node, Streamify)]
    assert buf.b == 1 and tuple(buf.outputs[0].shape) == (1,)
    assert tuple(buf.buffer.shape) == (16,)
    assert rep.repeat == 8 and tuple(rep.outputs[0].shape) == (1, 8, 16)
    assert not any(isinstance(node, (Bufferize, Streamify))
                   for node in GEMV.build(K=64, N=32, t=4, x_reuse="offchip").nodes)


def test_unknown_x_reuse_is_refused():
    # the loader reports a program's own error with the program's frame (ProgramError)
    with pytest.raises(ProgramError, match=r"gemv.py: program\(\) raised ValueError: x_reuse must "
                                           r"be 'onchip' or 'offchip', not 'dram'"):
        GEMV.build(x_reuse="dram")
