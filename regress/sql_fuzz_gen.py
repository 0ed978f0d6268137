#!/usr/bin/env python3
"""Writes the SQL fuzz suite's batches (regress/sql-fuzz.sh runs them).

Every SQL-callable gknn function, operator and aggregate is read from the
install script (extension/gknn--*.sql), so a new one is fuzzed without a
change here, and called with hostile arguments chosen by its argument types:
vectors of 0 and 16,001 dimensions built through every route (text, typmods,
array casts, subvector, the aggregate state functions, binary COPY), states
pgvector rejects, NULLs, extreme integers and typmods, NaN and infinities.
Each batch also builds a table with such rows (text, COPY BINARY files with
hostile payloads, "legacy" rows: datums older gknn versions could store, made
through a binary-coercible cast from bytea that only a superuser can create),
then a gpu_ivfpq and a gpu_graph index with random options, inserts, ordered scans, VACUUM,
REINDEX and GpuTopK plans over it.

Deterministic: the same seed writes the same batches. The batch-000-N files
are the corpus of known crashers (issue 16's reproduction first), one group
per file since a crash ends its psql session.

  sql_fuzz_gen.py --seed N --batches B --out DIR [--script extension/gknn--0.1.0.sql]

writes DIR/batch-*.sql (and the COPY files they read) and prints nothing.
"""
import argparse
import glob
import os
import random
import re
import struct

MAX_DIM = 16000

# ---------------------------------------------------------------------------
# The SQL surface, from the install script.


def bare_type(t):
    t = t.strip().replace("@extschema@.", "").replace("pg_catalog.", "")
    return re.sub(r"\s+", " ", t)


def split_args(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


def arg_type(a):
    """The type of one argument declaration: [mode] [name] type."""
    words = a.strip().split()
    if words and words[0] in ("IN", "OUT", "INOUT", "VARIADIC"):
        if words[0] == "OUT":
            return None
        words = words[1:]
    if len(words) >= 2 and not words[-1].endswith("]") and words[-2] in ("double",):
        return "double precision"
    return bare_type(words[-1])


def read_surface(script):
    text = open(script, encoding="utf-8").read()
    funcs = []
    for m in re.finditer(r"CREATE FUNCTION @extschema@\.(\w+)\((.*?)\)\s*RETURNS", text, re.S):
        types = [t for t in (arg_type(a) for a in split_args(m.group(2))) if t is not None]
        funcs.append((m.group(1), types))
    ops = []
    for m in re.finditer(
        r"CREATE OPERATOR @extschema@\.(\S+)\s*\(\s*LEFTARG\s*=\s*([^,]+),\s*RIGHTARG\s*=\s*([^,]+),", text
    ):
        ops.append((m.group(1), bare_type(m.group(2)), bare_type(m.group(3))))
    aggs = []
    for m in re.finditer(r"CREATE AGGREGATE @extschema@\.(\w+)\((.*?)\)", text):
        aggs.append((m.group(1), [bare_type(a) for a in split_args(m.group(2))]))
    opclasses = re.findall(r"CREATE OPERATOR CLASS @extschema@\.(\w+)\s+(?:DEFAULT\s+)?FOR TYPE "
                           r"(?:@extschema@|pg_catalog)\.(\w+) USING gpu_ivfpq", text)
    return funcs, ops, aggs, opclasses


# ---------------------------------------------------------------------------
# Values.


def lit(s):
    return "'" + s.replace("'", "''") + "'"


class Values:
    def __init__(self, rng, copy_dir):
        self.r = rng
        self.copy_dir = copy_dir
        self.ncopy = 0

    def pick(self, *options):
        return self.r.choice(options)

    def chance(self, p):
        return self.r.random() < p

    # -- numbers -------------------------------------------------------------
    def element(self):
        return self.pick("0", "1", "-1", "0.5", "-0", "1e-45", "3e38", "-3e38", "1e30", "123.456",
                         str(self.r.randint(-100, 100)), str(round(self.r.uniform(-10, 10), 3)))

    def int4(self):
        return self.pick("0", "1", "-1", "2", "3", "4", "16000", "16001", "32767", "32768", "65536",
                         "2147483647", "(-2147483648)", "NULL", str(self.r.randint(-5, 20)))

    # -- vectors -------------------------------------------------------------
    def vector_text(self, dim):
        return "[" + ",".join(self.element() for _ in range(dim)) + "]"

    def vector_valid(self, dim):
        return lit(self.vector_text(dim)) + "::vector"

    def vector_bad_text(self):
        return self.pick(
            "'[]'", "'['", "']'", "'[1,,2]'", "'[1,2'", "'1,2'", "'[1] x'", "'[nan]'", "'[NaN,1]'", "'[inf]'",
            "'[-Infinity]'", "'[1e39]'", "'[-1e39]'", "'[1e-50]'", "'{1,2}'", "' [ 1 , 2 ] '", "''", "'[ ]'",
            "'[1;2]'", "'[0x10]'", "'[1e]'", "'[--1]'", "'[1,2]]'",
        ) + "::vector"

    def zero_dim_route(self):
        """An expression that would be a vector of 0 dimensions."""
        return self.pick(
            "'[]'::vector",
            "ARRAY[]::int[]::vector", "ARRAY[]::real[]::vector", "ARRAY[]::float8[]::vector",
            "ARRAY[]::numeric[]::vector",
            "vector_avg('{1}')", "vector_avg('{5}')",
            "subvector('[1,2,3]', 1, 0)", "subvector('[1,2,3]', 4, 1)", "subvector('[1,2,3]', -5, 3)",
            "subvector('[1,2,3]', 2147483647, 1)", "subvector('[1,2,3]', 1, -1)",
            "l2_normalize(vector_avg('{1}'))",
            "(SELECT avg(v) FROM unnest(ARRAY[]::vector[]) v)",
            "vector_in('[]', 0, -1)",
            "'[1,2]'::vector(0)",
        )

    def big_dim_route(self, dim=MAX_DIM + 1):
        """An expression that would be a vector of `dim` (> 16000) dimensions."""
        return self.pick(
            f"vector_avg(ARRAY(SELECT 1::float8 FROM generate_series(0, {dim})))",
            f"vector_avg(vector_accum('{{0}}', array_fill(1, ARRAY[{dim}])::vector))",
            f"vector_avg(vector_combine('{{0}}', ARRAY(SELECT 1::float8 FROM generate_series(0, {dim}))))",
            f"array_fill(1, ARRAY[{dim}])::vector",
            f"array_fill(1.5::real, ARRAY[{dim}])::vector",
            f"array_fill(2::float8, ARRAY[{dim}])::vector",
            f"array_fill(1::numeric, ARRAY[{dim}])::vector",
            f"('[' || array_to_string(array_fill(1, ARRAY[{dim}]), ',') || ']')::vector",
            f"subvector(array_fill(1, ARRAY[{MAX_DIM}])::vector, 1, {dim})",
            f"(array_fill(1, ARRAY[{MAX_DIM}])::vector || '[1]'::vector)",
            f"array_fill(1, ARRAY[{MAX_DIM}])::vector(16001)",
            f"vector_in(('[' || repeat('1,', {dim - 1}) || '1]')::cstring, 0, {dim})",
        )

    def legacy(self):
        """A datum older gknn versions could store (avg made 0, >16000 and
        int16-wrapped dimensions, and NaN), through the bytea cast."""
        kind = self.r.randrange(6)
        if kind == 0:
            dim, n = 0, 0
        elif kind == 1:
            dim, n = MAX_DIM + 1, MAX_DIM + 1
        elif kind == 2:
            dim, n = 32767, 32767
        elif kind == 3:
            n = self.pick(40000, 65535)
            dim = n - 65536  # InitVector's int16 wrapped
        elif kind == 4:
            dim = n = self.pick(1, 2, 3, 4)
            return self.legacy_expr(dim, [self.pick(float("nan"), float("inf"), 1.0) for _ in range(n)])
        else:
            dim = n = self.pick(2, 3, 4)
            return self.legacy_expr(dim, [1.0] * n, unused=self.pick(1, -1, 255))
        return self.legacy_expr(dim, None, n=n)

    def legacy_expr(self, dim, values, n=0, unused=0):
        head = struct.pack("<hh", dim, unused).hex()
        if values is None:
            body = f"decode(repeat('0000803f', {n}), 'hex')" if n else "''::bytea"
            return f"('\\x{head}'::bytea || {body})::vector"
        return "'\\x" + head + b"".join(struct.pack("<f", v) for v in values).hex() + "'::bytea::vector"

    def hostile_vector(self, dim):
        """A row for a table of `dim`-dimension vectors that should not be there."""
        return self.r.choice([self.zero_dim_route, self.big_dim_route, self.legacy, self.legacy,
                              self.vector_bad_text, lambda: self.vector_valid(self.pick(1, dim + 1, 2 * dim))])()

    def vector(self, dim=None):
        d = dim if dim is not None else self.pick(1, 2, 3, 4, 8)
        k = self.r.random()
        if k < 0.55:
            return self.vector_valid(d)
        if k < 0.62:
            return "NULL::vector"
        if k < 0.70:
            return self.vector_bad_text()
        if k < 0.78:
            return self.zero_dim_route()
        if k < 0.84:
            return self.big_dim_route(self.pick(MAX_DIM + 1, MAX_DIM + 1, 32767))
        if k < 0.92:
            return self.legacy()
        return self.vector_valid(self.pick(1, 2, 3, 5, 16, 100))

    # -- aggregate states (float8[]) -----------------------------------------
    def state(self):
        return self.pick(
            "'{0}'", "'{1}'", "'{0,0}'", "'{0,0,0,0}'", "'{1,2,3}'", "'{2,2,4,6}'", "'{}'", "'{NULL}'",
            "'{NULL,2,4}'", "'{1,NULL}'", "'{{1,2}}'", "'{{2,2,4,6}}'", "'[0:1]={1,2}'", "'{-1,2}'",
            "'{0.5,2}'", "'{NaN,1}'", "'{Infinity,1}'", "'{-Infinity,1}'", "'{1,NaN}'", "'{1,Infinity}'",
            "'{1,1e308}'", "'{2,1.7e308,1.7e308}'", "'{0,5}'", "'{9007199254740993,1}'", "'{1e300,1}'",
            f"ARRAY(SELECT 1::float8 FROM generate_series(0, {MAX_DIM}))",
            f"ARRAY(SELECT 1::float8 FROM generate_series(0, {MAX_DIM + 1}))",
            f"ARRAY(SELECT 1::float8 FROM generate_series(1, {MAX_DIM + 1}))",
            "(SELECT array_agg(n)::float8[] FROM generate_series(1, 16002) n)",
            "vector_accum('{0}', '[1,2,3]')",
            "NULL::float8[]",
        ) + ("" if self.chance(0.5) else "::float8[]")

    # -- other argument types ------------------------------------------------
    def array(self, elem):
        opts = ["'{}'", "'{1,2,3}'", "'{NULL}'", "'{1,NULL}'", "'{{1,2},{3,4}}'", "'[2:3]={1,2}'",
                f"array_fill(1, ARRAY[{MAX_DIM + 1}])", f"array_fill(1, ARRAY[{MAX_DIM}])", "'{7}'",
                "NULL"]
        if elem in ("real", "double precision", "numeric"):
            opts += ["'{NaN}'", "'{Infinity}'", "'{-Infinity,1}'", "'{1e39}'", "'{1e-50}'", "'{3.4e38,1}'"]
        return self.pick(*opts) + "::" + elem + "[]"

    def typmod_array(self):
        return self.pick("'{3}'", "'{0}'", "'{-1}'", "'{16000}'", "'{16001}'", "'{2147483647}'", "'{1,2}'",
                         "'{}'", "'{NULL}'", "'{a}'", "'{{1}}'") + "::cstring[]"

    def cstring(self):
        inner = self.pick(self.vector_text(self.pick(1, 2, 3)), "[]", "[1,2", "[nan]", "", "[1e39]",
                          "[" + ",".join(["1"] * (MAX_DIM + 1)) + "]" if self.chance(0.05) else "[1]")
        return lit(inner) + "::cstring"

    def regclass(self, ctx):
        opts = ["'pg_class'::regclass", "0::regclass", "NULL::regclass", "4294967295::oid::regclass"]
        opts += [lit(n) + "::regclass" for n in ctx.get("relations", [])]
        return self.pick(*opts)

    def value(self, t, ctx):
        base = t.rstrip("[]") if t.endswith("[]") else t
        if t == "vector":
            return self.vector(ctx.get("dim"))
        if t in ("integer", "int4"):
            return self.int4()
        if t in ("bigint", "int8"):
            return self.pick("0", "-1", "9223372036854775807", "(-9223372036854775808)", "NULL::int8")
        if t in ("boolean", "bool"):
            return self.pick("true", "false", "NULL::bool")
        if t in ("float8[]", "double precision[]"):
            return "(" + self.state() + ")::float8[]" if self.chance(0.7) else self.array("double precision")
        if t.endswith("[]") and base in ("int4", "integer", "float4", "real", "numeric", "float8",
                                         "double precision"):
            names = {"int4": "int", "integer": "int", "float4": "real", "real": "real", "numeric": "numeric",
                     "float8": "double precision", "double precision": "double precision"}
            return self.array(names[base])
        if t == "cstring":
            return self.cstring()
        if t == "cstring[]":
            return self.typmod_array()
        if t == "oid":
            return self.pick("0::oid", "1::oid", "4294967295::oid", "'vector'::regtype::oid",
                             "'pg_class'::regclass::oid")
        if t == "regclass":
            return self.regclass(ctx)
        if t == "text":
            return self.pick("''", "'x'", "NULL::text")
        # A type this generator does not know (another vector type): NULL, or
        # vector-like text through its input function.
        return self.pick("NULL", lit(self.vector_text(self.pick(1, 2, 3))), "'[]'", "'{1:1}/2'",
                         "'{}/0'", "'101'") + "::" + t

    # -- COPY BINARY files ---------------------------------------------------
    def copy_payload(self):
        """One field of binary COPY for a vector column: (bytes or None)."""
        k = self.r.randrange(13)
        f = lambda vs: b"".join(struct.pack(">f", v) for v in vs)
        if k == 0:
            return struct.pack(">hh", 0, 0)
        if k == 1:
            return struct.pack(">hh", MAX_DIM + 1, 0) + f([1.0] * (MAX_DIM + 1))
        if k == 2:
            return struct.pack(">hh", -1, 0) + f([1.0])
        if k == 3:
            return struct.pack(">hh", 5, 0) + f([1.0, 2.0])  # dim larger than the payload
        if k == 4:
            return struct.pack(">hh", 2, 0) + f([1.0, 2.0, 3.0])  # payload larger than dim
        if k == 5:
            return struct.pack(">hh", 3, self.pick(1, -1, 0x7FFF)) + f([1.0, 2.0, 3.0])
        if k == 6:
            return struct.pack(">hh", 3, 0) + f([1.0, float("nan"), 2.0])
        if k == 7:
            return struct.pack(">hh", 3, 0) + f([float(self.pick("inf", "-inf")), 1.0, 2.0])
        if k == 8:
            return b"\x00"  # truncated header
        if k == 9:
            return struct.pack(">hh", 32767, 0) + f([1.0] * 4)
        if k == 10:
            return struct.pack(">hh", -32768, 0)
        if k == 11:
            return None  # NULL
        d = self.pick(1, 2, 3, 4)
        return struct.pack(">hh", d, 0) + f([float(self.r.randint(-9, 9)) for _ in range(d)])

    def copy_file(self, batch, payload):
        """A binary COPY file of one row of one column; returns its path."""
        self.ncopy += 1
        path = os.path.join(self.copy_dir, f"b{batch:03d}-{self.ncopy:04d}.copy")
        with open(path, "wb") as fh:
            fh.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0))
            fh.write(struct.pack(">h", 1))
            if payload is None:
                fh.write(struct.pack(">i", -1))
            else:
                fh.write(struct.pack(">i", len(payload)) + payload)
            fh.write(struct.pack(">h", -1))
        return os.path.abspath(path)


# ---------------------------------------------------------------------------
# Statements.


class Batch:
    def __init__(self, n, rng, vals, surface):
        self.n = n
        self.r = rng
        self.v = vals
        self.funcs, self.ops, self.aggs, self.opclasses = surface
        self.out = []

    def emit(self, sql):
        self.out.append(sql.rstrip().rstrip(";") + ";")

    def meta(self, line):
        self.out.append(line)

    def stmt_ctx(self, ctx):
        """Most statements use one dimension for their valid vectors (so
        that they get past the dimension checks), a few mix them."""
        local = dict(ctx)
        if "dim" not in ctx or self.v.chance(0.3):
            local["dim"] = self.v.pick(1, 2, 3, 4, 8) if self.v.chance(0.8) else None
        return local

    def call(self, ctx):
        name, types = self.r.choice(self.funcs)
        local = self.stmt_ctx(ctx)
        args = ", ".join(self.v.value(t, local) for t in types)
        self.emit(f"SELECT {name}({args})")

    def operator(self, ctx):
        op, left, right = self.r.choice(self.ops)
        local = self.stmt_ctx(ctx)
        self.emit(f"SELECT ({self.v.value(left, local)}) OPERATOR({op}) ({self.v.value(right, local)})")

    def aggregate(self, ctx):
        name, types = self.r.choice(self.aggs)
        local = self.stmt_ctx(ctx)
        rows = ", ".join(f"({self.v.value(types[0], local)})" for _ in range(self.r.randint(1, 4)))
        self.emit(f"SELECT {name}(x) FROM (VALUES {rows}) t(x)")

    def state_chain(self, ctx):
        s = self.v.state()
        local = self.stmt_ctx(ctx)
        for _ in range(self.r.randint(1, 3)):
            s = self.r.choice([f"vector_accum({s}, {self.v.vector(local.get('dim'))})",
                               f"vector_combine({s}, {self.v.state()})"])
        self.emit(f"SELECT vector_avg({s})")

    def typmod(self, ctx):
        t = self.v.pick("3", "0", "-1", "16000", "16001", "2147483647", "1", "1,2", "'a'")
        self.emit(f"SELECT {self.v.vector_valid(3)}::vector({t})")

    def table_rows(self, table, dim, hostile):
        """INSERTs (and binary COPYs) of mostly `dim`-dimension rows, in a
        random order (a hostile row may be the first a scan sees)."""
        stmts = []
        for _ in range(self.r.randint(1, 3)):
            n = self.r.randint(5, 60)
            stmts.append(f"INSERT INTO {table} (id, f, v) SELECT i, (i % 7) - 3.5, ARRAY(SELECT ((i * 37 + j * "
                         f"11) % 101) / 10.0 FROM generate_series(1, {dim}) j)::float8[]::vector FROM "
                         f"generate_series({self.r.randint(1, 1000)}, {self.r.randint(1000, 1100)}) i "
                         f"LIMIT {n};")
        stmts.append(f"INSERT INTO {table} (id, f, v) VALUES (-1, NULL, NULL);")
        for _ in range(self.r.randint(0, 4) if hostile else 0):
            stmts.append(f"INSERT INTO {table} (id, v) VALUES ({self.v.int4()}, {self.v.hostile_vector(dim)});")
        for _ in range(self.r.randint(0, 3) if hostile else 0):
            stmts.append(f"INSERT INTO {table} (id, v) VALUES (-2, {self.v.legacy()});")
        for _ in range(self.r.randint(0, 3) if hostile else 1):
            path = self.v.copy_file(self.n, self.v.copy_payload())
            stmts.append(f"\\copy {table} (v) FROM '{path}' WITH (FORMAT binary)")
        self.r.shuffle(stmts)
        self.out.extend(stmts)

    def ivfpq(self, table, dim, ctx):
        # The indexed value: the column, or an expression of it (halfvec,
        # bit strings, vector functions), each with its operator classes.
        kinds = [("v", "vector", "{q}")]
        if any(typ == "halfvec" for _, typ in self.opclasses):
            kinds.append(("(v::halfvec)", "halfvec", "{q}::halfvec"))
            kinds.append((f"(v::halfvec({dim}))", "halfvec", f"{{q}}::halfvec({dim})"))
        if any(typ == "bit" for _, typ in self.opclasses):
            kinds.append((f"(binary_quantize(v)::bit({dim}))", "bit", f"binary_quantize({{q}})::bit({dim})"))
        kinds.append(("(l2_normalize(v))", "vector", "{q}"))
        indexed, typ, query_of = self.r.choice(kinds)
        opclasses = [name for name, t in self.opclasses if t == typ]
        if not opclasses:
            return
        opclass = self.r.choice(opclasses)
        expr = indexed[1:-1] if indexed.startswith("(") else indexed
        opts = []
        if self.v.chance(0.8):
            opts.append(f"lists = {self.v.pick(1, 2, 4, 16, 100, 1000, 1048576)}")
        if self.v.chance(0.6):
            opts.append(f"m = {self.v.pick(1, 2, 3, 4, 8, dim, dim + 1, 16000)}")
        if self.v.chance(0.4):
            opts.append(f"nbits = {self.v.pick(4, 5, 8, 3, 9)}")
        if self.v.chance(0.3):
            opts.append(f"training_sample = {self.v.pick(0, 1, 2, 50, 10000000)}")
        if self.v.chance(0.3):
            opts.append(f"kmeans_iters = {self.v.pick(1, 2, 50, 0)}")
        with_ = f" WITH ({', '.join(opts)})" if opts else ""
        conc = "CONCURRENTLY " if self.v.chance(0.15) else ""
        self.emit(f"CREATE INDEX {conc}{table}_idx ON {table} USING gpu_ivfpq ({indexed} {opclass}){with_}")
        ctx["relations"] = [f"{table}_idx", table, f"{table}_btree"]
        self.emit(f"SELECT * FROM gknn_ivfpq_info('{table}_idx')")
        self.table_rows(table, dim, self.v.chance(0.5))
        ops = [op for op, l, r in self.ops if op in ("<->", "<#>", "<=>", "<+>") and l == typ]
        if typ == "bit":
            ops = ["<~>"]
        for _ in range(self.r.randint(2, 6)):
            op = self.r.choice(ops or ["<->"])
            limit = self.v.pick("1", "5", "10", "0", "100000", "9223372036854775807", "NULL", "ALL", "-1")
            offset = self.v.pick("", " OFFSET 3", " OFFSET 9223372036854775807", " OFFSET -1")
            self.emit("SET enable_seqscan = off")
            self.emit(f"SET gknn.ivfpq_probes = {self.v.pick(1, 10, 1048576)}")
            self.emit(f"SET gknn.ivfpq_refine = {self.v.pick(1, 10, 100000)}")
            query = query_of.format(q=self.v.vector(dim))
            self.emit(f"SELECT id FROM {table} ORDER BY {expr} {op} {query} LIMIT {limit}{offset}")
            self.emit("RESET enable_seqscan")
        self.emit(f"DELETE FROM {table} WHERE id % 3 = 0")
        self.emit(f"VACUUM {table}")
        if self.v.chance(0.5):
            self.emit(f"REINDEX INDEX {table}_idx")
        self.emit(f"SELECT * FROM gknn_ivfpq_info('{table}_idx')")

    def graph(self, table, dim, ctx):
        # gpu_graph on the column (vector operator classes only), hostile
        # options, rows, scans, deletes, VACUUM, REINDEX.
        opclass = self.v.pick("vector_l2_ops", "vector_ip_ops", "vector_cosine_ops")
        opts = []
        if self.v.chance(0.8):
            opts.append(f"degree = {self.v.pick(2, 4, 8, 32, 128, 3, 0, 130)}")
        if self.v.chance(0.3):
            opts.append(f"intermediate_degree = {self.v.pick(0, 2, 8, 64, 512, 513)}")
        with_ = f" WITH ({', '.join(opts)})" if opts else ""
        conc = "CONCURRENTLY " if self.v.chance(0.15) else ""
        self.emit(f"CREATE INDEX {conc}{table}_graph ON {table} USING gpu_graph (v {opclass}){with_}")
        ctx["relations"] = [f"{table}_graph", table, f"{table}_btree"]
        self.emit(f"SELECT * FROM gknn_graph_info('{table}_graph')")
        self.table_rows(table, dim, self.v.chance(0.5))
        op = {"vector_l2_ops": "<->", "vector_ip_ops": "<#>", "vector_cosine_ops": "<=>"}[opclass]
        for _ in range(self.r.randint(2, 5)):
            limit = self.v.pick("1", "5", "10", "0", "100000", "9223372036854775807", "NULL", "ALL", "-1")
            offset = self.v.pick("", " OFFSET 3", " OFFSET 9223372036854775807", " OFFSET -1")
            qual = self.v.pick("", " WHERE id % 7 = 1", " WHERE f > 0")
            self.emit("SET enable_seqscan = off")
            self.emit(f"SET gknn.graph_ef_search = {self.v.pick(1, 10, 40, 10000)}")
            self.emit(f"SELECT id FROM {table}{qual} ORDER BY v {op} {self.v.vector(dim)} LIMIT {limit}{offset}")
            self.emit("RESET enable_seqscan")
            self.emit("RESET gknn.graph_ef_search")
        self.emit(f"DELETE FROM {table} WHERE id % 4 = 1")
        self.emit(f"VACUUM {table}")
        self.table_rows(table, dim, self.v.chance(0.5))
        if self.v.chance(0.5):
            self.emit(f"REINDEX INDEX {table}_graph")
        self.emit(f"SELECT * FROM gknn_graph_info('{table}_graph')")
        self.emit(f"DROP INDEX IF EXISTS {table}_graph")

    def topk(self, table, dim):
        self.emit("SET gknn.topk_min_rows = 0")
        if self.v.chance(0.3):
            self.emit(f"SET gknn.topk_cache_mb = {self.v.pick(1, 64)}")
        for _ in range(self.r.randint(1, 4)):
            key = self.r.choice([f"v <-> {self.v.vector(dim)}", f"v <#> {self.v.vector(dim)}",
                                 "f / (id % 5)", "id * 2147483647", "sqrt(f)", "ln(f)", "f ^ id",
                                 f"v <=> {self.v.vector(dim)} DESC", "id % 0"])
            qual = self.r.choice(["", " WHERE f > 0", " WHERE 1 / (id - 3) > 0", " WHERE v IS NOT NULL",
                                  f" WHERE vector_dims(v) = {dim}"])
            limit = self.v.pick("3", "0", "NULL", "-1", "100001", "2147483647")
            self.emit(f"SELECT id FROM {table}{qual} ORDER BY {key} LIMIT {limit}")
        self.emit("RESET gknn.topk_min_rows")
        self.emit("RESET gknn.topk_cache_mb")

    def table_scenario(self, ctx):
        table = f"fz{self.n}"
        dim = self.v.pick(2, 3, 4, 8)
        ctx["dim"] = dim
        typmod = self.v.pick("", "", f"({dim})")
        self.emit(f"DROP TABLE IF EXISTS {table}")
        unlogged = "UNLOGGED " if self.v.chance(0.15) else ""
        self.emit(f"CREATE {unlogged}TABLE {table} (id int, f float8, v vector{typmod})")
        hostile = self.v.chance(0.6)
        self.table_rows(table, dim, hostile)
        self.emit(f"CREATE INDEX {table}_btree ON {table} (v)")
        ctx["relations"] = [table, f"{table}_btree"]
        self.emit(f"SELECT avg(v), sum(v), count(*) FROM {table}")
        self.ivfpq(table, dim, ctx)
        self.graph(table, dim, ctx)
        self.topk(table, dim)
        self.emit(f"DROP TABLE {table}")

    def build(self):
        ctx = {}
        self.meta(f"-- batch {self.n}")
        steps = [self.call] * 6 + [self.operator] * 3 + [self.aggregate, self.state_chain, self.typmod]
        for _ in range(self.r.randint(20, 35)):
            self.r.choice(steps)(ctx)
        self.table_scenario(ctx)
        for _ in range(self.r.randint(5, 10)):
            self.r.choice(steps)(ctx)
        return self.out


# Known crashers, run first, each group in a batch of its own (a crash ends
# its psql session).
CORPUS = [
    # gpu_graph over the rows an older gknn stored (0 then 16001 dimensions),
    # then an empty index given such rows and queries.
    "CREATE TABLE z (id int, v vector)",
    "INSERT INTO z VALUES (1, '\\x00000000'::bytea::vector), "
    "(2, ('\\x813e0000'::bytea || decode(repeat('0000803f', 16001), 'hex'))::vector)",
    "CREATE INDEX ON z USING gpu_graph (v vector_l2_ops)",
    "DELETE FROM z",
    "INSERT INTO z VALUES (3, '[1,2,3,4]')",
    "CREATE INDEX z_idx ON z USING gpu_graph (v vector_l2_ops)",
    "INSERT INTO z VALUES (4, '\\x00000000'::bytea::vector)",
    "INSERT INTO z VALUES (5, ('\\x813e0000'::bytea || decode(repeat('0000803f', 16001), 'hex'))::vector)",
    "SET enable_seqscan = off",
    "SELECT id FROM z ORDER BY v <-> '\\x00000000'::bytea::vector LIMIT 1",
    "SELECT id FROM z ORDER BY v <-> ('\\xffff0000'::bytea || decode(repeat('0000803f', 4), 'hex'))::vector LIMIT 1",
    "SELECT * FROM gknn_graph_info('z_idx')",
    "DROP TABLE z",
    None,
    # Issue 16's reproduction.
    "CREATE TABLE z (id int, v vector)",
    "INSERT INTO z SELECT 1, vector_avg('{1}') UNION ALL "
    "SELECT 2, vector_avg(array_agg(n)) FROM generate_series(1, 16002) n",
    "CREATE INDEX ON z USING gpu_ivfpq (v vector_l2_ops)",
    "DROP TABLE z",
    None,
    # The same rows as an older gknn stored them (0 then 16001 dimensions).
    "CREATE TABLE z (id int, v vector)",
    "INSERT INTO z VALUES (1, '\\x00000000'::bytea::vector), "
    "(2, ('\\x813e0000'::bytea || decode(repeat('0000803f', 16001), 'hex'))::vector)",
    "CREATE INDEX ON z USING gpu_ivfpq (v vector_l2_ops)",
    "INSERT INTO z VALUES (3, '[1,2,3,4]')",
    "CREATE INDEX ON z USING gpu_ivfpq (v vector_l2_ops)",
    "DROP TABLE z",
    None,
    # An empty index, then a 0-dimension row.
    "CREATE TABLE z (id int, v vector)",
    "CREATE INDEX z_idx ON z USING gpu_ivfpq (v vector_l2_ops)",
    "INSERT INTO z VALUES (1, '\\x00000000'::bytea::vector)",
    "INSERT INTO z VALUES (2, ('\\x409c0000'::bytea || decode(repeat('0000803f', 40000), 'hex'))::vector)",
    "SELECT * FROM gknn_ivfpq_info('z_idx')",
    "DROP TABLE z",
    None,
    # Vectors whose int16 dim wrapped negative, through functions that size
    # their result from it (VECTOR_SIZE(-2) was 0 bytes: SIGSEGV).
    "CREATE TABLE z AS SELECT l2_normalize(('\\xfeff0000'::bytea || decode(repeat('0000803f', 65534), "
    "'hex'))::vector) AS v",
    "DROP TABLE IF EXISTS z",
    "SELECT vector_dims(('\\xfeff0000'::bytea || decode(repeat('0000803f', 65534), 'hex'))::vector + "
    "('\\xfeff0000'::bytea || decode(repeat('0000803f', 65534), 'hex'))::vector)",
    "SELECT vector_accum('{0}', ('\\xffff0000'::bytea || decode(repeat('0000803f', 65535), 'hex'))::vector)",
    None,
    # GpuTopK with a query vector of a wrapped dimension (memcpy of a
    # negative size: SIGSEGV).
    "CREATE TABLE z AS SELECT i AS id, '[1,2]'::vector AS v FROM generate_series(1, 50) i",
    "SET gknn.topk_min_rows = 0",
    "SET enable_sort = off",
    "SELECT id FROM z ORDER BY v <-> (SELECT ('\\xffff0000'::bytea || decode(repeat('0000803f', 65535), "
    "'hex'))::vector) LIMIT 3",
    "RESET gknn.topk_min_rows",
    "RESET enable_sort",
    "DROP TABLE z",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--out", required=True)
    here = os.path.dirname(os.path.abspath(__file__))
    scripts = sorted(glob.glob(os.path.join(here, "..", "extension", "gknn--*.sql")))
    ap.add_argument("--script", default=scripts[-1] if scripts else None)
    a = ap.parse_args()
    funcs, ops, aggs, opclasses = read_surface(a.script)
    # SQL cannot pass an `internal` argument: vector_recv is reached through
    # COPY BINARY and the access method handler through CREATE INDEX.
    funcs = [f for f in funcs if "internal" not in f[1]]
    surface = (funcs, ops, aggs, opclasses)
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(a.seed)
    vals = Values(rng, a.out)
    groups = [[]]
    for stmt in CORPUS:
        if stmt is None:
            groups.append([])
        else:
            groups[-1].append(stmt)
    for g, stmts in enumerate(groups, 1):
        with open(os.path.join(a.out, f"batch-000-{g}.sql"), "w", encoding="utf-8") as fh:
            fh.write(f"-- known crashers, group {g}\n" + "".join(s + ";\n" for s in stmts))
    for n in range(1, a.batches + 1):
        lines = Batch(n, rng, vals, surface).build()
        with open(os.path.join(a.out, f"batch-{n:03d}.sql"), "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
