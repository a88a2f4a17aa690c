"""A random STeP program (stepforge fuzz, seed 10056) that failed: deadlock.

Run: stepforge run tests/regressions/fuzz_10056_deadlock.py [--stall]

What happened:

    deadlock: no beat moved for the watchdog's limit
    A multi-hot Partition sends one 16-beat chunk to two outputs that meet again at an
    EagerMerge; the merge forwards one chunk whole while the other waits in a FIFO of depth 2:
    the Partition, the merge and the waiting branch wait on each other. Shrunk from 12
    operators. Fixed in the FIFO sizing (compiler/fifo_sizing.py, chunk_beats).
"""

from stepforge import *  # noqa: F401,F403
from stepforge.fuzz.data import random_data

FUZZ = {'outcome': 'deadlock', 'signature': 'deadlock', 'data_seed': 1, 'stall': False, 'seed': 10056}
HINTS = {'sel0': {'nonempty': True}}


def program():
    p = Program('fuzz_10056')
    T0 = p.tensor('T0', (4, 4), int32)
    s0 = LinearOffChipLoad(T0, (1, 2), out_shape=(4, 2, 2), stride=(0, 0, 1), offset=5)
    sel0 = p.input('sel0', [1], Select(3))
    s6, s7, s8 = Partition(s0, sel0, 3, 3)
    s10, s11 = EagerMerge([s6, s7, s8], 3)
    p.output(s10, 'o_s10')
    return p


def data(program, seed=FUZZ.get('data_seed', 0)):
    return random_data(program, seed, HINTS)
