# amaranth: UnusedElaboratable=no
"""The constructor checks of the router and shape units: one wording, "X must be Y, not Z".

Every unit checks its parameters with the helpers of :mod:`stepforge.hdl.unit` (``check``,
``check_int``, ``check_ints``, ``check_choice``), so a refused parameter is named with its unit
and its value the same way everywhere (the PMU's own checks are in ``test_hdl_pmu.py``).
"""

import pytest

from stepforge.compiler.types import Bool, Index, Tile, int8
from stepforge.hdl.addrgen import AddrGenUnit
from stepforge.hdl.broadcast import BroadcastUnit
from stepforge.hdl.eager_merge import EagerMergeUnit
from stepforge.hdl.expand import ExpandUnit
from stepforge.hdl.filter import FilterUnit
from stepforge.hdl.flatten import FlattenUnit
from stepforge.hdl.parallelize import ParallelizeUnit
from stepforge.hdl.partition import PartitionUnit
from stepforge.hdl.promote import PromoteUnit
from stepforge.hdl.reassemble import ReassembleUnit
from stepforge.hdl.repeat import RepeatStaticUnit
from stepforge.hdl.reshape import ReshapeUnit
from stepforge.hdl.retile import RetileStreamifyUnit
from stepforge.hdl.zip import ZipUnit

T = Tile(int8, 1, 2)

REFUSED = [
    (lambda: PartitionUnit(T, 2, 3, 3), "PartitionUnit b must be an int in 0..2, not 3"),
    (lambda: PartitionUnit(T, 1, 0, 0), "PartitionUnit n must be an int >= 1, not 0"),
    (lambda: ParallelizeUnit(T, -1, 2, 0), "ParallelizeUnit rank must be an int >= 0, not -1"),
    (lambda: ReassembleUnit(T, 2, 1, 1, count=3),
     "ReassembleUnit count must be an int in 1..2, not 3"),
    (lambda: EagerMergeUnit(T, 2, 1.0), "EagerMergeUnit b must be an int >= 0, not 1.0"),
    (lambda: BroadcastUnit(T, 1, 2, depth=0), "BroadcastUnit depth must be an int >= 1, not 0"),
    (lambda: FlattenUnit(T, 2, 1, 1), "FlattenUnit lo must be an int in 0..0, not 1"),
    (lambda: FlattenUnit(T, 2, 0, 3), "FlattenUnit hi must be an int in 1..2, not 3"),
    (lambda: ReshapeUnit(T, 1, 0), "ReshapeUnit chunk must be an int >= 1, not 0"),
    (lambda: ReshapeUnit(T, 1, 2, pad=1000),
     "ReshapeUnit pad must be a value of Tile(int8, 1, 2) (Python integer 1000 out of bounds "
     "for int8), not 1000"),
    (lambda: PromoteUnit(T, 1, 3), "PromoteUnit b must be an int in 0..2, not 3"),
    (lambda: RepeatStaticUnit(T, 1, True), "RepeatStaticUnit n must be an int >= 1, not True"),
    (lambda: ExpandUnit(T, Index(), 2, 3), "ExpandUnit b must be an int in 1..2, not 3"),
    (lambda: ZipUnit([Index()], 1),
     "ZipUnit elem_types must be two or more element types, not (Index(),)"),
    (lambda: FilterUnit(T, "1"), "FilterUnit rank must be an int >= 0, not '1'"),
    (lambda: RetileStreamifyUnit(Bool(), 1), "RetileStreamifyUnit elem_type must be a Tile, not Bool()"),
    (lambda: RetileStreamifyUnit(T, 1, "diagonal"),
     "RetileStreamifyUnit split must be 'row' or 'col', not 'diagonal'"),
    (lambda: RetileStreamifyUnit(T, 1, b=2), "RetileStreamifyUnit b must be an int in 0..1, not 2"),
    (lambda: AddrGenUnit(Index(), 1, [2, 0], [1, 1]),
     "AddrGenUnit shape must be 1 or more ints >= 1, not [2, 0]"),
    (lambda: AddrGenUnit(Index(), 1, [2, 2], [1]), "AddrGenUnit strides must be 2 ints, not [1]"),
    (lambda: AddrGenUnit(Index(), 1, [2], [1], offset=0.5),
     "AddrGenUnit offset must be an int, not 0.5"),
    (lambda: AddrGenUnit(T, 1, [2], [1]),
     "AddrGenUnit elem_type must be Index, Select or an integer Tile(dtype, 1, 1), "
     "not Tile(int8, 1, 2)"),
]


@pytest.mark.parametrize("make, message", REFUSED, ids=[m for _, m in REFUSED])
def test_a_refused_parameter_is_named_with_its_unit_and_value(make, message):
    with pytest.raises(ValueError) as info:
        make()
    assert str(info.value) == message
