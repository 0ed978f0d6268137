-- gknn 0.1.0 install script. Schema-safe: every object is created in and
-- referenced through @extschema@ (or pg_catalog), so the extension can live
-- in its own schema beside another extension's `vector` type.

\echo Use "CREATE EXTENSION gknn" to load this file. \quit

-- The vector type (pgvector's text, binary and on-disk formats) ----------

CREATE TYPE @extschema@.vector;

CREATE FUNCTION @extschema@.vector_in(pg_catalog.cstring, pg_catalog.oid, pg_catalog.int4)
  RETURNS @extschema@.vector AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_out(@extschema@.vector)
  RETURNS pg_catalog.cstring AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_typmod_in(pg_catalog.cstring[])
  RETURNS pg_catalog.int4 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_recv(pg_catalog.internal, pg_catalog.oid, pg_catalog.int4)
  RETURNS @extschema@.vector AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_send(@extschema@.vector)
  RETURNS pg_catalog.bytea AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE @extschema@.vector (
  INPUT = @extschema@.vector_in,
  OUTPUT = @extschema@.vector_out,
  TYPMOD_IN = @extschema@.vector_typmod_in,
  RECEIVE = @extschema@.vector_recv,
  SEND = @extschema@.vector_send,
  STORAGE = external
);

-- Functions --------------------------------------------------------------

CREATE FUNCTION @extschema@.l2_distance(@extschema@.vector, @extschema@.vector)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.inner_product(@extschema@.vector, @extschema@.vector)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.cosine_distance(@extschema@.vector, @extschema@.vector)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.l1_distance(@extschema@.vector, @extschema@.vector)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_dims(@extschema@.vector)
  RETURNS pg_catalog.int4 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_norm(@extschema@.vector)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.l2_normalize(@extschema@.vector)
  RETURNS @extschema@.vector AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.subvector(@extschema@.vector, pg_catalog.int4, pg_catalog.int4)
  RETURNS @extschema@.vector AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Operator support (not part of the documented API)
CREATE FUNCTION @extschema@.vector_l2_squared_distance(@extschema@.vector, @extschema@.vector)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_negative_inner_product(@extschema@.vector, @extschema@.vector)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_add(@extschema@.vector, @extschema@.vector)
  RETURNS @extschema@.vector AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_sub(@extschema@.vector, @extschema@.vector)
  RETURNS @extschema@.vector AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_mul(@extschema@.vector, @extschema@.vector)
  RETURNS @extschema@.vector AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_lt(@extschema@.vector, @extschema@.vector)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_le(@extschema@.vector, @extschema@.vector)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_eq(@extschema@.vector, @extschema@.vector)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_ne(@extschema@.vector, @extschema@.vector)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_ge(@extschema@.vector, @extschema@.vector)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_gt(@extschema@.vector, @extschema@.vector)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_cmp(@extschema@.vector, @extschema@.vector)
  RETURNS pg_catalog.int4 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Aggregates: avg accumulates in float8 and combines across parallel workers.
CREATE FUNCTION @extschema@.vector_accum(pg_catalog.float8[], @extschema@.vector)
  RETURNS pg_catalog.float8[] AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_combine(pg_catalog.float8[], pg_catalog.float8[])
  RETURNS pg_catalog.float8[] AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_avg(pg_catalog.float8[])
  RETURNS @extschema@.vector AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE AGGREGATE @extschema@.avg(@extschema@.vector) (
  SFUNC = @extschema@.vector_accum,
  STYPE = pg_catalog.float8[],
  FINALFUNC = @extschema@.vector_avg,
  COMBINEFUNC = @extschema@.vector_combine,
  INITCOND = '{0}',
  PARALLEL = SAFE
);

CREATE AGGREGATE @extschema@.sum(@extschema@.vector) (
  SFUNC = @extschema@.vector_add,
  STYPE = @extschema@.vector,
  COMBINEFUNC = @extschema@.vector_add,
  PARALLEL = SAFE
);

-- Casts ----------------------------------------------------------------------

CREATE FUNCTION @extschema@.vector(@extschema@.vector, pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.vector AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.array_to_vector(pg_catalog.int4[], pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.vector AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.array_to_vector(pg_catalog.float4[], pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.vector AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.array_to_vector(pg_catalog.float8[], pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.vector AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.array_to_vector(pg_catalog.numeric[], pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.vector AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_to_float4(@extschema@.vector, pg_catalog.int4, pg_catalog.bool)
  RETURNS pg_catalog.float4[] AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE CAST (@extschema@.vector AS @extschema@.vector)
  WITH FUNCTION @extschema@.vector(@extschema@.vector, pg_catalog.int4, pg_catalog.bool) AS IMPLICIT;
CREATE CAST (pg_catalog.int4[] AS @extschema@.vector)
  WITH FUNCTION @extschema@.array_to_vector(pg_catalog.int4[], pg_catalog.int4, pg_catalog.bool) AS ASSIGNMENT;
CREATE CAST (pg_catalog.float4[] AS @extschema@.vector)
  WITH FUNCTION @extschema@.array_to_vector(pg_catalog.float4[], pg_catalog.int4, pg_catalog.bool) AS ASSIGNMENT;
CREATE CAST (pg_catalog.float8[] AS @extschema@.vector)
  WITH FUNCTION @extschema@.array_to_vector(pg_catalog.float8[], pg_catalog.int4, pg_catalog.bool) AS ASSIGNMENT;
CREATE CAST (pg_catalog.numeric[] AS @extschema@.vector)
  WITH FUNCTION @extschema@.array_to_vector(pg_catalog.numeric[], pg_catalog.int4, pg_catalog.bool) AS ASSIGNMENT;
CREATE CAST (@extschema@.vector AS pg_catalog.float4[])
  WITH FUNCTION @extschema@.vector_to_float4(@extschema@.vector, pg_catalog.int4, pg_catalog.bool) AS IMPLICIT;

-- Operators ------------------------------------------------------------------

CREATE OPERATOR @extschema@.<-> (
  LEFTARG = @extschema@.vector, RIGHTARG = @extschema@.vector,
  FUNCTION = @extschema@.l2_distance, COMMUTATOR = OPERATOR(@extschema@.<->)
);
CREATE OPERATOR @extschema@.<#> (
  LEFTARG = @extschema@.vector, RIGHTARG = @extschema@.vector,
  FUNCTION = @extschema@.vector_negative_inner_product, COMMUTATOR = OPERATOR(@extschema@.<#>)
);
CREATE OPERATOR @extschema@.<=> (
  LEFTARG = @extschema@.vector, RIGHTARG = @extschema@.vector,
  FUNCTION = @extschema@.cosine_distance, COMMUTATOR = OPERATOR(@extschema@.<=>)
);
CREATE OPERATOR @extschema@.<+> (
  LEFTARG = @extschema@.vector, RIGHTARG = @extschema@.vector,
  FUNCTION = @extschema@.l1_distance, COMMUTATOR = OPERATOR(@extschema@.<+>)
);

CREATE OPERATOR @extschema@.+ (
  LEFTARG = @extschema@.vector, RIGHTARG = @extschema@.vector,
  FUNCTION = @extschema@.vector_add, COMMUTATOR = OPERATOR(@extschema@.+)
);
CREATE OPERATOR @extschema@.- (
  LEFTARG = @extschema@.vector, RIGHTARG = @extschema@.vector,
  FUNCTION = @extschema@.vector_sub
);
CREATE OPERATOR @extschema@.* (
  LEFTARG = @extschema@.vector, RIGHTARG = @extschema@.vector,
  FUNCTION = @extschema@.vector_mul, COMMUTATOR = OPERATOR(@extschema@.*)
);

CREATE OPERATOR @extschema@.< (
  LEFTARG = @extschema@.vector, RIGHTARG = @extschema@.vector, FUNCTION = @extschema@.vector_lt,
  COMMUTATOR = OPERATOR(@extschema@.>), NEGATOR = OPERATOR(@extschema@.>=),
  RESTRICT = pg_catalog.scalarltsel, JOIN = pg_catalog.scalarltjoinsel
);
CREATE OPERATOR @extschema@.<= (
  LEFTARG = @extschema@.vector, RIGHTARG = @extschema@.vector, FUNCTION = @extschema@.vector_le,
  COMMUTATOR = OPERATOR(@extschema@.>=), NEGATOR = OPERATOR(@extschema@.>),
  RESTRICT = pg_catalog.scalarlesel, JOIN = pg_catalog.scalarlejoinsel
);
CREATE OPERATOR @extschema@.= (
  LEFTARG = @extschema@.vector, RIGHTARG = @extschema@.vector, FUNCTION = @extschema@.vector_eq,
  COMMUTATOR = OPERATOR(@extschema@.=), NEGATOR = OPERATOR(@extschema@.<>),
  RESTRICT = pg_catalog.eqsel, JOIN = pg_catalog.eqjoinsel
);
CREATE OPERATOR @extschema@.<> (
  LEFTARG = @extschema@.vector, RIGHTARG = @extschema@.vector, FUNCTION = @extschema@.vector_ne,
  COMMUTATOR = OPERATOR(@extschema@.<>), NEGATOR = OPERATOR(@extschema@.=),
  RESTRICT = pg_catalog.neqsel, JOIN = pg_catalog.neqjoinsel
);
CREATE OPERATOR @extschema@.>= (
  LEFTARG = @extschema@.vector, RIGHTARG = @extschema@.vector, FUNCTION = @extschema@.vector_ge,
  COMMUTATOR = OPERATOR(@extschema@.<=), NEGATOR = OPERATOR(@extschema@.<),
  RESTRICT = pg_catalog.scalargesel, JOIN = pg_catalog.scalargejoinsel
);
CREATE OPERATOR @extschema@.> (
  LEFTARG = @extschema@.vector, RIGHTARG = @extschema@.vector, FUNCTION = @extschema@.vector_gt,
  COMMUTATOR = OPERATOR(@extschema@.<), NEGATOR = OPERATOR(@extschema@.<=),
  RESTRICT = pg_catalog.scalargtsel, JOIN = pg_catalog.scalargtjoinsel
);

CREATE OPERATOR CLASS @extschema@.vector_ops
  DEFAULT FOR TYPE @extschema@.vector USING btree AS
  OPERATOR 1 @extschema@.<,
  OPERATOR 2 @extschema@.<=,
  OPERATOR 3 @extschema@.=,
  OPERATOR 4 @extschema@.>=,
  OPERATOR 5 @extschema@.>,
  FUNCTION 1 @extschema@.vector_cmp(@extschema@.vector, @extschema@.vector);

-- The sparsevec type (pgvector's text, binary and on-disk formats) -------
-- '{1:1.5,3:2}/5': 1-based indices in text, up to 10^9 dimensions and 16000
-- non-zero elements. C symbols are sparsevec_*, so GpuTopK's compiler (which
-- recognises gknn functions by symbol) does not take them for vector's.

CREATE TYPE @extschema@.sparsevec;

CREATE FUNCTION @extschema@.sparsevec_in(pg_catalog.cstring, pg_catalog.oid, pg_catalog.int4)
  RETURNS @extschema@.sparsevec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.sparsevec_out(@extschema@.sparsevec)
  RETURNS pg_catalog.cstring AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.sparsevec_typmod_in(pg_catalog.cstring[])
  RETURNS pg_catalog.int4 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.sparsevec_recv(pg_catalog.internal, pg_catalog.oid, pg_catalog.int4)
  RETURNS @extschema@.sparsevec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.sparsevec_send(@extschema@.sparsevec)
  RETURNS pg_catalog.bytea AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE @extschema@.sparsevec (
  INPUT = @extschema@.sparsevec_in,
  OUTPUT = @extschema@.sparsevec_out,
  TYPMOD_IN = @extschema@.sparsevec_typmod_in,
  RECEIVE = @extschema@.sparsevec_recv,
  SEND = @extschema@.sparsevec_send,
  STORAGE = external
);

CREATE FUNCTION @extschema@.l2_distance(@extschema@.sparsevec, @extschema@.sparsevec)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME', 'sparsevec_l2_distance'
  LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.inner_product(@extschema@.sparsevec, @extschema@.sparsevec)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME', 'sparsevec_inner_product'
  LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.cosine_distance(@extschema@.sparsevec, @extschema@.sparsevec)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME', 'sparsevec_cosine_distance'
  LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.l1_distance(@extschema@.sparsevec, @extschema@.sparsevec)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME', 'sparsevec_l1_distance'
  LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.l2_norm(@extschema@.sparsevec)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME', 'sparsevec_l2_norm'
  LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.l2_normalize(@extschema@.sparsevec)
  RETURNS @extschema@.sparsevec AS 'MODULE_PATHNAME', 'sparsevec_l2_normalize'
  LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Operator support (not part of the documented API)
CREATE FUNCTION @extschema@.sparsevec_l2_squared_distance(@extschema@.sparsevec, @extschema@.sparsevec)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.sparsevec_negative_inner_product(@extschema@.sparsevec, @extschema@.sparsevec)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.sparsevec_lt(@extschema@.sparsevec, @extschema@.sparsevec)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.sparsevec_le(@extschema@.sparsevec, @extschema@.sparsevec)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.sparsevec_eq(@extschema@.sparsevec, @extschema@.sparsevec)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.sparsevec_ne(@extschema@.sparsevec, @extschema@.sparsevec)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.sparsevec_ge(@extschema@.sparsevec, @extschema@.sparsevec)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.sparsevec_gt(@extschema@.sparsevec, @extschema@.sparsevec)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.sparsevec_cmp(@extschema@.sparsevec, @extschema@.sparsevec)
  RETURNS pg_catalog.int4 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- sparsevec casts, as pgvector declares them: vector -> sparsevec implicit,
-- sparsevec -> vector and arrays -> sparsevec by assignment. (halfvec <->
-- sparsevec come with the halfvec type.)
CREATE FUNCTION @extschema@.sparsevec(@extschema@.sparsevec, pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.sparsevec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_to_sparsevec(@extschema@.vector, pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.sparsevec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.sparsevec_to_vector(@extschema@.sparsevec, pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.vector AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.array_to_sparsevec(pg_catalog.int4[], pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.sparsevec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.array_to_sparsevec(pg_catalog.float4[], pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.sparsevec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.array_to_sparsevec(pg_catalog.float8[], pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.sparsevec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.array_to_sparsevec(pg_catalog.numeric[], pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.sparsevec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE CAST (@extschema@.sparsevec AS @extschema@.sparsevec)
  WITH FUNCTION @extschema@.sparsevec(@extschema@.sparsevec, pg_catalog.int4, pg_catalog.bool) AS IMPLICIT;
CREATE CAST (@extschema@.vector AS @extschema@.sparsevec)
  WITH FUNCTION @extschema@.vector_to_sparsevec(@extschema@.vector, pg_catalog.int4, pg_catalog.bool)
  AS IMPLICIT;
CREATE CAST (@extschema@.sparsevec AS @extschema@.vector)
  WITH FUNCTION @extschema@.sparsevec_to_vector(@extschema@.sparsevec, pg_catalog.int4, pg_catalog.bool)
  AS ASSIGNMENT;
CREATE CAST (pg_catalog.int4[] AS @extschema@.sparsevec)
  WITH FUNCTION @extschema@.array_to_sparsevec(pg_catalog.int4[], pg_catalog.int4, pg_catalog.bool)
  AS ASSIGNMENT;
CREATE CAST (pg_catalog.float4[] AS @extschema@.sparsevec)
  WITH FUNCTION @extschema@.array_to_sparsevec(pg_catalog.float4[], pg_catalog.int4, pg_catalog.bool)
  AS ASSIGNMENT;
CREATE CAST (pg_catalog.float8[] AS @extschema@.sparsevec)
  WITH FUNCTION @extschema@.array_to_sparsevec(pg_catalog.float8[], pg_catalog.int4, pg_catalog.bool)
  AS ASSIGNMENT;
CREATE CAST (pg_catalog.numeric[] AS @extschema@.sparsevec)
  WITH FUNCTION @extschema@.array_to_sparsevec(pg_catalog.numeric[], pg_catalog.int4, pg_catalog.bool)
  AS ASSIGNMENT;

CREATE OPERATOR @extschema@.<-> (
  LEFTARG = @extschema@.sparsevec, RIGHTARG = @extschema@.sparsevec,
  FUNCTION = @extschema@.l2_distance, COMMUTATOR = OPERATOR(@extschema@.<->)
);
CREATE OPERATOR @extschema@.<#> (
  LEFTARG = @extschema@.sparsevec, RIGHTARG = @extschema@.sparsevec,
  FUNCTION = @extschema@.sparsevec_negative_inner_product, COMMUTATOR = OPERATOR(@extschema@.<#>)
);
CREATE OPERATOR @extschema@.<=> (
  LEFTARG = @extschema@.sparsevec, RIGHTARG = @extschema@.sparsevec,
  FUNCTION = @extschema@.cosine_distance, COMMUTATOR = OPERATOR(@extschema@.<=>)
);
CREATE OPERATOR @extschema@.<+> (
  LEFTARG = @extschema@.sparsevec, RIGHTARG = @extschema@.sparsevec,
  FUNCTION = @extschema@.l1_distance, COMMUTATOR = OPERATOR(@extschema@.<+>)
);

CREATE OPERATOR @extschema@.< (
  LEFTARG = @extschema@.sparsevec, RIGHTARG = @extschema@.sparsevec, FUNCTION = @extschema@.sparsevec_lt,
  COMMUTATOR = OPERATOR(@extschema@.>), NEGATOR = OPERATOR(@extschema@.>=),
  RESTRICT = pg_catalog.scalarltsel, JOIN = pg_catalog.scalarltjoinsel
);
CREATE OPERATOR @extschema@.<= (
  LEFTARG = @extschema@.sparsevec, RIGHTARG = @extschema@.sparsevec, FUNCTION = @extschema@.sparsevec_le,
  COMMUTATOR = OPERATOR(@extschema@.>=), NEGATOR = OPERATOR(@extschema@.>),
  RESTRICT = pg_catalog.scalarlesel, JOIN = pg_catalog.scalarlejoinsel
);
CREATE OPERATOR @extschema@.= (
  LEFTARG = @extschema@.sparsevec, RIGHTARG = @extschema@.sparsevec, FUNCTION = @extschema@.sparsevec_eq,
  COMMUTATOR = OPERATOR(@extschema@.=), NEGATOR = OPERATOR(@extschema@.<>),
  RESTRICT = pg_catalog.eqsel, JOIN = pg_catalog.eqjoinsel
);
CREATE OPERATOR @extschema@.<> (
  LEFTARG = @extschema@.sparsevec, RIGHTARG = @extschema@.sparsevec, FUNCTION = @extschema@.sparsevec_ne,
  COMMUTATOR = OPERATOR(@extschema@.<>), NEGATOR = OPERATOR(@extschema@.=),
  RESTRICT = pg_catalog.neqsel, JOIN = pg_catalog.neqjoinsel
);
CREATE OPERATOR @extschema@.>= (
  LEFTARG = @extschema@.sparsevec, RIGHTARG = @extschema@.sparsevec, FUNCTION = @extschema@.sparsevec_ge,
  COMMUTATOR = OPERATOR(@extschema@.<=), NEGATOR = OPERATOR(@extschema@.<),
  RESTRICT = pg_catalog.scalargesel, JOIN = pg_catalog.scalargejoinsel
);
CREATE OPERATOR @extschema@.> (
  LEFTARG = @extschema@.sparsevec, RIGHTARG = @extschema@.sparsevec, FUNCTION = @extschema@.sparsevec_gt,
  COMMUTATOR = OPERATOR(@extschema@.<), NEGATOR = OPERATOR(@extschema@.<=),
  RESTRICT = pg_catalog.scalargtsel, JOIN = pg_catalog.scalargtjoinsel
);

CREATE OPERATOR CLASS @extschema@.sparsevec_ops
  DEFAULT FOR TYPE @extschema@.sparsevec USING btree AS
  OPERATOR 1 @extschema@.<,
  OPERATOR 2 @extschema@.<=,
  OPERATOR 3 @extschema@.=,
  OPERATOR 4 @extschema@.>=,
  OPERATOR 5 @extschema@.>,
  FUNCTION 1 @extschema@.sparsevec_cmp(@extschema@.sparsevec, @extschema@.sparsevec);

-- bit strings: pgvector's distances on PostgreSQL's own bit type, and
-- binary_quantize(vector) (binary_quantize(halfvec) comes with halfvec).
-- Only the functions and operators are gknn's; bit stays pg_catalog's.

CREATE FUNCTION @extschema@.hamming_distance(pg_catalog.bit, pg_catalog.bit)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.jaccard_distance(pg_catalog.bit, pg_catalog.bit)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.binary_quantize(@extschema@.vector)
  RETURNS pg_catalog.bit AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR @extschema@.<~> (
  LEFTARG = pg_catalog.bit, RIGHTARG = pg_catalog.bit,
  FUNCTION = @extschema@.hamming_distance, COMMUTATOR = OPERATOR(@extschema@.<~>)
);
CREATE OPERATOR @extschema@.<%> (
  LEFTARG = pg_catalog.bit, RIGHTARG = pg_catalog.bit,
  FUNCTION = @extschema@.jaccard_distance, COMMUTATOR = OPERATOR(@extschema@.<%>)
);

-- Devices --------------------------------------------------------------------

CREATE FUNCTION @extschema@.gknn_version()
  RETURNS pg_catalog.text AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.gknn_devices(
    OUT ordinal pg_catalog.int4, OUT name pg_catalog.text, OUT total_memory pg_catalog.int8,
    OUT compute_capability pg_catalog.text, OUT in_use pg_catalog.bool)
  RETURNS SETOF record AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
CREATE FUNCTION @extschema@.gknn_current_device()
  RETURNS pg_catalog.text AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

-- GpuTopK's table cache, in the GPU service (gknn.topk_cache_mb) ------------------
CREATE FUNCTION @extschema@.gknn_topk_cache(
    OUT relation pg_catalog.oid, OUT columns pg_catalog.int2[], OUT device pg_catalog.text,
    OUT cached_rows pg_catalog.int8, OUT cached_pages pg_catalog.int8, OUT bytes pg_catalog.int8,
    OUT hits pg_catalog.int8, OUT segments pg_catalog.int8, OUT changed_pages pg_catalog.int8,
    OUT state pg_catalog.text, OUT built pg_catalog.timestamptz, OUT last_used pg_catalog.timestamptz)
  RETURNS SETOF record AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
-- The cache serves every session: resetting it is the owner's (or a
-- superuser's) to grant, as PostgreSQL's pg_stat_reset().
CREATE FUNCTION @extschema@.gknn_topk_cache_reset()
  RETURNS pg_catalog.int4 AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
REVOKE EXECUTE ON FUNCTION @extschema@.gknn_topk_cache_reset() FROM PUBLIC;
CREATE FUNCTION @extschema@.gknn_cache_table(pg_catalog.regclass, pg_catalog.text[])
  RETURNS pg_catalog.int8 AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

-- The GPU service (shared_preload_libraries = 'gknn') --------------------------
CREATE FUNCTION @extschema@.gknn_service_status(
    OUT state pg_catalog.text, OUT pid pg_catalog.int4, OUT device pg_catalog.text,
    OUT reason pg_catalog.text, OUT started pg_catalog.timestamptz, OUT restarts pg_catalog.int8,
    OUT queued pg_catalog.int4, OUT running pg_catalog.int4, OUT requests pg_catalog.int8,
    OUT searches pg_catalog.int8, OUT batches pg_catalog.int8, OUT mean_batch pg_catalog.float8,
    OUT busy_ms pg_catalog.float8, OUT loads pg_catalog.int8, OUT evictions pg_catalog.int8,
    OUT errors pg_catalog.int8, OUT images pg_catalog.int4, OUT memory_used pg_catalog.int8,
    OUT memory_budget pg_catalog.int8, OUT loaded_bytes pg_catalog.int8, OUT deltas pg_catalog.int8,
    OUT delta_bytes pg_catalog.int8, OUT topk_sessions pg_catalog.int8, OUT topk_batches pg_catalog.int8,
    OUT topk_rows pg_catalog.int8, OUT cache_entries pg_catalog.int4, OUT cache_bytes pg_catalog.int8,
    OUT cache_budget pg_catalog.int8, OUT cache_evictions pg_catalog.int8,
    OUT topk_shared_rankings pg_catalog.int8, OUT topk_shared_hits pg_catalog.int8,
    OUT queue_wait_ms pg_catalog.float8, OUT search_ms pg_catalog.float8,
    OUT ring_searches pg_catalog.int8, OUT ring_ms pg_catalog.float8)
  RETURNS record AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.gknn_service_images(
    OUT database pg_catalog.oid, OUT index_oid pg_catalog.oid, OUT index_name pg_catalog.text,
    OUT kind pg_catalog.text, OUT generation pg_catalog.int8, OUT device pg_catalog.int4, OUT bytes pg_catalog.int8,
    OUT entries pg_catalog.int8, OUT hits pg_catalog.int8, OUT loaded pg_catalog.timestamptz,
    OUT last_used pg_catalog.timestamptz)
  RETURNS SETOF record AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

-- gpu_ivfpq index access method ---------------------------------------------
-- CREATE INDEX ON t USING gpu_ivfpq (emb vector_l2_ops) WITH (lists = 100, m = 16);
-- An access method has no schema; its handler and operator classes live in
-- @extschema@. Each class has one ordering operator and, as support function
-- 1, the distance function the index is trained and searched for.

CREATE FUNCTION @extschema@.gknn_ivfpq_handler(pg_catalog.internal)
  RETURNS pg_catalog.index_am_handler AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE ACCESS METHOD gpu_ivfpq TYPE INDEX HANDLER @extschema@.gknn_ivfpq_handler;
COMMENT ON ACCESS METHOD gpu_ivfpq IS 'gknn IVF-PQ approximate nearest-neighbour index (GPU or CPU)';

CREATE OPERATOR CLASS @extschema@.vector_l2_ops
  DEFAULT FOR TYPE @extschema@.vector USING gpu_ivfpq AS
  OPERATOR 1 @extschema@.<-> (@extschema@.vector, @extschema@.vector) FOR ORDER BY pg_catalog.float_ops,
  FUNCTION 1 @extschema@.l2_distance(@extschema@.vector, @extschema@.vector);
CREATE OPERATOR CLASS @extschema@.vector_ip_ops
  FOR TYPE @extschema@.vector USING gpu_ivfpq AS
  OPERATOR 1 @extschema@.<#> (@extschema@.vector, @extschema@.vector) FOR ORDER BY pg_catalog.float_ops,
  FUNCTION 1 @extschema@.vector_negative_inner_product(@extschema@.vector, @extschema@.vector);
CREATE OPERATOR CLASS @extschema@.vector_cosine_ops
  FOR TYPE @extschema@.vector USING gpu_ivfpq AS
  OPERATOR 1 @extschema@.<=> (@extschema@.vector, @extschema@.vector) FOR ORDER BY pg_catalog.float_ops,
  FUNCTION 1 @extschema@.cosine_distance(@extschema@.vector, @extschema@.vector);

CREATE FUNCTION @extschema@.gknn_ivfpq_info(index pg_catalog.regclass,
    OUT trained pg_catalog.bool, OUT dims pg_catalog.int4, OUT lists pg_catalog.int4,
    OUT m pg_catalog.int4, OUT nbits pg_catalog.int4, OUT metric pg_catalog.text,
    OUT generation pg_catalog.int8, OUT entries pg_catalog.int8, OUT pending pg_catalog.int8,
    OUT nulls pg_catalog.int8, OUT empty_lists pg_catalog.int8, OUT pages pg_catalog.int8)
  RETURNS record AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

-- gpu_graph index access method ---------------------------------------------
-- CREATE INDEX ON t USING gpu_graph (emb vector_l2_ops) WITH (degree = 32);
-- A fixed-degree proximity graph (CAGRA-style) over the vectors, which its
-- pages store in full; searched with gknn.graph_ef_search candidates. Its
-- operator classes have gpu_ivfpq's names (an operator class is named per
-- access method).

CREATE FUNCTION @extschema@.gknn_graph_handler(pg_catalog.internal)
  RETURNS pg_catalog.index_am_handler AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE ACCESS METHOD gpu_graph TYPE INDEX HANDLER @extschema@.gknn_graph_handler;
COMMENT ON ACCESS METHOD gpu_graph IS 'gknn graph (CAGRA-style) approximate nearest-neighbour index';

CREATE OPERATOR CLASS @extschema@.vector_l2_ops
  DEFAULT FOR TYPE @extschema@.vector USING gpu_graph AS
  OPERATOR 1 @extschema@.<-> (@extschema@.vector, @extschema@.vector) FOR ORDER BY pg_catalog.float_ops,
  FUNCTION 1 @extschema@.l2_distance(@extschema@.vector, @extschema@.vector);
CREATE OPERATOR CLASS @extschema@.vector_ip_ops
  FOR TYPE @extschema@.vector USING gpu_graph AS
  OPERATOR 1 @extschema@.<#> (@extschema@.vector, @extschema@.vector) FOR ORDER BY pg_catalog.float_ops,
  FUNCTION 1 @extschema@.vector_negative_inner_product(@extschema@.vector, @extschema@.vector);
CREATE OPERATOR CLASS @extschema@.vector_cosine_ops
  FOR TYPE @extschema@.vector USING gpu_graph AS
  OPERATOR 1 @extschema@.<=> (@extschema@.vector, @extschema@.vector) FOR ORDER BY pg_catalog.float_ops,
  FUNCTION 1 @extschema@.cosine_distance(@extschema@.vector, @extschema@.vector);

CREATE FUNCTION @extschema@.gknn_graph_info(index pg_catalog.regclass,
    OUT dims pg_catalog.int4, OUT degree pg_catalog.int4, OUT metric pg_catalog.text,
    OUT generation pg_catalog.int8, OUT nodes pg_catalog.int8, OUT live pg_catalog.int8,
    OUT dead pg_catalog.int8, OUT nulls pg_catalog.int8, OUT edges pg_catalog.int8,
    OUT dead_edges pg_catalog.int8, OUT no_in_edges pg_catalog.int8, OUT entries pg_catalog.int8,
    OUT pages pg_catalog.int8)
  RETURNS record AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

-- || for vector, and the halfvec type (pgvector's) ----------------------------
-- halfvec keeps each element as IEEE binary16 in pgvector's on-disk, text and
-- binary formats, up to 16000 dimensions. float -> half rounds to nearest
-- even; distances are those of the elements widened to float (as pgvector
-- computes them). Casts are declared as pgvector declares them: vector ->
-- halfvec implicit; halfvec -> vector, halfvec -> real[] and arrays -> halfvec
-- by assignment. C symbols are halfvec_*, so GpuTopK's compiler (which
-- recognises gknn functions by symbol) does not take them for vector's.

CREATE FUNCTION @extschema@.vector_concat(@extschema@.vector, @extschema@.vector)
  RETURNS @extschema@.vector AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OPERATOR @extschema@.|| (
  LEFTARG = @extschema@.vector, RIGHTARG = @extschema@.vector,
  FUNCTION = @extschema@.vector_concat
);

CREATE TYPE @extschema@.halfvec;

CREATE FUNCTION @extschema@.halfvec_in(pg_catalog.cstring, pg_catalog.oid, pg_catalog.int4)
  RETURNS @extschema@.halfvec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_out(@extschema@.halfvec)
  RETURNS pg_catalog.cstring AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_typmod_in(pg_catalog.cstring[])
  RETURNS pg_catalog.int4 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_recv(pg_catalog.internal, pg_catalog.oid, pg_catalog.int4)
  RETURNS @extschema@.halfvec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_send(@extschema@.halfvec)
  RETURNS pg_catalog.bytea AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE @extschema@.halfvec (
  INPUT = @extschema@.halfvec_in,
  OUTPUT = @extschema@.halfvec_out,
  TYPMOD_IN = @extschema@.halfvec_typmod_in,
  RECEIVE = @extschema@.halfvec_recv,
  SEND = @extschema@.halfvec_send,
  STORAGE = external
);

-- halfvec functions (SQL names overloaded as pgvector's, C symbols halfvec_*)
CREATE FUNCTION @extschema@.l2_distance(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME', 'halfvec_l2_distance'
  LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.inner_product(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME', 'halfvec_inner_product'
  LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.cosine_distance(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME', 'halfvec_cosine_distance'
  LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.l1_distance(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME', 'halfvec_l1_distance'
  LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_dims(@extschema@.halfvec)
  RETURNS pg_catalog.int4 AS 'MODULE_PATHNAME', 'halfvec_vector_dims'
  LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.l2_norm(@extschema@.halfvec)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME', 'halfvec_l2_norm'
  LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.l2_normalize(@extschema@.halfvec)
  RETURNS @extschema@.halfvec AS 'MODULE_PATHNAME', 'halfvec_l2_normalize'
  LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.binary_quantize(@extschema@.halfvec)
  RETURNS pg_catalog.bit AS 'MODULE_PATHNAME', 'halfvec_binary_quantize'
  LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.subvector(@extschema@.halfvec, pg_catalog.int4, pg_catalog.int4)
  RETURNS @extschema@.halfvec AS 'MODULE_PATHNAME', 'halfvec_subvector'
  LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- halfvec operator support (not part of the documented API)
CREATE FUNCTION @extschema@.halfvec_l2_squared_distance(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_negative_inner_product(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS pg_catalog.float8 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_add(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS @extschema@.halfvec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_sub(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS @extschema@.halfvec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_mul(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS @extschema@.halfvec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_concat(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS @extschema@.halfvec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_lt(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_le(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_eq(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_ne(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_ge(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_gt(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS pg_catalog.bool AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_cmp(@extschema@.halfvec, @extschema@.halfvec)
  RETURNS pg_catalog.int4 AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- halfvec aggregates: avg accumulates in float8 (the state of avg(vector), so
-- the combine function is vector_combine's C function, as in pgvector).
CREATE FUNCTION @extschema@.halfvec_accum(pg_catalog.float8[], @extschema@.halfvec)
  RETURNS pg_catalog.float8[] AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_avg(pg_catalog.float8[])
  RETURNS @extschema@.halfvec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_combine(pg_catalog.float8[], pg_catalog.float8[])
  RETURNS pg_catalog.float8[] AS 'MODULE_PATHNAME', 'vector_combine'
  LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE AGGREGATE @extschema@.avg(@extschema@.halfvec) (
  SFUNC = @extschema@.halfvec_accum,
  STYPE = pg_catalog.float8[],
  FINALFUNC = @extschema@.halfvec_avg,
  COMBINEFUNC = @extschema@.halfvec_combine,
  INITCOND = '{0}',
  PARALLEL = SAFE
);

CREATE AGGREGATE @extschema@.sum(@extschema@.halfvec) (
  SFUNC = @extschema@.halfvec_add,
  STYPE = @extschema@.halfvec,
  COMBINEFUNC = @extschema@.halfvec_add,
  PARALLEL = SAFE
);

-- halfvec casts
CREATE FUNCTION @extschema@.halfvec(@extschema@.halfvec, pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.halfvec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_to_vector(@extschema@.halfvec, pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.vector AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.vector_to_halfvec(@extschema@.vector, pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.halfvec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.array_to_halfvec(pg_catalog.int4[], pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.halfvec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.array_to_halfvec(pg_catalog.float4[], pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.halfvec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.array_to_halfvec(pg_catalog.float8[], pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.halfvec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.array_to_halfvec(pg_catalog.numeric[], pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.halfvec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.halfvec_to_float4(@extschema@.halfvec, pg_catalog.int4, pg_catalog.bool)
  RETURNS pg_catalog.float4[] AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE CAST (@extschema@.halfvec AS @extschema@.halfvec)
  WITH FUNCTION @extschema@.halfvec(@extschema@.halfvec, pg_catalog.int4, pg_catalog.bool) AS IMPLICIT;
CREATE CAST (@extschema@.halfvec AS @extschema@.vector)
  WITH FUNCTION @extschema@.halfvec_to_vector(@extschema@.halfvec, pg_catalog.int4, pg_catalog.bool)
  AS ASSIGNMENT;
CREATE CAST (@extschema@.vector AS @extschema@.halfvec)
  WITH FUNCTION @extschema@.vector_to_halfvec(@extschema@.vector, pg_catalog.int4, pg_catalog.bool)
  AS IMPLICIT;
CREATE CAST (@extschema@.halfvec AS pg_catalog.float4[])
  WITH FUNCTION @extschema@.halfvec_to_float4(@extschema@.halfvec, pg_catalog.int4, pg_catalog.bool)
  AS ASSIGNMENT;
CREATE CAST (pg_catalog.int4[] AS @extschema@.halfvec)
  WITH FUNCTION @extschema@.array_to_halfvec(pg_catalog.int4[], pg_catalog.int4, pg_catalog.bool)
  AS ASSIGNMENT;
CREATE CAST (pg_catalog.float4[] AS @extschema@.halfvec)
  WITH FUNCTION @extschema@.array_to_halfvec(pg_catalog.float4[], pg_catalog.int4, pg_catalog.bool)
  AS ASSIGNMENT;
CREATE CAST (pg_catalog.float8[] AS @extschema@.halfvec)
  WITH FUNCTION @extschema@.array_to_halfvec(pg_catalog.float8[], pg_catalog.int4, pg_catalog.bool)
  AS ASSIGNMENT;
CREATE CAST (pg_catalog.numeric[] AS @extschema@.halfvec)
  WITH FUNCTION @extschema@.array_to_halfvec(pg_catalog.numeric[], pg_catalog.int4, pg_catalog.bool)
  AS ASSIGNMENT;

-- halfvec operators
CREATE OPERATOR @extschema@.<-> (
  LEFTARG = @extschema@.halfvec, RIGHTARG = @extschema@.halfvec,
  FUNCTION = @extschema@.l2_distance, COMMUTATOR = OPERATOR(@extschema@.<->)
);
CREATE OPERATOR @extschema@.<#> (
  LEFTARG = @extschema@.halfvec, RIGHTARG = @extschema@.halfvec,
  FUNCTION = @extschema@.halfvec_negative_inner_product, COMMUTATOR = OPERATOR(@extschema@.<#>)
);
CREATE OPERATOR @extschema@.<=> (
  LEFTARG = @extschema@.halfvec, RIGHTARG = @extschema@.halfvec,
  FUNCTION = @extschema@.cosine_distance, COMMUTATOR = OPERATOR(@extschema@.<=>)
);
CREATE OPERATOR @extschema@.<+> (
  LEFTARG = @extschema@.halfvec, RIGHTARG = @extschema@.halfvec,
  FUNCTION = @extschema@.l1_distance, COMMUTATOR = OPERATOR(@extschema@.<+>)
);

CREATE OPERATOR @extschema@.+ (
  LEFTARG = @extschema@.halfvec, RIGHTARG = @extschema@.halfvec,
  FUNCTION = @extschema@.halfvec_add, COMMUTATOR = OPERATOR(@extschema@.+)
);
CREATE OPERATOR @extschema@.- (
  LEFTARG = @extschema@.halfvec, RIGHTARG = @extschema@.halfvec,
  FUNCTION = @extschema@.halfvec_sub
);
CREATE OPERATOR @extschema@.* (
  LEFTARG = @extschema@.halfvec, RIGHTARG = @extschema@.halfvec,
  FUNCTION = @extschema@.halfvec_mul, COMMUTATOR = OPERATOR(@extschema@.*)
);
CREATE OPERATOR @extschema@.|| (
  LEFTARG = @extschema@.halfvec, RIGHTARG = @extschema@.halfvec,
  FUNCTION = @extschema@.halfvec_concat
);

CREATE OPERATOR @extschema@.< (
  LEFTARG = @extschema@.halfvec, RIGHTARG = @extschema@.halfvec, FUNCTION = @extschema@.halfvec_lt,
  COMMUTATOR = OPERATOR(@extschema@.>), NEGATOR = OPERATOR(@extschema@.>=),
  RESTRICT = pg_catalog.scalarltsel, JOIN = pg_catalog.scalarltjoinsel
);
CREATE OPERATOR @extschema@.<= (
  LEFTARG = @extschema@.halfvec, RIGHTARG = @extschema@.halfvec, FUNCTION = @extschema@.halfvec_le,
  COMMUTATOR = OPERATOR(@extschema@.>=), NEGATOR = OPERATOR(@extschema@.>),
  RESTRICT = pg_catalog.scalarlesel, JOIN = pg_catalog.scalarlejoinsel
);
CREATE OPERATOR @extschema@.= (
  LEFTARG = @extschema@.halfvec, RIGHTARG = @extschema@.halfvec, FUNCTION = @extschema@.halfvec_eq,
  COMMUTATOR = OPERATOR(@extschema@.=), NEGATOR = OPERATOR(@extschema@.<>),
  RESTRICT = pg_catalog.eqsel, JOIN = pg_catalog.eqjoinsel
);
CREATE OPERATOR @extschema@.<> (
  LEFTARG = @extschema@.halfvec, RIGHTARG = @extschema@.halfvec, FUNCTION = @extschema@.halfvec_ne,
  COMMUTATOR = OPERATOR(@extschema@.<>), NEGATOR = OPERATOR(@extschema@.=),
  RESTRICT = pg_catalog.neqsel, JOIN = pg_catalog.neqjoinsel
);
CREATE OPERATOR @extschema@.>= (
  LEFTARG = @extschema@.halfvec, RIGHTARG = @extschema@.halfvec, FUNCTION = @extschema@.halfvec_ge,
  COMMUTATOR = OPERATOR(@extschema@.<=), NEGATOR = OPERATOR(@extschema@.<),
  RESTRICT = pg_catalog.scalargesel, JOIN = pg_catalog.scalargejoinsel
);
CREATE OPERATOR @extschema@.> (
  LEFTARG = @extschema@.halfvec, RIGHTARG = @extschema@.halfvec, FUNCTION = @extschema@.halfvec_gt,
  COMMUTATOR = OPERATOR(@extschema@.<), NEGATOR = OPERATOR(@extschema@.<=),
  RESTRICT = pg_catalog.scalargtsel, JOIN = pg_catalog.scalargtjoinsel
);

CREATE OPERATOR CLASS @extschema@.halfvec_ops
  DEFAULT FOR TYPE @extschema@.halfvec USING btree AS
  OPERATOR 1 @extschema@.<,
  OPERATOR 2 @extschema@.<=,
  OPERATOR 3 @extschema@.=,
  OPERATOR 4 @extschema@.>=,
  OPERATOR 5 @extschema@.>,
  FUNCTION 1 @extschema@.halfvec_cmp(@extschema@.halfvec, @extschema@.halfvec);

-- halfvec <-> sparsevec casts (as pgvector declares them)
CREATE FUNCTION @extschema@.halfvec_to_sparsevec(@extschema@.halfvec, pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.sparsevec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.sparsevec_to_halfvec(@extschema@.sparsevec, pg_catalog.int4, pg_catalog.bool)
  RETURNS @extschema@.halfvec AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE CAST (@extschema@.halfvec AS @extschema@.sparsevec)
  WITH FUNCTION @extschema@.halfvec_to_sparsevec(@extschema@.halfvec, pg_catalog.int4, pg_catalog.bool)
  AS IMPLICIT;
CREATE CAST (@extschema@.sparsevec AS @extschema@.halfvec)
  WITH FUNCTION @extschema@.sparsevec_to_halfvec(@extschema@.sparsevec, pg_catalog.int4, pg_catalog.bool)
  AS ASSIGNMENT;

-- gpu_ivfpq on halfvec (as pgvector names its halfvec classes: none is the
-- type's default). The index trains on the elements' float values and stores
-- the binary16 elements themselves; support function 1 is the operator's.
-- CREATE INDEX ON t USING gpu_ivfpq ((emb::halfvec(3072)) halfvec_l2_ops);
CREATE OPERATOR CLASS @extschema@.halfvec_l2_ops
  FOR TYPE @extschema@.halfvec USING gpu_ivfpq AS
  OPERATOR 1 @extschema@.<-> (@extschema@.halfvec, @extschema@.halfvec) FOR ORDER BY pg_catalog.float_ops,
  FUNCTION 1 @extschema@.l2_distance(@extschema@.halfvec, @extschema@.halfvec);
CREATE OPERATOR CLASS @extschema@.halfvec_ip_ops
  FOR TYPE @extschema@.halfvec USING gpu_ivfpq AS
  OPERATOR 1 @extschema@.<#> (@extschema@.halfvec, @extschema@.halfvec) FOR ORDER BY pg_catalog.float_ops,
  FUNCTION 1 @extschema@.halfvec_negative_inner_product(@extschema@.halfvec, @extschema@.halfvec);
CREATE OPERATOR CLASS @extschema@.halfvec_cosine_ops
  FOR TYPE @extschema@.halfvec USING gpu_ivfpq AS
  OPERATOR 1 @extschema@.<=> (@extschema@.halfvec, @extschema@.halfvec) FOR ORDER BY pg_catalog.float_ops,
  FUNCTION 1 @extschema@.cosine_distance(@extschema@.halfvec, @extschema@.halfvec);

-- gpu_ivfpq on bit strings (as pgvector's bit_hamming_ops; not bit's default):
-- trained on the 0/1 values under L2, whose square is the Hamming distance;
-- list items store the bit string, and the re-rank gives <~>'s value.
-- CREATE INDEX ON t USING gpu_ivfpq ((binary_quantize(emb)::bit(1536)) bit_hamming_ops);
CREATE OPERATOR CLASS @extschema@.bit_hamming_ops
  FOR TYPE pg_catalog.bit USING gpu_ivfpq AS
  OPERATOR 1 @extschema@.<~> (pg_catalog.bit, pg_catalog.bit) FOR ORDER BY pg_catalog.float_ops,
  FUNCTION 1 @extschema@.hamming_distance(pg_catalog.bit, pg_catalog.bit);
