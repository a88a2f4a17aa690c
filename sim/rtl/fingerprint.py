"""Fingerprints of elaborated hardware: equal fingerprints mean equal hardware.

:func:`fingerprint` hashes what :meth:`amaranth.hdl.Fragment.get` returns for a component (its
statements, submodules, instances and memories, down to every signal's name, shape, initial
value and reset behaviour) together with its ports. It is the key of the separately compiled
unit library (:mod:`stepforge.sim.rtl.separate`): two units get the same Verilog module exactly when
their fingerprints agree, so the key does not depend on any unit's list of constructor
parameters, which a new parameter could silently outgrow. Whatever a constructor parameter
changes in the hardware changes the fingerprint; a parameter that changes nothing in the
hardware does not.

The serialization is canonical: it walks the fragment's object graph in a fixed order, names
every Amaranth object by the order in which it is first met (so a signal used twice is one
object, and two equal designs built by different runs serialize identically) and leaves out
only what cannot change the Verilog: source locations, Amaranth's per-run unique ids and the
objects a fragment was elaborated from. So equal fingerprints mean equal Verilog text, down to
the names of the wires Amaranth adds for the fields of a layout. An object the walk does not
know (anything that is neither a plain Python value nor an Amaranth object) is an error, never
silently skipped.
"""

import enum
import hashlib
import types

from amaranth.hdl import ClockSignal, Fragment, ResetSignal
from amaranth.hdl._ast import Switch     # the statement behind ``m.Switch``/``m.If`` (not public)

__all__ = ["Fingerprint", "fingerprint"]

#: Attributes that never change the Verilog of a fragment.
_SKIPPED = frozenset({
    "src_loc", "src_loc_at",        # where the Python code was
    "duid",                         # Amaranth's per-run unique id of a signal
    "origins",                      # the elaboratables a fragment came from
    "_MustUse__used", "_MustUse__context", "_MustUse__silence",
})
_PLAIN = (type(None), bool, int, float, str, bytes, range)


class Fingerprint:
    """What :func:`fingerprint` found.

    Attributes
    ----------
    digest : str
        64 hex digits (SHA-256 of the canonical serialization and the ``salt``).
    domains : frozenset of str
        The clock domains the fragment names (statements, clock and reset signals, domains it
        defines).
    reads_reset : bool
        Whether the fragment reads a ``ResetSignal`` itself.
    """

    def __init__(self, digest, domains, reads_reset):
        self.digest, self.domains, self.reads_reset = digest, domains, reads_reset

    def __repr__(self):
        return f"Fingerprint({self.digest[:12]}, domains={sorted(self.domains)})"


class _Walk:
    """The canonical serialization, hashed as it goes; iterative (an explicit stack), so a deep
    expression (a long chain of additions) cannot exhaust Python's recursion limit."""

    def __init__(self):
        self.hash = hashlib.sha256()
        self.memo = {}          # id(object) -> its number
        self.alive = []         # keeps every numbered object alive, so ids stay unique
        self.attributes = {}    # attribute names present -> those serialized, sorted
        self.domains = set()
        self.reads_reset = False

    def emit(self, text):
        self.hash.update(text.encode())
        self.hash.update(b"\x1f")

    def walk(self, root):
        stack = [(False, root)]           # (True, text to emit) or (False, object to expand)
        while stack:
            is_text, item = stack.pop()
            if is_text:
                self.emit(item)
            else:
                self.expand(item, stack)

    def expand(self, obj, stack):
        """Emit ``obj``'s header and push its parts (last first) for the walk to visit."""
        t = type(obj)
        if t in _PLAIN:
            self.emit(f"{t.__name__}:{obj!r}")
        elif isinstance(obj, (list, tuple)):
            self.emit(f"{t.__name__}[{len(obj)}")
            stack.append((True, "]"))
            stack.extend((False, item) for item in reversed(obj))
        elif isinstance(obj, dict):
            self.emit(f"{t.__name__}{{{len(obj)}")
            stack.append((True, "}"))
            for key, item in reversed(obj.items()):
                stack += ((False, item), (False, key))
        elif isinstance(obj, (set, frozenset)):
            if not all(type(item) in _PLAIN for item in obj):
                raise TypeError(f"cannot fingerprint a set of objects (no fixed order): {obj!r}")
            self.emit(f"set{{{sorted(map(repr, obj))}")
        elif isinstance(obj, enum.Enum):
            self.emit(f"enum:{t.__module__}.{t.__qualname__}.{obj.name}")
        elif isinstance(obj, type):
            members = [m.name for m in obj] if issubclass(obj, enum.Enum) else ""
            self.emit(f"type:{obj.__module__}.{obj.__qualname__}{members}")
        elif isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
            self.emit(f"function:{obj.__module__}.{obj.__qualname__}")
        elif t.__module__.startswith("amaranth."):
            self.amaranth_object(obj, stack)
        else:
            raise TypeError(f"cannot fingerprint {obj!r} of type {t.__module__}.{t.__qualname__}")

    def amaranth_object(self, obj, stack):
        number = self.memo.get(id(obj))
        if number is not None:
            self.emit(f"@{number}")
            return
        self.memo[id(obj)] = len(self.memo)
        self.alive.append(obj)
        t = type(obj)
        if isinstance(obj, (ClockSignal, ResetSignal)):
            self.domains.add(obj.domain)
            self.reads_reset |= isinstance(obj, ResetSignal)
        self.emit(f"{t.__module__}.{t.__qualname__}(")
        if isinstance(obj, Switch):
            # each case's source location is the third member of its tuple
            fields = {"test": obj.test,
                      "cases": [(patterns, stmts) for patterns, stmts, _src_loc in obj.cases]}
        else:
            fields = {name: getattr(obj, name) for name in self.names(obj)}
            if isinstance(obj, Fragment):
                self.domains.update(obj.statements)
                self.domains.update(obj.domains)
                fields["subfragments"] = [(sub, name) for sub, name, _src_loc in obj.subfragments]
        stack.append((True, ")"))
        for name, value in reversed(fields.items()):
            stack += ((False, value), (True, name))

    def names(self, obj):
        present = tuple(vars(obj))
        names = self.attributes.get(present)
        if names is None:
            names = self.attributes[present] = sorted(set(present) - _SKIPPED)
        return names


def fingerprint(fragment, ports, *, salt=()):
    """The :class:`Fingerprint` of an elaborated fragment and its ports.

    Parameters
    ----------
    fragment : amaranth.hdl.Fragment
        What ``Fragment.get(component, platform)`` returned, before ``prepare`` (which changes
        it).
    ports : dict of str to (Value, PortDirection)
        The ports the fragment will be converted with, in order.
    salt : sequence of str
        Anything else the hardware's text depends on (tool versions, source hashes).

    Returns
    -------
    Fingerprint

    Raises
    ------
    TypeError
        The fragment holds an object that has no canonical form.
    """
    walk = _Walk()
    for part in salt:
        walk.emit(f"salt:{part}")
    walk.walk([(name, value, direction.value) for name, (value, direction) in ports.items()])
    walk.walk(fragment)
    return Fingerprint(walk.hash.hexdigest(), frozenset(walk.domains), walk.reads_reset)
