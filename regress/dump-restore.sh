#!/usr/bin/env bash
# pg_dump / pg_restore round trips of gknn's types against a running server
# (PGHOST/PGPORT/PGUSER), as TAP: a table with vector, sparsevec and bit
# columns (NULLs, zeros, 10^9 dimensions, a btree index on sparsevec and an
# expression index on binary_quantize(v)::bit(n)) is dumped in custom and
# plain format and restored into fresh databases, with gknn in public and in
# its own schema beside pgvector-like objects in public. The restored rows
# print as the originals do (the text forms are exact: shortest round-trip
# floats), and the indexes come back valid and answer as the originals do.
# Used by regress/run-all.sh.
#
#   regress/dump-restore.sh   (GKNN_PG_BIN names the client programs' folder)
set -uo pipefail
# The server's own client programs when GKNN_PG_BIN has them, else PATH's.
tool() { if [ -x "${GKNN_PG_BIN:-/nonexistent}/$1" ]; then echo "$GKNN_PG_BIN/$1"; else echo "$1"; fi; }
PSQL=$(tool psql)
PG_DUMP=$(tool pg_dump)
PG_RESTORE=$(tool pg_restore)
SRC=gknn_dump_src
. "$(dirname "$0")/tap.sh"
sql() {
  local db=$1
  shift
  "$PSQL" -X -qAt -v ON_ERROR_STOP=1 -d "$db" "$@"
}
recreate() { "$PSQL" -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1"; }
# same_text DB1 DB2 QUERY: the query prints the same in both databases
same_text() {
  local a b
  a=$(sql "$1" -c "$3") || return 1
  b=$(sql "$2" -c "$3") || return 1
  [ -n "$a" ] || { echo "no output from $1"; return 1; }
  [ "$a" = "$b" ] || { echo "$1:"; echo "$a"; echo "$2:"; echo "$b"; return 1; }
}
# equal WHAT DB QUERY
equal() {
  local got
  got=$(sql "$2" -c "$3") || return 1
  [ "$got" = "$1" ] || { echo "expected: $1"; echo "got: $got"; return 1; }
}

# setup DB SCHEMA: gknn in SCHEMA (public, or its own beside stand-ins of
# pgvector's objects in public) and the table t with its indexes; the
# table's columns are qualified with SCHEMA.
setup() {
  local db=$1 s=$2
  recreate "$db" || return 1
  if [ "$s" = public ]; then
    sql "$db" -c 'CREATE EXTENSION gknn' || return 1
  else
    sql "$db" -c "CREATE TYPE public.sparsevec AS (y int);
      CREATE FUNCTION public.hamming_distance(bit, bit) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT -7';
      CREATE OPERATOR public.<~> (LEFTARG = bit, RIGHTARG = bit, FUNCTION = public.hamming_distance);
      CREATE SCHEMA $s; CREATE EXTENSION gknn SCHEMA $s" || return 1
  fi
  sql "$db" -c "
    CREATE TABLE t (id int PRIMARY KEY, v $s.vector(3), s $s.sparsevec(5), big $s.sparsevec,
                    b bit(3), vb varbit(8));
    INSERT INTO t VALUES
      (1, '[1,-2,3]', '{1:1.5,3:-2}/5', '{1:0.1,1000000000:3.4028235e38}/1000000000', B'101', B'1'),
      (2, '[0,0,0]', '{}/5', '{}/1', B'000', B''),
      (3, NULL, NULL, NULL, NULL, NULL),
      (4, '[1e-30,0.1,-0]', '{5:1e-30}/5', '{2:1,16000:-1}/20000', B'111', B'10110011');
    INSERT INTO t SELECT i, ARRAY[i % 3 - 1, i % 5 - 2, i % 7 - 3]::float8[]::$s.vector,
                         ARRAY[0, i % 3, 0, i % 5 - 2, 1]::float8[]::$s.sparsevec, NULL,
                         (i % 8)::bit(3), (i % 256)::bit(8)::varbit
      FROM generate_series(5, 300) i;
    CREATE INDEX t_s ON t (s);
    CREATE INDEX t_bits ON t (($s.binary_quantize(v)::bit(3)));"
}

# queries_agree DB SRC S: the same answers in both, the indexes valid in DB
# and the btree index on sparsevec used for equality.
queries_agree() {
  local db=$1 src=$2 s=$3
  same_text "$src" "$db" "SET enable_seqscan = off;
    SELECT count(*) FROM t WHERE s OPERATOR($s.=) '{2:2,4:2,5:1}/5'::$s.sparsevec;
    SELECT count(*) FROM t WHERE $s.binary_quantize(v)::bit(3) = B'101';
    SELECT string_agg(id::text, ',' ORDER BY id) FROM (SELECT id FROM t WHERE s IS NOT NULL
      ORDER BY s OPERATOR($s.<->) '{1:1,4:1}/5'::$s.sparsevec, id LIMIT 5) q;
    SELECT string_agg(id::text, ',' ORDER BY id) FROM (SELECT id FROM t WHERE b IS NOT NULL
      ORDER BY b OPERATOR($s.<~>) B'110', id LIMIT 5) q;" &&
    equal "t_bits,t_pkey,t_s" "$db" "SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_index i
      JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 't'::regclass AND i.indisvalid" &&
    sql "$db" -c "SET enable_seqscan = off;
      EXPLAIN (COSTS OFF) SELECT id FROM t WHERE s OPERATOR($s.=) '{2:2,4:2,5:1}/5'::$s.sparsevec" | grep -E '(using|on) t_s$'
}

for s in public gknn; do
  check "source database with gknn in schema $s" setup "$SRC" "$s"
  for fmt in custom plain; do
    dst=gknn_dump_${fmt}_$s
    file="$tmp/dump.$fmt"
    if [ "$fmt" = custom ]; then
      check "pg_dump -Fc, pg_restore (gknn in $s)" bash -c \
        "'$PG_DUMP' -Fc -f '$file' '$SRC' && '$PSQL' -X -q -d postgres -c 'DROP DATABASE IF EXISTS $dst' \
         -c 'CREATE DATABASE $dst' && '$PG_RESTORE' --exit-on-error -d '$dst' '$file'"
    else
      check "pg_dump -Fp | psql (gknn in $s)" bash -c \
        "'$PG_DUMP' -Fp -f '$file' '$SRC' && '$PSQL' -X -q -d postgres -c 'DROP DATABASE IF EXISTS $dst' \
         -c 'CREATE DATABASE $dst' && '$PSQL' -X -q -v ON_ERROR_STOP=1 -d '$dst' -f '$file' >/dev/null"
    fi
    check "$fmt dump: every row equal as text (gknn in $s)" \
      same_text "$SRC" "$dst" "SELECT id, v, s, big, b, vb FROM t ORDER BY id"
    check "$fmt dump: indexes valid, used, and queries answer the same (gknn in $s)" \
      queries_agree "$dst" "$SRC" "$s"
  done
done
"$PSQL" -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $SRC" \
  -c "DROP DATABASE IF EXISTS gknn_dump_custom_public" -c "DROP DATABASE IF EXISTS gknn_dump_plain_public" \
  -c "DROP DATABASE IF EXISTS gknn_dump_custom_gknn" -c "DROP DATABASE IF EXISTS gknn_dump_plain_gknn" >/dev/null
tap_end
