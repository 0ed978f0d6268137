// PostgreSQL expressions -> gknn::expr bytecode (see gknn/expr.h). Operators
// and functions are recognised by their C symbol (pg_proc.prosrc) among
// PostgreSQL's internal functions and gknn's own, so the compiled code means
// exactly what PostgreSQL's function would compute. Anything else does not
// compile, and the caller decides what that means (a qual then runs in
// PostgreSQL; an ORDER BY that does not compile means no GpuTopK path).
//
// The emitter lives in palloc'd arrays: catalog lookups here may raise, and
// no C++ object may own resources across them.
#include <cmath>
#include <cstring>

#include "topk.h"

#include <algorithm>
#include "types/vector.h"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "utils/array.h"
#include "utils/date.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/fmgrprotos.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"
}

using gknn::expr::Instr;
using gknn::expr::Op;
using gknn::expr::Type;
using gknn::expr::Value;

namespace {

// ---- emitting ----

template <typename T>
void ensure(T*& arr, int& cap, int need) {
  if (need <= cap) return;
  int n = cap ? cap * 2 : 64;
  while (n < need) n *= 2;
  arr = static_cast<T*>(arr ? repalloc(arr, sizeof(T) * n) : palloc(sizeof(T) * n));
  cap = n;
}

int emit(TopKEmitter* em, Op op, Type t = Type::I64, int arg = 0, int aux = 0) {
  ensure(em->code, em->capcode, em->ncode + 1);
  em->code[em->ncode] = Instr{op, static_cast<uint8>(t), static_cast<uint16>(aux), arg};
  return em->ncode++;
}

void patch(TopKEmitter* em, int at) { em->code[at].arg = em->ncode; }

int add_const(TopKEmitter* em, Value v, bool null) {
  if (em->nconst == em->capconst) {  // values and null flags grow in step
    int n = em->capconst ? em->capconst * 2 : 64;
    em->consts =
        static_cast<Value*>(em->consts ? repalloc(em->consts, sizeof(Value) * n) : palloc(sizeof(Value) * n));
    em->const_nulls = static_cast<uint8*>(em->const_nulls ? repalloc(em->const_nulls, n) : palloc(n));
    em->capconst = n;
  }
  em->consts[em->nconst] = v;
  em->const_nulls[em->nconst] = null;
  return em->nconst++;
}

// ---- types ----

bool value_type(Oid type, Type* out) {
  switch (type) {
    case BOOLOID:
      *out = Type::Bool;
      return true;
    case INT2OID:
      *out = Type::I16;
      return true;
    case INT4OID:
      *out = Type::I32;
      return true;
    case INT8OID:
      *out = Type::I64;
      return true;
    case FLOAT4OID:
      *out = Type::F32;
      return true;
    case FLOAT8OID:
      *out = Type::F64;
      return true;
    case DATEOID:
      *out = Type::Date;
      return true;
    case TIMESTAMPOID:
    case TIMESTAMPTZOID:
      *out = Type::Timestamp;
      return true;
    default:
      return false;
  }
}

// How two values of a type compare: floats as float8, the rest as integers.
Type compare_type(Type t) { return (t == Type::F32 || t == Type::F64) ? Type::F64 : Type::I64; }

Value datum_value(Type t, Datum d) {
  Value v;
  switch (t) {
    case Type::Bool:
      v.i = DatumGetBool(d);
      break;
    case Type::I16:
      v.i = DatumGetInt16(d);
      break;
    case Type::I32:
      v.i = DatumGetInt32(d);
      break;
    case Type::Date:
      v.i = DatumGetDateADT(d);
      break;
    case Type::F32:
      v.f = DatumGetFloat4(d);
      break;
    case Type::F64:
      v.f = DatumGetFloat8(d);
      break;
    default:
      v.i = DatumGetInt64(d);
      break;
  }
  return v;
}

// Whether `fn` is a C function of gknn's library with this symbol.
bool gknn_symbol(HeapTuple tup, char* prosrc_out, size_t len) {
  Form_pg_proc p = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tup));
  bool isnull = false;
  if (p->prolang != ClanguageId) return false;
  Datum bin = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_probin, &isnull);
  if (isnull) return false;
  char* probin = TextDatumGetCString(bin);
  const char* base = strrchr(probin, '/');
  base = base ? base + 1 : probin;
  bool ours = strncmp(base, "gknn", 4) == 0 && (base[4] == '\0' || strcmp(base + 4, ".so") == 0);
  if (!ours) return false;
  Datum src = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);
  if (isnull) return false;
  strlcpy(prosrc_out, TextDatumGetCString(src), len);
  return true;
}

// The C symbol of an internal (built-in) or gknn function; false otherwise.
bool function_symbol(Oid fn, char* out, size_t len, bool* is_gknn) {
  HeapTuple tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
  if (!HeapTupleIsValid(tup)) return false;
  Form_pg_proc p = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tup));
  bool ok = false;
  *is_gknn = false;
  if (p->prolang == INTERNALlanguageId && !p->proretset) {
    bool isnull = false;
    Datum src = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);
    if (!isnull) {
      strlcpy(out, TextDatumGetCString(src), len);
      ok = true;
    }
  } else if (!p->proretset && gknn_symbol(tup, out, len)) {
    ok = *is_gknn = true;
  }
  ReleaseSysCache(tup);
  return ok;
}

// ---- what a function symbol means ----

enum class FnKind { None, Arith, Compare, Unary, Identity, Math1, Pow, Cast, Distance };

struct FnInfo {
  FnKind kind = FnKind::None;
  Op op = Op::Add;
  Type type = Type::I64;  // operation type (Cast: target)
  Type from = Type::I64;  // Cast: source
  int metric = 0;
};

struct Named {
  const char* name;
  Type type;
};

const Named kArithPrefixes[] = {
    {"int2", Type::I16},    {"int4", Type::I32},   {"int8", Type::I64},   {"int24", Type::I32},
    {"int42", Type::I32},   {"int48", Type::I64},  {"int84", Type::I64},  {"int28", Type::I64},
    {"int82", Type::I64},   {"float4", Type::F32}, {"float8", Type::F64}, {"float48", Type::F64},
    {"float84", Type::F64}, {"bool", Type::Bool},  {"date_", Type::Date}, {"timestamp_", Type::Timestamp}};

struct OpName {
  const char* suffix;
  Op op;
};
const OpName kArithOps[] = {
    {"pl", Op::Add}, {"mi", Op::Sub}, {"mul", Op::Mul}, {"div", Op::Div}, {"mod", Op::Mod}};
const OpName kCompareOps[] = {{"eq", Op::Eq}, {"ne", Op::Ne}, {"lt", Op::Lt},
                              {"le", Op::Le}, {"gt", Op::Gt}, {"ge", Op::Ge}};

struct CastName {
  const char* name;
  Type from, to;
};
const CastName kCasts[] = {{"i2toi4", Type::I16, Type::I32},
                           {"i4toi2", Type::I32, Type::I16},
                           {"int48", Type::I32, Type::I64},
                           {"int84", Type::I64, Type::I32},
                           {"int28", Type::I16, Type::I64},
                           {"int82", Type::I64, Type::I16},
                           {"i2tod", Type::I16, Type::F64},
                           {"i4tod", Type::I32, Type::F64},
                           {"i8tod", Type::I64, Type::F64},
                           {"i2tof", Type::I16, Type::F32},
                           {"i4tof", Type::I32, Type::F32},
                           {"i8tof", Type::I64, Type::F32},
                           {"ftod", Type::F32, Type::F64},
                           {"dtof", Type::F64, Type::F32},
                           {"dtoi2", Type::F64, Type::I16},
                           {"dtoi4", Type::F64, Type::I32},
                           {"dtoi8", Type::F64, Type::I64},
                           {"ftoi2", Type::F32, Type::I16},
                           {"ftoi4", Type::F32, Type::I32},
                           {"ftoi8", Type::F32, Type::I64},
                           {"int4_bool", Type::I32, Type::Bool},
                           {"bool_int4", Type::Bool, Type::I32},
                           {"date_timestamp", Type::Date, Type::Timestamp}};

bool starts(const char* s, const char* prefix, const char** rest) {
  size_t n = strlen(prefix);
  if (strncmp(s, prefix, n) != 0) return false;
  *rest = s + n;
  return true;
}

bool internal_function(const char* s, FnInfo* f) {
  for (const CastName& c : kCasts)
    if (strcmp(s, c.name) == 0) {
      f->kind = FnKind::Cast, f->type = c.to, f->from = c.from;
      return true;
    }
  struct Math {
    const char* name;
    FnKind kind;
    Op op;
  };
  const Math math[] = {{"dsqrt", FnKind::Math1, Op::Sqrt}, {"dlog1", FnKind::Math1, Op::Ln},
                       {"dexp", FnKind::Math1, Op::Exp},   {"dfloor", FnKind::Math1, Op::Floor},
                       {"dceil", FnKind::Math1, Op::Ceil}, {"dpow", FnKind::Pow, Op::Pow}};
  for (const Math& m : math)
    if (strcmp(s, m.name) == 0) {
      f->kind = m.kind, f->op = m.op, f->type = Type::F64;
      return true;
    }
  // numeric comparisons: their arguments compile only where float8 is exact
  // (compile_numeric), so comparing the doubles is comparing the numerics.
  const char* cmp = nullptr;
  if (starts(s, "numeric_", &cmp))
    for (const OpName& o : kCompareOps)
      if (strcmp(cmp, o.suffix) == 0) {
        f->kind = FnKind::Compare, f->op = o.op, f->type = Type::F64;
        return true;
      }
  // The longest prefix first: int48pl must not read as int4 + "8pl".
  for (int pass = 0; pass < 2; ++pass)
    for (const Named& p : kArithPrefixes) {
      const char* rest = nullptr;
      if ((strlen(p.name) > 5) != (pass == 0) || !starts(s, p.name, &rest)) continue;
      for (const OpName& o : kCompareOps)
        if (strcmp(rest, o.suffix) == 0) {
          f->kind = FnKind::Compare, f->op = o.op, f->type = compare_type(p.type);
          return true;
        }
      bool numeric = p.type != Type::Bool && p.type != Type::Date && p.type != Type::Timestamp;
      for (const OpName& o : kArithOps)
        if (numeric && strcmp(rest, o.suffix) == 0) {
          if (o.op == Op::Mod && (p.type == Type::F32 || p.type == Type::F64)) return false;
          f->kind = FnKind::Arith, f->op = o.op, f->type = p.type;
          return true;
        }
      if (numeric && (strcmp(rest, "um") == 0 || strcmp(rest, "abs") == 0)) {
        f->kind = FnKind::Unary, f->op = rest[0] == 'u' ? Op::Neg : Op::Abs, f->type = p.type;
        return true;
      }
      if (numeric && strcmp(rest, "up") == 0) {
        f->kind = FnKind::Identity;
        return true;
      }
    }
  return false;
}

bool gknn_function(const char* s, FnInfo* f) {
  const Named metrics[] = {{"l2_distance", static_cast<Type>(0)},
                           {"vector_negative_inner_product", static_cast<Type>(1)},
                           {"cosine_distance", static_cast<Type>(2)},
                           {"l1_distance", static_cast<Type>(3)},
                           {"inner_product", static_cast<Type>(4)}};
  for (const Named& m : metrics)
    if (strcmp(s, m.name) == 0) {
      f->kind = FnKind::Distance, f->metric = static_cast<int>(m.type);
      return true;
    }
  return false;
}

FnInfo lookup_function(Oid fn) {
  FnInfo f;
  char name[NAMEDATALEN * 2];
  bool is_gknn = false;
  if (!function_symbol(fn, name, sizeof(name), &is_gknn)) return f;
  if (!(is_gknn ? gknn_function(name, &f) : internal_function(name, &f))) f.kind = FnKind::None;
  return f;
}

// ---- expressions ----

bool compile(TopKEmitter* em, Node* node, Type* out);

int column_index(TopKEmitter* em, AttrNumber attno, Type t, int dim) {
  for (int c = 0; c < em->ncolumns; ++c)
    if (em->attnos[c] == attno) return (em->columns[c].type == t && em->columns[c].dim == dim) ? c : -1;
  if (em->ncolumns >= gknn::expr::kMaxColumns) return -1;
  em->attnos[em->ncolumns] = attno;
  em->columns[em->ncolumns] = gknn::expr::ColumnSpec{t, dim};
  return em->ncolumns++;
}

}  // namespace

bool topk_column_spec(Oid type, int32 typmod, gknn::expr::ColumnSpec* out) {
  Type t;
  if (value_type(type, &t)) {
    *out = gknn::expr::ColumnSpec{t, 0};
    return true;
  }
  if (topk_is_vector_type(type) && typmod > 0 && typmod <= VECTOR_MAX_DIM) {
    *out = gknn::expr::ColumnSpec{Type::Vector, typmod};
    return true;
  }
  return false;
}

// Columns in attno order, the instructions that read them renumbered: the
// table cache's entries are keyed by their columns, whatever order the
// query named them in.
void topk_emitter_sort_columns(TopKEmitter* em) {
  int order[gknn::expr::kMaxColumns];  // new position -> old
  for (int c = 0; c < em->ncolumns; ++c) order[c] = c;
  std::sort(order, order + em->ncolumns, [&](int a, int b) { return em->attnos[a] < em->attnos[b]; });
  int where[gknn::expr::kMaxColumns];  // old -> new
  AttrNumber attnos[gknn::expr::kMaxColumns];
  gknn::expr::ColumnSpec columns[gknn::expr::kMaxColumns];
  for (int c = 0; c < em->ncolumns; ++c) {
    where[order[c]] = c;
    attnos[c] = em->attnos[order[c]];
    columns[c] = em->columns[order[c]];
  }
  for (int c = 0; c < em->ncolumns; ++c) {
    em->attnos[c] = attnos[c];
    em->columns[c] = columns[c];
  }
  for (int i = 0; i < em->ncode; ++i)
    if (em->code[i].op == Op::Col || em->code[i].op == Op::VecDist) em->code[i].arg = where[em->code[i].arg];
}

namespace {

bool is_our_var(TopKEmitter* em, Node* n) {
  if (!IsA(n, Var)) return false;
  Var* v = reinterpret_cast<Var*>(n);
  return v->varno == static_cast<int>(em->scanrelid) && v->varlevelsup == 0 && v->varattno > 0;
}

bool compile_value(TopKEmitter* em, Node* n, Oid type, Type* out) {
  if (!value_type(type, out)) return false;
  bool isnull = true;
  Datum d = em->value_fn ? em->value_fn(em->value_arg, n, &isnull) : (Datum)0;
  if (IsA(n, Const)) {
    Const* c = reinterpret_cast<Const*>(n);
    isnull = c->constisnull;
    d = c->constvalue;
  }
  Value v{0};
  if (!isnull) v = datum_value(*out, d);
  emit(em, Op::Const, *out, add_const(em, v, isnull));
  return true;
}

// Known when the scan starts: constants, the query's $n, and PARAM_EXEC
// values (an InitPlan's result, an outer row's column in a correlated
// subquery). The scan compiles its program again on every rescan, and
// PostgreSQL rescans it when a PARAM_EXEC it depends on (custom_exprs)
// changes.
bool is_runtime_value(Node* n) {
  if (IsA(n, Const)) return true;
  if (!IsA(n, Param)) return false;
  ParamKind kind = reinterpret_cast<Param*>(n)->paramkind;
  return kind == PARAM_EXTERN || kind == PARAM_EXEC;
}

// distance(vector column, vector constant or parameter), either order.
bool compile_distance(TopKEmitter* em, List* args, int metric, Type* out) {
  if (list_length(args) != 2) return false;
  Node* a = static_cast<Node*>(linitial(args));
  Node* b = static_cast<Node*>(lsecond(args));
  bool const_first = false;
  if (!is_our_var(em, a)) {
    Node* t = a;
    a = b;
    b = t;
    const_first = true;
  }
  if (!is_our_var(em, a) || !is_runtime_value(b)) return false;
  if (!topk_is_vector_type(exprType(a)) || !topk_is_vector_type(exprType(b))) return false;
  bool isnull = true;
  Datum d = (Datum)0;
  if (IsA(b, Const)) {
    isnull = reinterpret_cast<Const*>(b)->constisnull;
    d = reinterpret_cast<Const*>(b)->constvalue;
  } else if (em->value_fn) {
    d = em->value_fn(em->value_arg, b, &isnull);
  }
  Value v{0};
  int dim = 0;
  if (!isnull) {
    Vector* q = DatumGetVector(d);
    dim = q->dim;
    // A stored vector older gknn versions could make (0, negative or too
    // many dimensions) is never copied: the planner leaves the query to
    // PostgreSQL, the executor raises the type's error.
    if (dim < 1 || dim > VECTOR_MAX_DIM) {
      if (em->value_fn) CheckDim(dim);
      return false;
    }
    ensure(em->vectors, em->capvectors, em->nvectors + dim);
    memcpy(em->vectors + em->nvectors, q->x, sizeof(float) * dim);
    v.i = (static_cast<int64>(em->nvectors) << gknn::expr::kVectorDimBits) | dim;
    em->nvectors += dim;
  }
  int col = column_index(em, reinterpret_cast<Var*>(a)->varattno, Type::Vector, dim);
  if (col < 0) return false;
  int k = add_const(em, v, isnull);
  int type = metric | (const_first ? 0x80 : 0);
  emit(em, Op::VecDist, static_cast<Type>(type), col, k);
  *out = Type::F64;
  return true;
}

bool compile_function(TopKEmitter* em, Oid fn, List* args, Type* out) {
  FnInfo f = lookup_function(fn);
  if (f.kind == FnKind::Distance) return compile_distance(em, args, f.metric, out);
  Type t;
  ListCell* lc;
  switch (f.kind) {
    case FnKind::Arith:
    case FnKind::Compare:
    case FnKind::Pow:
      if (list_length(args) != 2) return false;
      foreach (lc, args)
        if (!compile(em, static_cast<Node*>(lfirst(lc)), &t)) return false;
      emit(em, f.op, f.type);
      *out = f.kind == FnKind::Compare ? Type::Bool : f.type;
      return true;
    case FnKind::Unary:
    case FnKind::Math1:
    case FnKind::Identity:
    case FnKind::Cast:
      if (list_length(args) != 1 || !compile(em, static_cast<Node*>(linitial(args)), &t)) return false;
      if (f.kind == FnKind::Cast) {
        if (t != f.from) return false;
        emit(em, Op::Cast, f.type, 0, static_cast<int>(f.from));
      } else if (f.kind != FnKind::Identity) {
        emit(em, f.op, f.type);
      }
      *out = f.kind == FnKind::Identity ? t : f.type;
      return true;
    default:
      return false;
  }
}

bool compile_bool(TopKEmitter* em, BoolExpr* b, Type* out) {
  Type t;
  *out = Type::Bool;
  if (b->boolop == NOT_EXPR) {
    if (!compile(em, static_cast<Node*>(linitial(b->args)), &t)) return false;
    emit(em, Op::Not);
    return true;
  }
  const bool is_and = b->boolop == AND_EXPR;
  int jumps[1024], njumps = 0;
  ListCell* lc;
  bool first = true;
  foreach (lc, b->args) {
    if (!first) {
      if (njumps == 1024) return false;
      jumps[njumps++] = emit(em, is_and ? Op::JumpIfFalse : Op::JumpIfTrue);
    }
    if (!compile(em, static_cast<Node*>(lfirst(lc)), &t)) return false;
    if (!first) emit(em, is_and ? Op::And : Op::Or);
    first = false;
  }
  for (int j = 0; j < njumps; ++j) patch(em, jumps[j]);
  return true;
}

bool compile_case(TopKEmitter* em, CaseExpr* c, Type* out) {
  Node* saved = em->case_arg;
  if (c->arg) em->case_arg = reinterpret_cast<Node*>(c->arg);
  int ends[1024], nends = 0;
  ListCell* lc;
  Type t;
  bool ok = value_type(c->casetype, out);
  foreach (lc, c->args) {
    CaseWhen* w = static_cast<CaseWhen*>(lfirst(lc));
    if (!ok || nends == 1024 || !compile(em, reinterpret_cast<Node*>(w->expr), &t)) {
      ok = false;
      break;
    }
    int next = emit(em, Op::JumpIfNotTrue);
    if (!compile(em, reinterpret_cast<Node*>(w->result), &t)) {
      ok = false;
      break;
    }
    ends[nends++] = emit(em, Op::Jump);
    patch(em, next);
  }
  if (ok) {
    if (c->defresult)
      ok = compile(em, reinterpret_cast<Node*>(c->defresult), &t);
    else
      emit(em, Op::Const, *out, add_const(em, Value{0}, true));
  }
  for (int j = 0; ok && j < nends; ++j) patch(em, ends[j]);
  em->case_arg = saved;
  return ok;
}

bool compile_coalesce(TopKEmitter* em, CoalesceExpr* c, Type* out) {
  int ends[1024], nends = 0;
  ListCell* lc;
  Type t;
  if (!value_type(c->coalescetype, out)) return false;
  foreach (lc, c->args) {
    if (nends == 1024 || !compile(em, static_cast<Node*>(lfirst(lc)), &t)) return false;
    if (lnext(c->args, lc)) {
      ends[nends++] = emit(em, Op::JumpIfNotNull);
      emit(em, Op::Pop);
    }
  }
  for (int j = 0; j < nends; ++j) patch(em, ends[j]);
  return true;
}

bool compile_minmax(TopKEmitter* em, MinMaxExpr* m, Type* out) {
  ListCell* lc;
  Type t;
  if (!value_type(m->minmaxtype, out)) return false;
  bool first = true;
  foreach (lc, m->args) {
    if (!compile(em, static_cast<Node*>(lfirst(lc)), &t)) return false;
    if (!first) emit(em, m->op == IS_GREATEST ? Op::Greatest : Op::Least, compare_type(*out));
    first = false;
  }
  return true;
}

// x = ANY ('{...}') and x <> ALL ('{...}') over a constant array.
bool compile_in_list(TopKEmitter* em, ScalarArrayOpExpr* s, Type* out) {
  if (list_length(s->args) != 2) return false;
  Node* arr = static_cast<Node*>(lsecond(s->args));
  if (!IsA(arr, Const) || reinterpret_cast<Const*>(arr)->constisnull) return false;
  FnInfo f = lookup_function(s->opfuncid);
  if (f.kind != FnKind::Compare || f.op != (s->useOr ? Op::Eq : Op::Ne)) return false;
  Type t;
  if (!compile(em, static_cast<Node*>(linitial(s->args)), &t)) return false;
  ArrayType* a = DatumGetArrayTypeP(reinterpret_cast<Const*>(arr)->constvalue);
  Type et;
  if (!value_type(ARR_ELEMTYPE(a), &et)) return false;
  int16 typlen;
  bool typbyval;
  char typalign;
  get_typlenbyvalalign(ARR_ELEMTYPE(a), &typlen, &typbyval, &typalign);
  Datum* elems;
  bool* nulls;
  int n;
  deconstruct_array(a, ARR_ELEMTYPE(a), typlen, typbyval, typalign, &elems, &nulls, &n);
  if (n > 65535) return false;
  int first = em->nconst;
  for (int j = 0; j < n; ++j) add_const(em, nulls[j] ? Value{0} : datum_value(et, elems[j]), nulls[j]);
  emit(em, Op::InList, f.type, first, n);
  if (!s->useOr) emit(em, Op::Not);
  *out = Type::Bool;
  return true;
}

// ---- numeric, where float8 is exact ----
//
// A numeric expression compiles only where evaluating it in float8 gives
// exactly PostgreSQL's numeric value at every step, so that its order,
// comparisons and ties are PostgreSQL's: integer columns (int2, int4) cast to
// numeric, numeric constants that are dyadic (m / 2^e, e.g. 0.5, 0.25, 3,
// but not 0.1), and + - * unary minus/plus and abs over them. Every
// subexpression is a multiple of 2^-e with |value| * 2^e <= B; while
// B <= 2^53 the value is a double, so IEEE arithmetic on exact operands is
// exact (numeric's + - * are exact too: their result scale is the inputs').
// int8, numeric columns, parameters, division and anything else do not
// compile. The output values themselves are PostgreSQL's: GpuTopK projects
// the fetched tuples with the original target list.
struct NumBound {
  int e = 0;                // binary digits after the point
  unsigned __int128 B = 0;  // |value| * 2^e <= B
  int dscale = 0;           // numeric's display scale of the result
};

constexpr unsigned __int128 kExactMax = static_cast<unsigned __int128>(1) << 53;
constexpr int kMaxBinaryScale = 1000;  // 2^-1000 and its multiples below 2^53 are normal doubles

enum class NumFn { None, Add, Sub, Mul, Neg, Plus, Abs, FromI16, FromI32, FromI64 };

NumFn numeric_function(Oid fn) {
  char name[NAMEDATALEN * 2];
  bool is_gknn = false;
  if (!function_symbol(fn, name, sizeof(name), &is_gknn) || is_gknn) return NumFn::None;
  const struct {
    const char* name;
    NumFn fn;
  } fns[] = {
      {"numeric_add", NumFn::Add},      {"numeric_sub", NumFn::Sub},      {"numeric_mul", NumFn::Mul},
      {"numeric_uminus", NumFn::Neg},   {"numeric_uplus", NumFn::Plus},   {"numeric_abs", NumFn::Abs},
      {"int2_numeric", NumFn::FromI16}, {"int4_numeric", NumFn::FromI32}, {"int8_numeric", NumFn::FromI64}};
  for (const auto& f : fns)
    if (strcmp(name, f.name) == 0) return f.fn;
  return NumFn::None;
}

// A finite numeric constant as m / 2^e (m < 2^53), from its decimal text.
bool numeric_const_dyadic(Datum d, bool* negative, unsigned __int128* m, int* e, int* dscale) {
  const char* s = DatumGetCString(DirectFunctionCall1(numeric_out, d));
  *negative = *s == '-';
  if (*negative) ++s;
  unsigned __int128 n = 0;
  int digits = 0, scale = 0;
  bool point = false;
  for (; *s; ++s) {
    if (*s == '.' && !point) {
      point = true;
      continue;
    }
    if (*s < '0' || *s > '9') return false;  // NaN, Infinity
    if (n != 0 || *s != '0') ++digits;
    if (digits > 37) return false;
    n = n * 10 + (*s - '0');
    scale += point;
  }
  if (scale > kMaxBinaryScale) return false;
  for (int i = 0; i < scale; ++i) {  // n / 10^scale = (n / 5^scale) / 2^scale
    if (n % 5 != 0) return false;
    n /= 5;
  }
  int bin = scale;
  while (bin > 0 && n % 2 == 0 && n != 0) n /= 2, --bin;
  if (n == 0) bin = 0;
  if (n > kExactMax) return false;
  *m = n;
  *e = bin;
  *dscale = scale;
  return true;
}

bool numeric_bound(Node* node, NumBound* b) {
  check_stack_depth();
  if (IsA(node, Const)) {
    Const* c = reinterpret_cast<Const*>(node);
    if (c->consttype != NUMERICOID || c->constisnull) {
      *b = NumBound();  // NULL: no value
      return c->consttype == NUMERICOID;
    }
    bool neg;
    return numeric_const_dyadic(c->constvalue, &neg, &b->B, &b->e, &b->dscale);
  }
  Oid fn = InvalidOid;
  List* args = NIL;
  if (IsA(node, OpExpr) && !reinterpret_cast<OpExpr*>(node)->opretset) {
    OpExpr* o = reinterpret_cast<OpExpr*>(node);
    fn = o->opfuncid ? o->opfuncid : get_opcode(o->opno);
    args = o->args;
  } else if (IsA(node, FuncExpr) && !reinterpret_cast<FuncExpr*>(node)->funcretset) {
    fn = reinterpret_cast<FuncExpr*>(node)->funcid;
    args = reinterpret_cast<FuncExpr*>(node)->args;
  } else {
    return false;
  }
  NumFn f = numeric_function(fn);
  NumBound x, y;
  switch (f) {
    case NumFn::FromI16:
    case NumFn::FromI32:
      if (list_length(args) != 1) return false;
      b->e = 0;
      b->B = static_cast<unsigned __int128>(1) << (f == NumFn::FromI16 ? 15 : 31);
      b->dscale = 0;
      return true;
    case NumFn::Neg:
    case NumFn::Plus:
    case NumFn::Abs:
      return list_length(args) == 1 && numeric_bound(static_cast<Node*>(linitial(args)), b);
    case NumFn::Add:
    case NumFn::Sub:
    case NumFn::Mul:
      if (list_length(args) != 2 || !numeric_bound(static_cast<Node*>(linitial(args)), &x) ||
          !numeric_bound(static_cast<Node*>(lsecond(args)), &y))
        return false;
      if (f == NumFn::Mul) {
        b->e = x.e + y.e;
        b->B = x.B * y.B;  // both <= 2^53: no overflow
        b->dscale = x.dscale + y.dscale;
      } else {
        b->e = Max(x.e, y.e);
        const int sx = b->e - x.e, sy = b->e - y.e;
        if ((x.B != 0 && sx > 53) || (y.B != 0 && sy > 53)) return false;
        b->B = (x.B << (x.B ? sx : 0)) + (y.B << (y.B ? sy : 0));
        b->dscale = Max(x.dscale, y.dscale);
      }
      return b->B <= kExactMax && b->e <= kMaxBinaryScale && b->dscale <= kMaxBinaryScale;
    default:  // int8 (up to 2^63), division, anything else
      return false;
  }
}

bool compile_numeric(TopKEmitter* em, Node* node, Type* out) {
  NumBound b;
  if (!numeric_bound(node, &b)) return false;
  *out = Type::F64;
  if (IsA(node, Const)) {
    Const* c = reinterpret_cast<Const*>(node);
    Value v{0};
    if (!c->constisnull) {
      bool neg;
      unsigned __int128 m;
      int e, dscale;
      numeric_const_dyadic(c->constvalue, &neg, &m, &e, &dscale);
      v.f = std::ldexp(static_cast<double>(m), -e);  // m < 2^53: exact
      if (neg) v.f = -v.f;
    }
    emit(em, Op::Const, Type::F64, add_const(em, v, c->constisnull));
    return true;
  }
  List* args =
      IsA(node, OpExpr) ? reinterpret_cast<OpExpr*>(node)->args : reinterpret_cast<FuncExpr*>(node)->args;
  NumFn f = numeric_function(IsA(node, OpExpr) ? (reinterpret_cast<OpExpr*>(node)->opfuncid
                                                      ? reinterpret_cast<OpExpr*>(node)->opfuncid
                                                      : get_opcode(reinterpret_cast<OpExpr*>(node)->opno))
                                               : reinterpret_cast<FuncExpr*>(node)->funcid);
  Type t;
  ListCell* lc;
  foreach (lc, args)
    if (!compile(em, static_cast<Node*>(lfirst(lc)), &t)) return false;
  switch (f) {
    case NumFn::FromI16:
    case NumFn::FromI32:
      if (t != (f == NumFn::FromI16 ? Type::I16 : Type::I32)) return false;
      emit(em, Op::Cast, Type::F64, 0, static_cast<int>(t));
      return true;
    case NumFn::Neg:
      emit(em, Op::Neg, Type::F64);
      return true;
    case NumFn::Abs:
      emit(em, Op::Abs, Type::F64);
      return true;
    case NumFn::Plus:
      return true;
    case NumFn::Add:
      emit(em, Op::Add, Type::F64);
      return true;
    case NumFn::Sub:
      emit(em, Op::Sub, Type::F64);
      return true;
    case NumFn::Mul:
      emit(em, Op::Mul, Type::F64);
      return true;
    default:
      return false;
  }
}

bool compile(TopKEmitter* em, Node* node, Type* out) {
  if (node == nullptr) return false;
  check_stack_depth();
  if (exprType(node) == NUMERICOID) return compile_numeric(em, node, out);
  switch (nodeTag(node)) {
    case T_Var: {
      if (!is_our_var(em, node) || !value_type(exprType(node), out)) return false;
      int col = column_index(em, reinterpret_cast<Var*>(node)->varattno, *out, 0);
      if (col < 0) return false;
      emit(em, Op::Col, *out, col);
      return true;
    }
    case T_Const:
    case T_Param:
      if (!is_runtime_value(node)) return false;
      return compile_value(em, node, exprType(node), out);
    case T_OpExpr: {
      OpExpr* o = reinterpret_cast<OpExpr*>(node);
      return !o->opretset &&
             compile_function(em, o->opfuncid ? o->opfuncid : get_opcode(o->opno), o->args, out);
    }
    case T_FuncExpr: {
      FuncExpr* f = reinterpret_cast<FuncExpr*>(node);
      return !f->funcretset && !f->funcvariadic && compile_function(em, f->funcid, f->args, out);
    }
    case T_BoolExpr:
      return compile_bool(em, reinterpret_cast<BoolExpr*>(node), out);
    case T_NullTest: {
      NullTest* t = reinterpret_cast<NullTest*>(node);
      Type at;
      if (t->argisrow || !compile(em, reinterpret_cast<Node*>(t->arg), &at)) return false;
      emit(em, t->nulltesttype == IS_NULL ? Op::IsNull : Op::IsNotNull);
      *out = Type::Bool;
      return true;
    }
    case T_BooleanTest: {
      BooleanTest* t = reinterpret_cast<BooleanTest*>(node);
      Type at;
      if (!compile(em, reinterpret_cast<Node*>(t->arg), &at)) return false;
      const Op ops[] = {Op::IsTrue,     Op::IsNotTrue, Op::IsFalse,
                        Op::IsNotFalse, Op::IsUnknown, Op::IsNotUnknown};
      emit(em, ops[t->booltesttype]);
      *out = Type::Bool;
      return true;
    }
    case T_CaseExpr:
      return compile_case(em, reinterpret_cast<CaseExpr*>(node), out);
    case T_CaseTestExpr:
      return em->case_arg != nullptr && compile(em, em->case_arg, out);
    case T_CoalesceExpr:
      return compile_coalesce(em, reinterpret_cast<CoalesceExpr*>(node), out);
    case T_MinMaxExpr:
      return compile_minmax(em, reinterpret_cast<MinMaxExpr*>(node), out);
    case T_ScalarArrayOpExpr:
      return compile_in_list(em, reinterpret_cast<ScalarArrayOpExpr*>(node), out);
    case T_RelabelType: {
      RelabelType* r = reinterpret_cast<RelabelType*>(node);
      Type rt;
      return value_type(r->resulttype, &rt) && compile(em, reinterpret_cast<Node*>(r->arg), out) &&
             *out == rt;
    }
    default:
      return false;
  }
}

}  // namespace

void topk_emitter_init(TopKEmitter* em, Index scanrelid, TopKValueFn fn, void* arg) {
  *em = TopKEmitter();
  em->scanrelid = scanrelid;
  em->value_fn = fn;
  em->value_arg = arg;
}

bool topk_compile_quals(TopKEmitter* em, List* quals) {
  if (quals == NIL) return true;
  em->qual.begin = em->ncode;
  if (list_length(quals) == 1) {
    Type t;
    if (!compile(em, static_cast<Node*>(linitial(quals)), &t) || t != Type::Bool) return false;
  } else {
    BoolExpr b;
    memset(&b, 0, sizeof(b));
    b.xpr.type = T_BoolExpr;
    b.boolop = AND_EXPR;
    b.args = quals;
    Type t;
    if (!compile_bool(em, &b, &t)) return false;
  }
  em->qual.end = em->ncode;
  return true;
}

bool topk_compile_key(TopKEmitter* em, Expr* expr, bool descending, bool nulls_first) {
  gknn::expr::SortKey k;
  k.code.begin = em->ncode;
  Type t;
  if (!compile(em, reinterpret_cast<Node*>(expr), &t)) return false;
  k.code.end = em->ncode;
  k.type = t;
  k.descending = descending;
  k.nulls_first = nulls_first;
  int limbs = 0;
  for (int j = 0; j < em->nkeys; ++j) limbs += em->keys[j].limbs();
  if (limbs + k.limbs() > gknn::expr::kMaxKeyLimbs) return false;
  em->keys[em->nkeys++] = k;
  return true;
}

bool topk_compile_checks(TopKEmitter* em, List* exprs) {
  if (exprs == NIL) return true;
  em->check.begin = em->ncode;
  ListCell* lc;
  foreach (lc, exprs) {
    Type t;
    if (!compile(em, static_cast<Node*>(lfirst(lc)), &t)) return false;
    emit(em, Op::Pop);
  }
  Value one{1};
  emit(em, Op::Const, Type::Bool, add_const(em, one, false));
  em->check.end = em->ncode;
  return true;
}

bool topk_expr_compiles(Index scanrelid, Expr* expr) {
  TopKEmitter em;
  topk_emitter_init(&em, scanrelid, nullptr, nullptr);
  Type t;
  return compile(&em, reinterpret_cast<Node*>(expr), &t);
}

bool topk_sortop_direction(Oid sortop, Oid type, bool* descending) {
  TypeCacheEntry* tc = lookup_type_cache(type, TYPECACHE_LT_OPR | TYPECACHE_GT_OPR);
  if (sortop == tc->lt_opr) {
    *descending = false;
    return true;
  }
  if (sortop == tc->gt_opr) {
    *descending = true;
    return true;
  }
  return false;
}

bool topk_is_vector_type(Oid type) {
  HeapTuple tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(type));
  if (!HeapTupleIsValid(tup)) return false;
  Oid input = reinterpret_cast<Form_pg_type>(GETSTRUCT(tup))->typinput;
  ReleaseSysCache(tup);
  tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(input));
  if (!HeapTupleIsValid(tup)) return false;
  char name[NAMEDATALEN * 2];
  bool ok = gknn_symbol(tup, name, sizeof(name)) && strcmp(name, "vector_in") == 0;
  ReleaseSysCache(tup);
  return ok;
}
