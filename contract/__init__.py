"""stepforge.contract: the bit-exact contract between the interpreter and the hardware.

What a value on a wire means and how it is computed, shared by the reference interpreter
(:mod:`stepforge.sim`) and the hardware library (:mod:`stepforge.hdl`), neither of which may
import the other:

* :mod:`~stepforge.contract.tokens`: tokens, stop levels and beats (semantics section 2);
* :mod:`~stepforge.contract.beat`: the wire encoding of a beat as an Amaranth data layout
  (``beat_layout``, ``beat_signature``, ``pack_beat`` / ``unpack_beat``);
* :mod:`~stepforge.contract.values`: interpreter values of each element type, their equality,
  and the padding element (``pad_value``);
* :mod:`~stepforge.contract.arith`: the hardware's integer and floating-point arithmetic;
* :mod:`~stepforge.contract.fixedpoint`: the fixed-point approximations of exp, silu, rsqrt.

It imports only the language (:mod:`stepforge.compiler` element types, tile functions, errors).
"""
