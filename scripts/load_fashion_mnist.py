#!/usr/bin/env python3
"""Fashion-MNIST (Debian package dataset-fashion-mnist) as PostgreSQL input.

  load_fashion_mnist.py rows [--set train|t10k] [--limit N]
      COPY text rows "id<TAB>label<TAB>[p0,p1,...,p783]", id = index in the file
  load_fashion_mnist.py query [--set t10k] [--index I]
      one line "label<TAB>class name<TAB>[p0,...]" for a query image
  load_fashion_mnist.py classes
      COPY text rows "label<TAB>class name"

Pixels are the raw uint8 values (0..255); the vector text form is
pgvector's '[v1,v2,...]'. Only the standard library is used.
"""
import argparse
import gzip
import os
import struct
import sys

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
IMAGES_MAGIC = 0x00000803  # unsigned bytes, 3 dimensions
LABELS_MAGIC = 0x00000801  # unsigned bytes, 1 dimension


def read_idx(path, magic, ndim):
    """Return (dims, payload bytes) of a gzip'd idx file, checking its header."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    got, = struct.unpack_from(">I", data, 0)
    if got != magic:
        sys.exit(f"{path}: magic {got:#010x}, expected {magic:#010x}")
    dims = struct.unpack_from(f">{ndim}I", data, 4)
    payload = memoryview(data)[4 + 4 * ndim:]
    size = 1
    for d in dims:
        size *= d
    if len(payload) != size:
        sys.exit(f"{path}: {len(payload)} data bytes, header says {size}")
    return dims, payload


def load_set(directory, name):
    """Images (count, rows*cols, bytes) and labels of the 'train' or 't10k' set."""
    (n, rows, cols), pixels = read_idx(
        os.path.join(directory, f"{name}-images-idx3-ubyte.gz"), IMAGES_MAGIC, 3)
    (nl,), labels = read_idx(
        os.path.join(directory, f"{name}-labels-idx1-ubyte.gz"), LABELS_MAGIC, 1)
    if n != nl:
        sys.exit(f"{name}: {n} images but {nl} labels")
    return n, rows * cols, pixels, labels


# Text of each byte value, so that formatting a row is one join.
BYTE_TEXT = [str(b) for b in range(256)]


def vector_text(pixels, dim, i):
    return "[" + ",".join(map(BYTE_TEXT.__getitem__, pixels[i * dim:(i + 1) * dim])) + "]"


def cmd_rows(args):
    n, dim, pixels, labels = load_set(args.dir, args.set)
    count = n if args.limit is None else min(n, args.limit)
    out = sys.stdout
    for i in range(count):
        out.write(f"{i}\t{labels[i]}\t{vector_text(pixels, dim, i)}\n")


def cmd_query(args):
    n, dim, pixels, labels = load_set(args.dir, args.set)
    if not 0 <= args.index < n:
        sys.exit(f"--index must be in 0..{n - 1}")
    label = labels[args.index]
    print(f"{label}\t{CLASSES[label]}\t{vector_text(pixels, dim, args.index)}")


def cmd_classes(_args):
    for label, name in enumerate(CLASSES):
        print(f"{label}\t{name}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default=DEFAULT_DIR, help="idx files (default %(default)s)")
    sub = parser.add_subparsers(dest="command", required=True)
    rows = sub.add_parser("rows", help="COPY rows of a whole set")
    rows.add_argument("--set", choices=["train", "t10k"], default="train")
    rows.add_argument("--limit", type=int, help="only the first N images")
    rows.set_defaults(func=cmd_rows)
    query = sub.add_parser("query", help="one image as a query vector")
    query.add_argument("--set", choices=["train", "t10k"], default="t10k")
    query.add_argument("--index", type=int, default=0)
    query.set_defaults(func=cmd_query)
    sub.add_parser("classes", help="label names").set_defaults(func=cmd_classes)
    args = parser.parse_args()
    try:
        args.func(args)
    except BrokenPipeError:
        # The consumer (psql) went away; its own error says why.
        sys.stderr.close()
        sys.exit(1)


if __name__ == "__main__":
    main()
