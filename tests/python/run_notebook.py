"""Executes notebooks/analysis.ipynb headless with nbclient over a bench360 cache and checks what
it produced: no cell raised, both plots are non-empty PNG files, and the summary has exactly one
row per finished run of the cache (records/*.json of kind "run", status "finished"), printed and
in summary.csv. The executed notebook is written to OUT_DIR/analysis.executed.ipynb, also when a
cell fails. Exits non-zero with the reason on any failure.

The kernel is this Python's own ipykernel, named by a kernelspec written to a temporary folder
(argv = sys.executable), reached over Unix sockets in that folder; every Jupyter, IPython and
matplotlib folder points into it too, so nothing in the user's home is read or written.

Usage: run_notebook.py CACHE_DIR OUT_DIR [--timeout SECONDS_PER_CELL]"""
import argparse
import csv
import glob
import json
import os
import shutil
import sys
import tempfile
import time

NOTEBOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "notebooks", "analysis.ipynb")
KERNEL = "bench360-python"
PNGS = ["pareto.png", "latency_vs_load.png"]


def fail(msg):
    print(f"run_notebook: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def finished_runs(cache):
    keys = set()
    for path in glob.glob(os.path.join(cache, "records", "*.json")):
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError):
            continue
        if r.get("kind") == "run" and r.get("status") == "finished":
            keys.add(r["key"])
    return keys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cache")
    ap.add_argument("out")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per cell (default 300)")
    args = ap.parse_args()
    cache, out = os.path.abspath(args.cache), os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    expected = finished_runs(cache)
    if not expected:
        fail(f"{cache} has no finished run record: nothing to analyse")

    scratch = tempfile.mkdtemp(prefix="bench360-nb-")
    # Jupyter's, IPython's and matplotlib's folders, all inside the scratch folder.
    for var, sub in [("JUPYTER_DATA_DIR", "data"), ("JUPYTER_CONFIG_DIR", "config"),
                     ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython"), ("MPLCONFIGDIR", "mpl"),
                     ("JUPYTER_PATH", "path")]:
        os.environ[var] = os.path.join(scratch, sub)
        os.makedirs(os.environ[var], exist_ok=True)
    os.environ["JUPYTER_PLATFORM_DIRS"] = "1"
    os.environ["MPLBACKEND"] = "Agg"
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    # The kernel the notebook runs on: this interpreter, found first on JUPYTER_PATH.
    spec_dir = os.path.join(os.environ["JUPYTER_PATH"], "kernels", KERNEL)
    os.makedirs(spec_dir)
    with open(os.path.join(spec_dir, "kernel.json"), "w") as f:
        json.dump({"argv": [sys.executable, "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                   "display_name": "bench360 Python", "language": "python"}, f)
    # The notebook's parameters.
    os.environ["BENCH360_CACHE_DIR"] = cache
    os.environ["BENCH360_NOTEBOOK_OUT"] = out

    import nbformat
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    nb = nbformat.read(NOTEBOOK, as_version=4)
    # Unix sockets in the scratch folder rather than loopback TCP ports.
    km = KernelManager(kernel_name=KERNEL, transport="ipc", ip=os.path.join(scratch, "kernel"))
    client = NotebookClient(nb, km=km, kernel_name=KERNEL, timeout=args.timeout, startup_timeout=120,
                            resources={"metadata": {"path": os.path.dirname(os.path.abspath(NOTEBOOK))}})
    executed = os.path.join(out, "analysis.executed.ipynb")
    t = time.monotonic()
    error = None
    try:
        client.execute()
    except CellTimeoutError as e:
        error = f"a cell ran past {args.timeout} s: {e}"
    except CellExecutionError as e:
        error = f"a cell raised:\n{e}"
    finally:
        if km.has_kernel:  # a kernel manager passed in is not shut down by nbclient itself
            km.shutdown_kernel()
        nbformat.write(nb, executed)
        shutil.rmtree(scratch, ignore_errors=True)
    elapsed = time.monotonic() - t
    if error:
        fail(f"{error}\n(executed notebook: {executed})")

    # Every output of every cell: no error, and the text printed (for the summary check).
    text = []
    for i, cell in enumerate(nb.cells):
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                fail(f"cell {i} has an error output: {o.get('ename')}: {o.get('evalue')}")
            if o.get("output_type") == "stream":
                if o.get("name") == "stderr" and "Traceback" in o.get("text", ""):
                    fail(f"cell {i} printed a traceback:\n{o['text']}")
                text.append(o.get("text", ""))
    text = "".join(text)

    for name in PNGS:
        path = os.path.join(out, name)
        if not os.path.isfile(path) or os.path.getsize(path) < 1000:
            fail(f"{path} missing or nearly empty")
        with open(path, "rb") as f:
            if f.read(8) != b"\x89PNG\r\n\x1a\n":
                fail(f"{path} is not a PNG file")

    summary_csv = os.path.join(out, "summary.csv")
    if not os.path.isfile(summary_csv):
        fail(f"{summary_csv} not written")
    with open(summary_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    keys = [r["node_key"] for r in rows]
    if len(keys) != len(set(keys)):
        fail(f"summary.csv has a run twice: {sorted(keys)}")
    if set(keys) != expected:
        fail(f"summary.csv has {len(keys)} runs, the cache {len(expected)} finished runs; "
             f"missing {sorted(expected - set(keys))}, extra {sorted(set(keys) - expected)}")
    if f"SUMMARY: {len(expected)} runs" not in text:
        fail(f"the printed summary does not say 'SUMMARY: {len(expected)} runs'")
    table = text.split(f"SUMMARY: {len(expected)} runs", 1)[1]
    lines = table.splitlines()
    for key in expected:
        n = sum(1 for line in lines if line.startswith(key[:12]))
        if n != 1:
            fail(f"the printed summary has {n} rows for run {key[:12]} (want 1)")
    print(f"run_notebook: ok: {len(nb.cells)} cells in {elapsed:.1f} s; {len(expected)} runs in the summary; "
          f"{', '.join(PNGS)} written to {out}")


if __name__ == "__main__":
    main()
