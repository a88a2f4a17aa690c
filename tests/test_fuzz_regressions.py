"""Every reproducer the random program generator saved (``tests/regressions/fuzz_*.py``) passes.

A reproducer is the shrunk program file ``stepforge fuzz`` wrote for a failure; its ``FUZZ``
record holds the data seed that failed. Once its bug is fixed it is copied here, and this test
runs it with that data, with and without stalls, in the interpreter and Verilator, and expects a
pass.
"""

from pathlib import Path

import pytest

from stepforge import EagerMerge, LinearOffChipLoad, Map, Partition, Program, Select, int16
from stepforge.compiler.lower import lower
from stepforge.fuzz.campaign import load_reproducer
from stepforge.fuzz.check import check

FILES = sorted((Path(__file__).resolve().parent / "regressions").glob("fuzz_*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_reproducer_passes(path):
    fp, record, _ = load_reproducer(path)
    for stall in (False, True):          # one build for both
        out = check(fp, data_seed=record.get("data_seed", 0), stall=stall,
                    rtl=record.get("rtl", True))
        assert out.kind == "pass", f"{path.name} (stall {stall}): {out.kind}: {out.detail}"


def _multi_hot_into_eager_merge(sizing):
    """A multi-hot Partition whose outputs meet again at an EagerMerge (fuzz seed 10056)."""
    p = Program("merge_after_partition")
    X = p.tensor("X", (4, 4), int16)
    x = LinearOffChipLoad(X, (1, 2), out_shape=(4, 2), stride=(2, 1))     # [1, 4, 2]: 8 tiles
    sel = p.input("sel", [1], Select(2))
    a, b = Partition(x, sel, 2, 2)
    data, which = EagerMerge([a, Map(lambda t: t + 1, b)], 2)
    p.output(data, "data")
    p.output(which, "which")
    return lower(p, fifo_sizing=sizing)


@pytest.mark.parametrize("sizing", ["lp", "rule"])
def test_a_chunk_wise_join_gets_room_for_the_other_branchs_whole_chunk(sizing):
    hw = _multi_hot_into_eager_merge(sizing)
    depth = {e.name: e.depth for e in hw.edges}
    # while the EagerMerge forwards one input's 8-beat chunk, the Partition pushes the same chunk
    # into the other branch: each branch holds it (before: 2 + 1 + 2 beats, a deadlock)
    assert depth["Partition_0.out0"] >= 8
    assert depth["Partition_0.out1"] + depth["Map_0"] >= 8
    assert hw.deadlocks == []
