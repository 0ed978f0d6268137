# Fashion-MNIST for the recall tests (sourced): DIR holds the idx files
# (GKNN_FMNIST_DIR, else the Debian package dataset-fashion-mnist's).
DIR=${GKNN_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}

# Without the files: the whole test is a TAP SKIP.
fmnist_require() {
  if [ ! -f "$DIR/train-images-idx3-ubyte.gz" ] || [ ! -f "$DIR/t10k-images-idx3-ubyte.gz" ]; then
    echo "1..0 # SKIP no Fashion-MNIST in $DIR (Debian package dataset-fashion-mnist)"
    exit 0
  fi
}

# idx3 images -> COPY text rows "id<TAB>[p0,p1,...]" (raw pixels 0..255),
# read by the benchmark's own reader (bench/datasets/prepare.py).
to_copy() {  # file rows out
  python3 - "$1" "$2" "$(dirname "${BASH_SOURCE[0]}")/../bench/datasets" >"$3" <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
from prepare import read_idx_images
n, dim, pixels = read_idx_images(sys.argv[1])
for i in range(min(int(sys.argv[2]), n)):
    print(f"{i}\t[{','.join(map(str, pixels[i * dim:(i + 1) * dim]))}]")
PY
}
