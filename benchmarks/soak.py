"""Soak run of the unit property tests, per unit kind, with the examples and streams counted.

Every hardware unit kind has Hypothesis property tests that drive random streams through the
unit in simulation and compare it with the reference interpreter (``tests/test_hdl_*.py``). The
soak switch (``STEPFORGE_SOAK=N``, ``tests/conftest.py``) raises their example counts; this
script plans, runs and counts a soak of every unit kind:

* **Streams.** A *random stream* is one randomly drawn token stream the unit takes in (or, for a
  unit with no stream input, the linear load, the one it produces from a random walk over random
  off-chip data; for the memory, one client's random burst sequence). :data:`KINDS` gives each
  property test the number of random streams *every* example of it carries at least (``2`` for
  a Zip of two or three inputs, data and selector of a Partition, data and reference of an
  Expand, address and data of a random store, ...; ``1`` for one stream driven through two
  units, one checked against the other, as the FIFO's split-register tests do); a unit kind's
  stream count is the sum over its tests of (examples passed) x (that minimum), a lower bound.
  The tests in
  :data:`COUNTERS` (the memory's: 1-3 read and 0-2 write clients per example) count their
  streams exactly instead: the script is also a pytest plugin (``-p soak``) that wraps the
  helper each example calls and sums the streams it is given.
* **Plan.** ``--streams S`` (10,000) per kind: every test of a kind gets
  ``ceil(S / sum of its tests' minima)`` examples, so the kind reaches S streams.
* **Chunks.** Each test runs in chunks of ``--chunk`` examples (``STEPFORGE_SOAK=chunk``, one
  pytest process each, fresh random examples every chunk), the test of the kind with the most
  examples left first, kinds in the order given (most important first). Each chunk's
  Hypothesis statistics (examples passed, failed and invalid, time) are appended to
  ``DIR/log-<pid>.jsonl`` as it finishes, so a run cut short still records exactly what
  finished. The work left is read back from ``DIR`` before every chunk: a run resumes where
  the last stopped, and several processes given the same kinds share them (a chunk in flight
  is logged when it starts). ``--minutes M`` stops starting chunks after M minutes (the last
  chunk is sized to fit from the previous chunks' time per example).
* **Snapshot.** ``--snapshot DIR`` extracts the committed ``HEAD`` (``git archive``) into DIR and
  runs the tests there, importing ``stepforge`` from it (a package tree of symlinks after
  ``pyproject.toml``'s ``package-dir``, first on ``PYTHONPATH``), so a soak of hours tests one
  commit, not a working tree that others edit meanwhile.
* **Failures.** A failing chunk's pytest output (the shrunk falsifying example and its
  ``@reproduce_failure`` blob) is saved as ``DIR/failure-<test>-<n>.txt``; the failure is also
  in Hypothesis's example database (``.hypothesis/``) and is replayed first by the next run of
  that test. The test is not soaked further in this run.

Run (from the repository root, in the venv)::

    nice -n 19 python benchmarks/soak.py -o /tmp/soak --kinds memory --minutes 120
    nice -n 19 python benchmarks/soak.py -o /tmp/soak --kinds pmu pcu offchip_load ...
    python benchmarks/soak.py --summary /tmp/soak        # the table per unit kind
    python benchmarks/soak.py --list                     # kinds, tests, minima, the plan
"""

import argparse
import glob
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["KINDS", "plan", "parse_statistics", "summarize", "main"]

ROOT = Path(__file__).resolve().parent.parent

#: Unit kind -> [(pytest node id, random streams every example carries at least)], in the order
#: a time-limited soak runs them (the memory, the PMU, the PCU, the off-chip units, the FIFO,
#: the routing units, then the shape units).
KINDS = {
    "memory": [("tests/test_hdl_memory.py::test_random_bursts_match_a_flat_memory", 1)],
    "sdram": [("tests/test_hdl_sdram.py::test_random_bursts", 1),
              ("tests/test_hdl_sdram.py::test_random_bursts_bank_row_col", 1),
              ("tests/test_hdl_sdram_memory.py::test_random_bursts_match_a_flat_memory", 1)],
    "pmu": [("tests/test_hdl_pmu.py::test_round_trip_gives_back_the_input", 1),
            ("tests/test_hdl_pmu.py::test_static_repeat_matches_interpreter", 1),
            ("tests/test_hdl_pmu.py::test_reference_driven_replay_matches_interpreter", 2),
            ("tests/test_hdl_pmu.py::test_affine_order_matches_interpreter", 1),
            ("tests/test_hdl_pmu.py::test_two_consumers_share_each_buffer", 1),
            ("tests/test_hdl_pmu.py::test_consumers_that_miss_buffers_release_them_at_their_end",
             1),
            ("tests/test_hdl_allocator.py::test_bounded_dynamic_buffers_match_interpreter", 1)],
    "pcu": [("tests/test_hdl_pcu.py::test_map_unary", 1),
            ("tests/test_hdl_pcu.py::test_map_zipped", 1),
            ("tests/test_hdl_pcu.py::test_accum_matmul", 2),
            ("tests/test_hdl_pcu.py::test_accum_elementwise", 1),
            ("tests/test_hdl_pcu.py::test_scan", 1),
            ("tests/test_hdl_pcu.py::test_retile_row_dynamic", 1),
            ("tests/test_hdl_pcu.py::test_stop_mismatch", 2),
            ("tests/test_hdl_pcu_dynamic.py::test_map_unary_dynamic_rows", 1),
            ("tests/test_hdl_pcu_dynamic.py::test_map_binary_dynamic_rows", 2),
            ("tests/test_hdl_pcu_dynamic.py::test_retile_col_dynamic_rows", 1),
            ("tests/test_hdl_pcu_dynamic.py::test_retile_row_of_dynamic_rows", 1),
            ("tests/test_hdl_pcu_pipeline.py::test_pipelined_functions", 1),
            ("tests/test_hdl_pcu_pipeline.py::test_ice40_accumulators", 2),
            ("tests/test_hdl_pcu_pipeline.py::test_ice40_matmul_map", 2),
            ("tests/test_hdl_pcu_pipeline.py::test_accum_without_spare_is_exact_on_any_stream",
             2)],
    "offchip_load": [("tests/test_hdl_offchip.py::test_linear_load_matches_interpreter", 1),
                     ("tests/test_hdl_offchip.py::"
                      "test_linear_load_with_reference_matches_interpreter", 1),
                     ("tests/test_hdl_offchip.py::test_random_load_matches_interpreter", 1),
                     ("tests/test_hdl_offchip.py::"
                      "test_ecp5_form_of_a_load_moves_the_same_beats_in_the_same_cycles", 1)],
    "offchip_store": [("tests/test_hdl_offchip.py::test_linear_store_matches_interpreter", 1),
                      ("tests/test_hdl_offchip.py::test_random_store_matches_interpreter", 2)],
    "fifo": [("tests/test_hdl_fifo.py::test_random_streams", 1),
             ("tests/test_hdl_fifo.py::test_beats_through_fifo", 1),
             # one random stream, through the split FIFO and the plain one it is checked against
             ("tests/test_hdl_fifo.py::test_split_data_keeps_timing", 1),
             ("tests/test_hdl_fifo.py::test_split_payload_keeps_timing", 1),
             ("tests/test_hdl_fifo.py::test_block_ram_keeps_timing", 1)],
    "partition": [("tests/test_hdl_partition.py::test_matches_interpreter", 2),
                  ("tests/test_hdl_partition.py::test_unrelated_selector_faults_like_interpreter",
                   2)],
    "reassemble": [("tests/test_hdl_reassemble.py::test_matches_interpreter", 2)],
    "eager_merge": [("tests/test_hdl_eager_merge.py::test_matches_interpreter", 1)],
    "parallelize": [("tests/test_hdl_parallelize.py::test_matches_interpreter", 1)],
    "broadcast": [("tests/test_hdl_broadcast.py::test_every_output_gets_the_stream", 1)],
    "filter": [("tests/test_hdl_filter.py::test_matches_interpreter", 1)],
    "zip": [("tests/test_hdl_zip.py::test_matches_interpreter", 2),
            ("tests/test_hdl_zip.py::test_faults_match_interpreter", 2)],
    "flatten": [("tests/test_hdl_flatten.py::test_matches_interpreter", 1)],
    "reshape": [("tests/test_hdl_reshape.py::test_elements_match_interpreter", 1),
                ("tests/test_hdl_reshape.py::test_stops_match_interpreter", 1)],
    "promote": [("tests/test_hdl_promote.py::test_matches_interpreter", 1)],
    "expand": [("tests/test_hdl_expand.py::test_matches_interpreter", 2),
               ("tests/test_hdl_expand.py::test_faults_match_interpreter", 2)],
    "repeat": [("tests/test_hdl_repeat.py::test_matches_interpreter", 1)],
    "retile": [("tests/test_hdl_retile.py::test_matches_interpreter", 1),
               ("tests/test_hdl_retile.py::test_valid_counts_match_interpreter", 1)],
    "addrgen": [("tests/test_hdl_addrgen.py::test_matches_interpreter", 1),
                ("tests/test_hdl_addrgen.py::test_counted_matches_interpreter", 1)],
    "beat": [("tests/test_hdl_beat.py::test_round_trip_any_element", 1),
             ("tests/test_hdl_beat.py::test_round_trip_stream", 1),
             ("tests/test_hdl_beat.py::test_reader_delivers_every_beat_once", 1)],
}


#: Tests whose streams per example vary and are counted exactly, example by example: node id ->
#: (the helper of the test's module that each example calls once, what is counted, the count
#: from the helper's arguments). The count of a chunk that passes is its examples' sum; a
#: failing chunk (shrinking calls the helper again) counts the minimum.
COUNTERS = {
    "tests/test_hdl_memory.py::test_random_bursts_match_a_flat_memory": (
        "random_bursts", "read clients + write clients (nr + nw), each its own random bursts",
        lambda args, kwargs: args[7] + args[8]),
}


def pytest_collection_modifyitems(session, config, items):
    """Plugin hook (``-p soak``): count the streams of the tests in :data:`COUNTERS`."""
    path = os.environ.get("STEPFORGE_SOAK_STREAMS")
    if not path:
        return
    for item in items:
        if item.nodeid not in COUNTERS:
            continue
        name, _, count = COUNTERS[item.nodeid]
        original = getattr(item.module, name)

        def counted(*args, _original=original, _count=count, **kwargs):
            with open(path, "a") as f:
                f.write(f"{_count(args, kwargs)}\n")
            return _original(*args, **kwargs)
        setattr(item.module, name, counted)


def plan(kind, streams):
    """Examples per test of ``kind`` for ``streams`` random streams: ``{node id: examples}``."""
    tests = KINDS[kind]
    n = math.ceil(streams / sum(s for _, s in tests))
    return {node: n for node, _ in tests}


_PHASE = re.compile(r"^  - during (\w+) phase \(([\d.]+) seconds\):\n(?:    - .*\n)*?"
                    r"    - (\d+) passing, (\d+) failing, and (\d+) invalid", re.M)


def parse_statistics(output):
    """The generate phase of the one test in a ``--hypothesis-show-statistics`` output.

    Returns ``dict(passing, failing, invalid, seconds, stopped)`` (zeros when the test did not
    reach its generate phase, e.g. a database replay failed first).
    """
    stats = dict(passing=0, failing=0, invalid=0, seconds=0.0, stopped="")
    for m in _PHASE.finditer(output):
        phase, sec, p, f, i = m.groups()
        if phase == "generate":
            stats.update(passing=int(p), invalid=int(i), seconds=float(sec))
        if phase in ("reuse", "generate"):      # a failure replayed from the database, or new
            stats["failing"] += int(f)
    m = re.search(r"^  - Stopped because (.*)$", output, re.M)
    if m:
        stats["stopped"] = m.group(1).strip()
    return stats


def _commit():
    run = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                         text=True)
    return run.stdout.strip()


def snapshot(dest):
    """Extract ``HEAD`` into ``dest`` with an importable ``stepforge``; returns the commit."""
    import tomllib
    dest = Path(dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    commit = _commit()
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    with open(dest / "pyproject.toml", "rb") as f:
        dirs = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    pkg = dest / ".pkg"
    for name, folder in sorted(dirs.items()):
        link = pkg.joinpath(*name.split("."))
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(dest / folder)
    (dest / "COMMIT").write_text(commit + "\n")
    return commit


def _tree(root):
    """The folder tests run in and the environment that imports ``stepforge`` from it."""
    root = Path(root)
    if (root / ".pkg").is_dir():
        return root, {"PYTHONPATH": str(root / ".pkg")}
    return root, {}


def run_chunk(node, examples, env=None, timeout=None, root=ROOT):
    """Run ``examples`` fresh random examples of test ``node``; its statistics and output."""
    cwd, tree_env = _tree(root)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           "-p", "soak", "--hypothesis-show-statistics", node]
    here = str(Path(__file__).resolve().parent)        # this file, the plugin that counts
    counts = None
    if node in COUNTERS:
        fd, counts = tempfile.mkstemp(prefix="soak-streams-", suffix=".txt")
        os.close(fd)
    env = {**os.environ, "STEPFORGE_SOAK": str(max(examples, 2)), **tree_env,
           "STEPFORGE_SOAK_STREAMS": counts or "", **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (tree_env.get("PYTHONPATH"), here) if p)
    env.pop("CI", None)
    t0 = time.monotonic()
    try:
        run = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                             timeout=timeout)
        output, rc = run.stdout + run.stderr, run.returncode
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) \
            else (e.stdout or "")
        output, rc = output + f"\nTIMEOUT after {timeout} s\n", "timeout"
    stats = parse_statistics(output)
    stats.update(wall=round(time.monotonic() - t0, 1), rc=rc)
    if counts:
        with open(counts) as f:
            calls = [int(line) for line in f if line.strip()]
        os.unlink(counts)
        if rc == 0 and len(calls) == stats["passing"]:
            stats["streams_counted"] = sum(calls)
    return stats, output


def _records(out):
    records = []
    for path in sorted(glob.glob(os.path.join(str(out), "log-*.jsonl"))):
        with open(path) as f:
            records += [json.loads(line) for line in f if line.strip()]
    return records


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def remaining(out, kind, streams, commit):
    """Examples left per test of ``kind`` in folder ``out`` at ``commit``, and the failed tests.

    The plan less every chunk logged there (by any process; a counted test by its streams) and
    the chunks in flight in processes still alive, so several processes share a kind's work.
    """
    minima = dict(KINDS[kind])
    left, failed = plan(kind, streams), set()
    records = [r for r in _records(out) if r.get("test") in left and r.get("commit") == commit]
    finished = {r.get("chunk") for r in records if not r.get("start")}
    for r in records:
        if r.get("start"):
            if r["chunk"] not in finished and _alive(r["pid"]):
                left[r["test"]] -= r["requested"]
            continue
        left[r["test"]] -= max(r.get("streams_counted", 0) // minima[r["test"]], r["passing"], 1)
        if r["rc"] != 0 or r["failing"]:
            failed.add(r["test"])
    return left, failed


def soak(kinds, out, *, streams=10_000, chunk=1000, minutes=None, root=ROOT, log=print):
    """Soak ``kinds`` in order into folder ``out``; returns True when no test failed.

    ``root``: the tree the tests run in (a :func:`snapshot`, or this repository). The work left
    is read from ``out`` before every chunk (:func:`remaining`): a run resumes where an earlier
    one stopped, and processes given the same kinds share them. Each chunk takes the test of
    the kind with the most examples left.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    logfile = out / f"log-{os.getpid()}.jsonl"
    deadline = None if minutes is None else time.monotonic() + 60 * minutes
    commit = (Path(root) / "COMMIT").read_text().strip() if (Path(root) / "COMMIT").exists() \
        else _commit() + ("" if root == ROOT else "?")
    clean = True
    rate = {}                                     # seconds of wall time per example, per test
    count = 0

    def write(record):
        with open(logfile, "a") as f:
            f.write(json.dumps(record) + "\n")
    for kind in kinds:
        minima = dict(KINDS[kind])
        while True:
            left, failed = remaining(out, kind, streams, commit)
            todo = [node for node, n in left.items() if n > 0 and node not in failed]
            if failed:
                clean = False
            if not todo:
                break
            node = max(todo, key=lambda t: left[t])
            n = min(chunk, left[node])
            if deadline is not None:
                time_left = deadline - time.monotonic()
                if time_left <= 0:
                    log(f"time is up: {kind} stopped with {sum(max(v, 0) for v in left.values())}"
                        f" examples left")
                    return clean
                if rate:                        # a test not run yet: the slowest one so far
                    n = min(n, max(50, int(time_left / rate.get(node, max(rate.values())))))
            count += 1
            chunk_id = f"{os.getpid()}-{count}"
            write(dict(start=True, chunk=chunk_id, pid=os.getpid(), kind=kind, test=node,
                       requested=n, commit=commit))
            stats, output = run_chunk(node, n, root=root)
            passed = stats["passing"]
            if passed:
                rate[node] = stats["wall"] / passed
            record = dict(kind=kind, test=node, chunk=chunk_id, requested=n,
                          streams_per_example=minima[node], commit=commit,
                          time=time.strftime("%Y-%m-%d %H:%M:%S"), **stats)
            if stats["rc"] != 0 or stats["failing"]:
                clean = False
                path = out / f"failure-{node.split('::')[-1]}-{int(time.time())}.txt"
                path.write_text(output)
                record["output"] = str(path)
            write(record)
            log(f"{kind:14s} {node.split('::')[-1][:60]:60s} {passed:6d} passed "
                f"{stats['failing']} failed {stats['wall']:7.1f} s"
                + (f"  FAILED -> {record['output']}" if "output" in record else ""))
    return clean


def summarize(folders, streams=10_000):
    """Rows per unit kind over the logs in ``folders``: examples, streams, time, outcome.

    A chunk's streams per example are the smaller of its log's and :data:`KINDS`' (a lower
    bound either way: logs written before a minimum was corrected are counted by the new one).
    """
    records = [r for folder in folders for r in _records(folder) if not r.get("start")]
    rows = []
    for kind in KINDS:
        recs = [r for r in records if r["kind"] == kind]
        if not recs:
            continue
        minima = dict(KINDS[kind])
        tests = {}
        for r in recs:
            t = tests.setdefault(r["test"], dict(examples=0, failing=0, invalid=0, seconds=0.0,
                                                 wall=0.0, chunks=0))
            t["examples"] += r["passing"]
            per_example = min(r["streams_per_example"],
                              minima.get(r["test"], r["streams_per_example"]))
            t["streams"] = t.get("streams", 0) + r.get("streams_counted",
                                                       r["passing"] * per_example)
            t["failing"] += r["failing"] + (1 if r["rc"] not in (0, "0") and not r["failing"]
                                            else 0)
            t["invalid"] += r["invalid"]
            t["seconds"] += r["seconds"]
            t["wall"] += r["wall"]
            t["chunks"] += 1
        rows.append(dict(
            kind=kind, tests=len(tests), of=len(KINDS[kind]),
            examples=sum(t["examples"] for t in tests.values()),
            min_examples=min(t["examples"] for t in tests.values()),
            streams=sum(t["streams"] for t in tests.values()),
            failing=sum(t["failing"] for t in tests.values()),
            seconds=sum(t["seconds"] for t in tests.values()),
            wall=sum(t["wall"] for t in tests.values()),
            commits=sorted({r["commit"] for r in recs}),
            per_test={n: t for n, t in tests.items()}))
    for row in rows:
        row["done"] = row["streams"] >= streams and row["tests"] == row["of"]
    return rows


def _print_summary(rows, streams, per_test=False):
    print(f"| unit kind | tests | examples | random streams | failures | test time | "
          f"wall | >= {streams:,} |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['kind']} | {r['tests']}/{r['of']} | {r['examples']:,} | {r['streams']:,} | "
              f"{r['failing']} | {r['seconds'] / 60:.1f} min | {r['wall'] / 60:.1f} min | "
              f"{'yes' if r['done'] else 'no'} |")
    commits = sorted({c for r in rows for c in r["commits"]})
    print(f"\ncommits: {', '.join(commits)}")
    if per_test:
        for r in rows:
            for node, t in r["per_test"].items():
                ms = 1000 * t["seconds"] / t["examples"] if t["examples"] else 0
                print(f"{node:95s} {t['examples']:6d} ex {t['invalid']:5d} invalid "
                      f"{ms:6.0f} ms/ex {t['failing']} failed")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--out", default="soak-out", help="log folder")
    parser.add_argument("--kinds", nargs="+", choices=list(KINDS), default=list(KINDS),
                        help="unit kinds to soak, in this order (default: all)")
    parser.add_argument("--streams", type=int, default=10_000,
                        help="random streams per unit kind (default 10,000)")
    parser.add_argument("--chunk", type=int, default=1000, help="examples per pytest process")
    parser.add_argument("--minutes", type=float, help="start no chunk after this many minutes")
    parser.add_argument("--snapshot", metavar="DIR",
                        help="run the tests on HEAD extracted into DIR (reused if it holds one)")
    parser.add_argument("--summary", nargs="+", metavar="DIR", help="print the table of the logs")
    parser.add_argument("--per-test", action="store_true", help="with --summary: every test")
    parser.add_argument("--list", action="store_true", help="print the kinds and the plan")
    args = parser.parse_args(argv)
    if args.list:
        for kind in args.kinds:
            p = plan(kind, args.streams)
            for node, s in KINDS[kind]:
                print(f"{kind:14s} {node:95s} >= {s} streams/example, {p[node]:,} examples")
        return 0
    if args.summary:
        _print_summary(summarize(args.summary, args.streams), args.streams, args.per_test)
        return 0
    root = ROOT
    if args.snapshot:
        root = Path(args.snapshot).resolve()
        if not (root / "COMMIT").exists():
            snapshot(root)
        print(f"testing {(root / 'COMMIT').read_text().strip()} in {root}", flush=True)
    return 0 if soak(args.kinds, args.out, streams=args.streams, chunk=args.chunk,
                     minutes=args.minutes, root=root, log=lambda s: print(s, flush=True)) else 1


if __name__ == "__main__":
    sys.exit(main())
