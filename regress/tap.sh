# TAP helpers for the shell-driven live tests (sourced): a scratch folder
# $tmp removed on exit, `check DESCRIPTION CMD...` for one assertion (the
# command's output shown as comments when it fails), and `tap_end`, which
# prints the plan and returns non-zero if any assertion failed.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
fails=0
check() {
  local what=$1
  shift
  n=$((n + 1))
  if "$@" >"$tmp/out" 2>&1; then
    echo "ok $n - $what"
  else
    echo "not ok $n - $what"
    sed 's/^/# /' "$tmp/out"
    fails=$((fails + 1))
  fi
}
tap_end() {
  echo "1..$n"
  ((fails == 0))
}
