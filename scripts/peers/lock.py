#!/usr/bin/env python3
"""Regenerate a hash-pinned requirements file for one peer benchmark client.

    python3.11 scripts/peers/lock.py aiperf==0.13.0 scripts/requirements-aiperf.txt
    python3.11 scripts/peers/lock.py 'lm_eval[api]==0.4.13' scripts/requirements-lm-eval.txt \
        scripts/requirements-lm-eval-sdist.txt

With a third argument, packages that PyPI has only as a source distribution are allowed and
written there (`name==version --hash=...`), to be built by a second pip step with
`--no-binary :all: --no-build-isolation` against the setuptools pinned in the first file
(which then must be in the tree: it is added when a package needs it only to build).

Resolves PACKAGE==VERSION and its whole dependency tree with pip's resolver (wheels only,
for the running interpreter and platform) in a throw-away virtual environment, then writes
every wheel as `name==version --hash=sha256:...` so that `pip install --no-deps
--require-hashes --only-binary :all: -r FILE` installs exactly that tree and nothing else.
Only PyPI is contacted. bench-peers.sh never runs this; it only reads the files it writes.
"""
import json
import os
import subprocess
import sys
import tempfile


def main() -> int:
    if len(sys.argv) not in (3, 4) or "==" not in sys.argv[1]:
        print(__doc__, file=sys.stderr)
        return 2
    spec, out = sys.argv[1], sys.argv[2]
    out_sdist = sys.argv[3] if len(sys.argv) == 4 else None
    with tempfile.TemporaryDirectory() as tmp:
        venv = os.path.join(tmp, "venv")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        pip = [os.path.join(venv, "bin", "python"), "-m", "pip"]
        subprocess.run(pip + ["install", "-q", "--upgrade", "pip"], check=True)
        report = os.path.join(tmp, "report.json")
        subprocess.run(
            pip
            + ["install", "-q", "--dry-run", "--ignore-installed"]
            + ([] if out_sdist else ["--only-binary", ":all:"])
            + ["--report", report, spec]
            + (["setuptools"] if out_sdist else []),
            check=True,
        )
        with open(report) as f:
            installs = json.load(f)["install"]
    rows, sdists = [], []
    for item in installs:
        meta, info = item["metadata"], item["download_info"]
        sha = info["archive_info"]["hashes"]["sha256"]
        wheel = info["url"].rsplit("/", 1)[-1]
        row = (meta["name"].lower(), meta["version"], sha, wheel)
        (rows if wheel.endswith(".whl") else sdists).append(row)
    rows.sort()
    sdists.sort()
    if sdists and not out_sdist:
        print(f"source distributions in the tree: {sdists}", file=sys.stderr)
        return 1
    v = sys.version_info
    lines = [
        f"# {spec} and its whole dependency tree ({len(rows)} wheels), resolved by",
        f"# scripts/peers/lock.py for CPython {v.major}.{v.minor} on Linux x86_64.",
        "# Installed (scripts/bench-peers.sh, scripts/setup-lm-eval.sh) with",
        "#   pip install --no-deps --require-hashes --only-binary :all: -r THIS_FILE",
        "# into a virtual environment keyed by this file's sha256: edit = new environment.",
    ]
    if any(name == "torch" for name, *_ in rows):
        lines += [
            "# torch comes with its CUDA wheels (nvidia-*, cuda-*, triton: most of the ~3 GB):",
            "# the package requires torch, and PyPI has no CPU-only torch build for Linux.",
        ]
    for name, ver, sha, wheel in rows:
        lines.append(f"{name}=={ver} \\\n    --hash=sha256:{sha}  # {wheel}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{out}: {len(rows)} wheels", file=sys.stderr)
    if out_sdist:
        lines = [
            f"# The packages of {spec}'s tree that PyPI has only as a source distribution",
            f"# ({len(sdists)}), resolved with {os.path.basename(out)} by scripts/peers/lock.py. Built with",
            "#   pip install --no-deps --require-hashes --no-binary :all: --no-build-isolation",
            "#       --use-pep517 -r THIS_FILE",
            f"# against the setuptools pinned in {os.path.basename(out)}.",
        ]
        for name, ver, sha, sdist in sdists:
            lines.append(f"{name}=={ver} \\\n    --hash=sha256:{sha}  # {sdist}")
        with open(out_sdist, "w") as f:
            f.write("\n".join(lines) + "\n")
        print(f"{out_sdist}: {len(sdists)} source distributions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
