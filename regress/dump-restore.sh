#!/usr/bin/env bash
# pg_dump / pg_restore round trips of gknn's types against a running server
# (PGHOST/PGPORT/PGUSER), as TAP: a table with vector, halfvec, sparsevec and
# bit columns (NULLs, zeros, -0, subnormal halves, 65504, 16000 and 10^9
# dimensions, an array of halfvec; btree indexes on sparsevec and halfvec,
# expression indexes on binary_quantize(v)::bit(n) and v::halfvec(n), gpu_ivfpq
# indexes on both expressions (halfvec_l2_ops, bit_hamming_ops), a CHECK
# on l2_norm(halfvec), a view using || and <->) is dumped in custom and plain
# format and restored into fresh databases, with gknn in public and in its own
# schema beside pgvector-like objects in public. The restored rows are equal
# bit for bit (their COPY BINARY streams match; arrays element by element,
# since an array's binary form names its element type by OID) and print as
# the originals do; the indexes come back valid and answer as the originals
# do, the CHECK still rejects, the view answers the same.
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
# same_binary DB1 DB2 QUERY: COPY (QUERY) TO STDOUT (FORMAT binary) gives the same bytes
same_binary() {
  local a b
  a=$("$PSQL" -X -q -v ON_ERROR_STOP=1 -d "$1" -c "COPY ($3) TO STDOUT (FORMAT binary)" | md5sum) || return 1
  b=$("$PSQL" -X -q -v ON_ERROR_STOP=1 -d "$2" -c "COPY ($3) TO STDOUT (FORMAT binary)" | md5sum) || return 1
  [ "$a" = "$b" ] || { echo "$1: $a"; echo "$2: $b"; return 1; }
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
      CREATE TYPE public.halfvec AS (h int);
      CREATE FUNCTION public.l2_norm(public.halfvec) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT -3';
      CREATE FUNCTION public.halfvec_concat(public.halfvec, public.halfvec) RETURNS public.halfvec
        LANGUAGE sql IMMUTABLE AS 'SELECT ROW(-4)::public.halfvec';
      CREATE OPERATOR public.|| (LEFTARG = public.halfvec, RIGHTARG = public.halfvec,
                                 FUNCTION = public.halfvec_concat);
      CREATE SCHEMA $s; CREATE EXTENSION gknn SCHEMA $s" || return 1
  fi
  sql "$db" -c "
    CREATE TABLE t (id int PRIMARY KEY, v $s.vector(3), s $s.sparsevec(5), big $s.sparsevec,
                    b bit(3), vb varbit(8), h $s.halfvec(3), hbig $s.halfvec, hs $s.halfvec[],
                    CHECK ($s.l2_norm(h) < 100000));
    INSERT INTO t VALUES
      (1, '[1,-2,3]', '{1:1.5,3:-2}/5', '{1:0.1,1000000000:3.4028235e38}/1000000000', B'101', B'1',
       '[1.23456,-0,65504]', '[5.9604645e-08,-65504,0.1]', '{\"[1,2]\",\"[3]\"}'),
      (2, '[0,0,0]', '{}/5', '{}/1', B'000', B'', '[0,0,0]', array_fill(0.5::real, ARRAY[16000])::$s.halfvec, '{}'),
      (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
      (4, '[1e-30,0.1,-0]', '{5:1e-30}/5', '{2:1,16000:-1}/20000', B'111', B'10110011',
       '[1e-30,0.1,-0]', '[6.1e-5]', '{NULL,\"[1]\"}');
    INSERT INTO t SELECT i, ARRAY[i % 3 - 1, i % 5 - 2, i % 7 - 3]::float8[]::$s.vector,
                         ARRAY[0, i % 3, 0, i % 5 - 2, 1]::float8[]::$s.sparsevec, NULL,
                         (i % 8)::bit(3), (i % 256)::bit(8)::varbit,
                         ARRAY[i % 3, (i % 5) * 0.1, -(i % 7)]::float8[]::$s.halfvec, NULL, NULL
      FROM generate_series(5, 300) i;
    CREATE INDEX t_s ON t (s);
    CREATE INDEX t_bits ON t (($s.binary_quantize(v)::bit(3)));
    CREATE INDEX t_h ON t (h);
    CREATE INDEX t_v_half ON t ((v::$s.halfvec(3)));
    CREATE INDEX t_ivf_half ON t USING gpu_ivfpq ((v::$s.halfvec(3)) $s.halfvec_l2_ops)
      WITH (lists = 4, m = 3, nbits = 4);
    CREATE INDEX t_ivf_bits ON t USING gpu_ivfpq (($s.binary_quantize(v)::bit(3)) $s.bit_hamming_ops)
      WITH (lists = 4, m = 3, nbits = 4);
    CREATE VIEW t_view AS
      SELECT id, h OPERATOR($s.||) v::$s.halfvec AS hv, v OPERATOR($s.||) v AS vv,
             h OPERATOR($s.<->) '[1,1,1]'::$s.halfvec AS d
      FROM t;"
}

# queries_agree DB SRC S: the same answers in both (the view's too), the
# indexes valid in DB, the btree indexes on sparsevec, halfvec and
# v::halfvec(3) used for equality, and the CHECK on halfvec kept.
queries_agree() {
  local db=$1 src=$2 s=$3
  same_text "$src" "$db" "SET enable_seqscan = off;
    SELECT count(*) FROM t WHERE s OPERATOR($s.=) '{2:2,4:2,5:1}/5'::$s.sparsevec;
    SELECT count(*) FROM t WHERE $s.binary_quantize(v)::bit(3) = B'101';
    SELECT string_agg(id::text, ',' ORDER BY id) FROM (SELECT id FROM t WHERE s IS NOT NULL
      ORDER BY s OPERATOR($s.<->) '{1:1,4:1}/5'::$s.sparsevec, id LIMIT 5) q;
    SELECT string_agg(id::text, ',' ORDER BY id) FROM (SELECT id FROM t WHERE b IS NOT NULL
      ORDER BY b OPERATOR($s.<~>) B'110', id LIMIT 5) q;
    SELECT count(*) FROM t WHERE h OPERATOR($s.=) '[1,0.1,-6]'::$s.halfvec;
    SELECT count(*) FROM t WHERE v::$s.halfvec(3) OPERATOR($s.=) '[0,-1,1]'::$s.halfvec;
    SELECT string_agg(id::text, ',' ORDER BY id) FROM (SELECT id FROM t WHERE h IS NOT NULL
      ORDER BY h OPERATOR($s.<->) '[1,0.2,-3]'::$s.halfvec, id LIMIT 5) q;
    SELECT string_agg(id::text || ':' || hv::text || ':' || vv::text || ':' || d::text, ' ' ORDER BY id)
      FROM t_view WHERE id < 8;
    SET gknn.ivfpq_exact = on;
    SELECT string_agg(id::text, ',') FROM (SELECT id FROM t
      ORDER BY v::$s.halfvec(3) OPERATOR($s.<->) '[1,0.5,-2]'::$s.halfvec(3) LIMIT 7) q;
    SELECT string_agg(id::text, ',') FROM (SELECT id FROM t
      ORDER BY $s.binary_quantize(v)::bit(3) OPERATOR($s.<~>) B'110' LIMIT 7) q;" &&
    equal "t_bits,t_h,t_ivf_bits,t_ivf_half,t_pkey,t_s,t_v_half" "$db" "SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_index i
      JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 't'::regclass AND i.indisvalid" &&
    uses_index "$db" t_s "SELECT id FROM t WHERE s OPERATOR($s.=) '{2:2,4:2,5:1}/5'::$s.sparsevec" &&
    uses_index "$db" t_h "SELECT id FROM t WHERE h OPERATOR($s.=) '[1,0.1,-6]'::$s.halfvec" &&
    uses_index "$db" t_v_half "SELECT id FROM t WHERE v::$s.halfvec(3) OPERATOR($s.=) '[0,-1,1]'::$s.halfvec" &&
    uses_index "$db" t_ivf_half "SELECT id FROM t
      ORDER BY v::$s.halfvec(3) OPERATOR($s.<->) '[1,0.5,-2]'::$s.halfvec(3) LIMIT 7" &&
    uses_index "$db" t_ivf_bits "SELECT id FROM t ORDER BY $s.binary_quantize(v)::bit(3) OPERATOR($s.<~>) B'110' LIMIT 7" &&
    check_violated "$db" "$s"
}

# uses_index DB INDEX QUERY: with sequential scans off, the plan uses INDEX.
uses_index() {
  sql "$1" -c "SET enable_seqscan = off; EXPLAIN (COSTS OFF) $3" | grep -qE "(using|on) $2(\$| on )" ||
    { echo "$3 does not use $2"; return 1; }
}

# check_violated DB S: the CHECK on l2_norm(h) came back and still bites.
check_violated() {
  local out
  out=$(sql "$1" -c "INSERT INTO t (id, h) VALUES (1000, '[65504,65504,65504]'::$2.halfvec)" 2>&1) &&
    { echo "the row went in: $out"; return 1; }
  echo "$out" | grep -q 'violates check constraint "t_h_check"' || { echo "$out"; return 1; }
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
    check "$fmt dump: every row equal bit for bit (COPY BINARY) (gknn in $s)" \
      same_binary "$SRC" "$dst" "SELECT id, v, s, big, b, vb, h, hbig, hs[1], hs[2] FROM t ORDER BY id"
    check "$fmt dump: every row equal as text (gknn in $s)" \
      same_text "$SRC" "$dst" "SELECT id, v, s, big, b, vb, h, hbig, hs FROM t ORDER BY id"
    check "$fmt dump: indexes valid and used, CHECK kept, queries and view answer the same (gknn in $s)" \
      queries_agree "$dst" "$SRC" "$s"
  done
done
"$PSQL" -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $SRC" \
  -c "DROP DATABASE IF EXISTS gknn_dump_custom_public" -c "DROP DATABASE IF EXISTS gknn_dump_plain_public" \
  -c "DROP DATABASE IF EXISTS gknn_dump_custom_gknn" -c "DROP DATABASE IF EXISTS gknn_dump_plain_gknn" >/dev/null
tap_end
