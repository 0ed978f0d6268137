// Expression bytecode for GpuTopK: the quals and ORDER BY keys of
// `SELECT ... WHERE quals ORDER BY keys LIMIT k`, compiled by the extension
// from PostgreSQL expressions and run by one interpreter (expr/interp.cuh)
// on the CPU and inside the GPU's top-k kernels, so both agree on every value,
// every NULL and every error.
//
// A program is a stack machine over 8-byte values, each with a null flag.
// Types are resolved at compile time: each instruction names the type it
// works on, so values carry no type at run time. Integers of every width
// (int2, int4, int8, date, timestamp) sit widened in `i`; float4 and float8
// sit in `f` (a float4 is a double that is exactly a float); bool is i = 0/1.
//
// Segments of one program: the qual (a SQL bool; a row passes when it is
// true), one segment per ORDER BY key, and "check" segments whose values are
// discarded but whose errors count (target list expressions PostgreSQL would
// compute for every row below its Sort).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#define GKNN_EXPR_HOSTDEV __host__ __device__
#else
#define GKNN_EXPR_HOSTDEV
#endif

namespace gknn::expr {

// Value types. Storage types of batch columns use the same names.
enum class Type : std::uint8_t { Bool, I16, I32, I64, F32, F64, Date, Timestamp, Vector };

enum class Op : std::uint8_t {
  Col,    // push column `arg` (type = storage type)
  Const,  // push constant `arg`
  Pop,    // drop the top
  Add,    // binary arithmetic on `type` (result of that type)
  Sub,
  Mul,
  Div,
  Mod,  // integers only
  Neg,  // unary
  Abs,
  Eq,  // comparisons of two values of `type` (I64: any integer/date/timestamp; F64: float4/8; Bool)
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  Not,  // three-valued
  And,  // combine the top two (three-valued)
  Or,
  JumpIfFalse,    // top is false (not null): jump to `arg`, keep it
  JumpIfTrue,     // top is true: jump to `arg`, keep it
  JumpIfNotTrue,  // pop; jump to `arg` unless it was true (CASE WHEN)
  JumpIfNotNull,  // top not null: jump to `arg`, keep it (COALESCE)
  Jump,
  IsNull,
  IsNotNull,
  IsTrue,  // BooleanTest: never null
  IsNotTrue,
  IsFalse,
  IsNotFalse,
  IsUnknown,
  IsNotUnknown,
  Cast,  // to `type` from Type(aux)
  Sqrt,  // float8 functions
  Ln,
  Exp,
  Pow,
  Floor,
  Ceil,
  Greatest,  // combine the top two, NULLs ignored (type: comparison type)
  Least,
  InList,   // x = ANY(constants arg .. arg + aux) of `type`
  VecDist,  // distance of vector column `arg` to vector constant `aux`, metric = Metric(type)
};

struct Instr {
  Op op;
  std::uint8_t type;  // a Type (or a Metric for VecDist)
  std::uint16_t aux;
  std::int32_t arg;
};

union Value {
  std::int64_t i;
  double f;
};

// Errors an expression raises, PostgreSQL's (the extension maps each to its
// SQLSTATE and message).
enum class ErrorKind : std::uint8_t {
  None = 0,
  SmallintRange,    // 22003 smallint out of range
  IntegerRange,     // 22003 integer out of range
  BigintRange,      // 22003 bigint out of range
  DivisionByZero,   // 22012 division by zero
  FloatOverflow,    // 22003 value out of range: overflow
  FloatUnderflow,   // 22003 value out of range: underflow
  SqrtNegative,     // 2201F cannot take square root of a negative number
  LogZero,          // 2201E cannot take logarithm of zero
  LogNegative,      // 2201E cannot take logarithm of a negative number
  PowZeroNegative,  // 2201F zero raised to a negative power is undefined
  PowNegativeFrac,  // 2201F a negative number raised to a non-integer power yields a complex result
  TimestampRange,   // 22008 date out of range for timestamp
  VectorDims,       // 22000 different vector dimensions %d and %d
  StackOverflow,    // internal: the compiler bounds the depth, so never
};

constexpr int kMaxStack = 32;

// A vector constant in `Program::vectors`: constant value i = offset << 20 | dim.
constexpr int kVectorDimBits = 20;

struct Segment {
  std::int32_t begin = 0, end = 0;  // [begin, end) in code; empty: absent
  GKNN_EXPR_HOSTDEV bool empty() const { return begin == end; }
};

// How an ORDER BY key becomes ordered 64-bit limbs (row_key.cuh).
enum class KeyKind : std::uint8_t {
  Narrow,  // any value whose ordered bits leave 0 and ~0 free (int2/int4/date/bool/float4/float8): one limb
  Wide,    // int8/timestamp: a null-rank limb and a value limb
};

struct SortKey {
  Segment code;
  Type type;  // the value's type (I64 for every integer, F64 for floats)
  bool descending = false;
  bool nulls_first = false;
  GKNN_EXPR_HOSTDEV KeyKind kind() const {
    return (type == Type::I64 || type == Type::Timestamp) ? KeyKind::Wide : KeyKind::Narrow;
  }
  GKNN_EXPR_HOSTDEV int limbs() const { return kind() == KeyKind::Wide ? 2 : 1; }
};

// At most this many key limbs (the row id takes one more).
constexpr int kMaxKeyLimbs = 3;

struct Program {
  std::vector<Instr> code;
  std::vector<Value> consts;
  std::vector<std::uint8_t> const_nulls;
  std::vector<float> vectors;  // vector constants, concatenated
  Segment qual;                // empty: every row passes
  std::vector<SortKey> keys;   // at most kMaxKeyLimbs limbs in all
  Segment check;               // run on passing rows for its errors only

  int key_limbs() const {
    int n = 0;
    for (const SortKey& k : keys) n += k.limbs();
    return n;
  }
};

// Checks a program against a batch schema: jumps inside their segment,
// constants and columns in range, column types as the instructions expect,
// stack depth within kMaxStack (by simulation). Throws gknn::Error
// (InvalidArgument), so a compiler bug is an error, not a wild read.
struct ColumnSpec {
  Type type = Type::I64;
  std::int32_t dim = 0;  // vectors: the dimension expected (rows of another dimension raise VectorDims)
};
void validate(const Program& program, const std::vector<ColumnSpec>& columns);

// ---- Columnar batches ----

// Storage per row: I16 int16, I32 int32, Date int32, I64/Timestamp int64,
// F32 float, F64 double, Bool uint8, Vector `dim` floats (and its dimension
// in `dims`; rows of another dimension keep only their dimension).
struct ColumnView {
  Type type = Type::I64;
  void* data = nullptr;
  std::uint8_t* nulls = nullptr;  // one byte per row, 1 = NULL (the producer always fills it)
  std::int32_t* dims = nullptr;   // vectors only
  std::int32_t dim = 0;
  // Vectors on the GPU: each row's distance to one constant, computed before
  // the interpreter runs (gpu/expr/vector_distances.cuh), for the VecDist
  // whose aux << 8 | metric is dist_key; null otherwise.
  std::int32_t dist_key = -1;
  const double* dist = nullptr;
};

constexpr int kMaxColumns = 32;

// n rows of up to kMaxColumns columns plus row ids. A row id is the TID
// (block << 16 | offset), which orders like PostgreSQL's TIDs; ties between
// equal ORDER BY keys break by it, the same on the CPU and the GPU.
struct BatchView {
  std::int64_t n = 0;
  std::int64_t capacity = 0;
  std::uint64_t* row_ids = nullptr;
  int columns = 0;
  ColumnView column[kMaxColumns];
};

inline std::uint64_t make_row_id(std::uint32_t block, std::uint16_t offset) {
  return (static_cast<std::uint64_t>(block) << 16) | offset;
}

// ---- Running top-k over batches ----

// A selected row: key limbs then the row id, compared lexicographically.
struct Selected {
  std::uint64_t limbs[kMaxKeyLimbs + 1] = {0, 0, 0, 0};
  int nlimbs = 0;
  std::uint64_t row_id() const { return limbs[nlimbs - 1]; }
};

// The first error in scan order: batches are pushed in scan order and within
// a batch the smallest row position wins.
struct EvalError {
  ErrorKind kind = ErrorKind::None;
  std::uint64_t row_id = 0;
  std::int32_t detail[2] = {0, 0};  // VectorDims: the two dimensions
};

struct TopKStats {
  std::int64_t rows_scanned = 0;
  std::int64_t rows_passed = 0;  // rows whose qual was true
  std::int64_t batches = 0;
  std::int64_t bytes_to_device = 0;
  double device_ms = 0;  // GPU time (kernels and copies), 0 on the CPU
};

// Batches kept after ranking, for ranking again with no heap scan and no
// copy (DESIGN.md stage 5: GpuTopK's columnar table cache). They live where
// the TopK that kept them runs (device memory for the GPU, host memory for
// the CPU), each compacted to its rows, in push order.
class ResidentBatches {
 public:
  virtual ~ResidentBatches() = default;
  virtual std::int64_t rows() const = 0;
  virtual std::size_t bytes() const = 0;
  virtual int device() const = 0;  // -1: host memory
};

// Keeps the k best rows of every batch pushed so far. Implementations: CPU
// (the interpreter per row, a bounded heap) and GPU (upload, fused top-k
// kernel, merge on the host). Both give the same rows in the same order.
//
// The caller fills batches the TopK owns (pinned host memory for the GPU,
// so the copy of one batch overlaps the filling of the next):
//   for (;;) { BatchView& b = t.next_batch(); fill b.n rows; if (!t.push(err)) raise; }
//   if (!t.finish(err)) raise; t.result();
class TopK {
 public:
  virtual ~TopK() = default;
  // A batch to fill (capacity rows); waits until its buffers are free.
  virtual BatchView& next_batch() = 0;
  // Queues the batch last returned by next_batch(). Returns false and fills
  // `error` once a row has raised (possibly of an earlier batch).
  virtual bool push(EvalError& error) = 0;
  // Waits for every queued batch.
  virtual bool finish(EvalError& error) = 0;
  // The selected rows, best first (at most k), after finish().
  virtual std::vector<Selected> result() = 0;
  virtual const TopKStats& stats() const = 0;
  virtual bool on_gpu() const = 0;
  // Every batch pushed from now on is also copied into a store, until
  // keep_stop() hands it over (the caller owns it; it may outlive this
  // TopK). A store that would pass max_bytes, or find no device memory, is
  // given up: keep_stop() returns null.
  virtual void keep_start(std::size_t max_bytes) = 0;
  virtual ResidentBatches* keep_stop() = 0;
  // Ranks every batch of a store kept by a TopK of the same columns and
  // device, as if they were pushed in their order.
  virtual bool push_resident(const ResidentBatches& r, EvalError& error) = 0;
};

// `program` is validated and copied. k >= 0 (k rows are kept); batches hold
// `capacity` rows of `columns`.
TopK* make_topk_cpu(const Program& program, const std::vector<ColumnSpec>& columns, std::int64_t capacity,
                    std::int64_t k);
// device = CUDA ordinal. Throws gknn::Error (NoDevice; InvalidArgument when
// gpu_supports is false).
TopK* make_topk_gpu(const Program& program, const std::vector<ColumnSpec>& columns, std::int64_t capacity,
                    std::int64_t k, int device);
// The GPU TopK ranks kept batches (push_resident) in groups of up to
// max(capacity, this) row positions: one launch and one top-k per group. Each
// of its two slots then holds a word (8 bytes per key limb, plus 8) per
// position, and a sixteenth of that again for the sort.
constexpr std::int64_t kKeptGroupPositions = std::int64_t(1) << 21;

// Whether make_topk_gpu takes this shape (else the CPU runs it).
bool gpu_supports(const Program& program, std::int64_t k);

// ---- Programs ranked together over the same kept batches ----

// One program of rank_kept_shared, and what it gets: the rows, the first
// error in scan order and the counts a TopK of its own would give after
// push_resident of each store, then finish.
struct KeptQuery {
  const Program* program = nullptr;
  std::int64_t k = 0;
  std::vector<Selected> rows;  // best first, at most k
  EvalError error;             // kind None: no row raised
  TopKStats stats;
};

// Ranks every query over the same stores (kept by TopKs of `columns` on
// `device`; -1: the CPU). On the GPU (each query gpu_supports) the queries
// of the same key width, run length and vector distances share launches:
// each row's vector is read once for all their distances (to each its own
// constant), one row_words launch and one top-k pipeline serve them all (the
// GPU service ranks concurrent sessions' cache hits so). Throws gknn::Error
// (InvalidArgument: a program or store that does not fit).
void rank_kept_shared(const std::vector<const ResidentBatches*>& stores,
                      const std::vector<ColumnSpec>& columns, std::vector<KeptQuery>& queries, int device);

// Evaluates one row with the CPU interpreter: whether the qual passed, the
// key limbs (plus row id) when it did; ErrorKind::None unless it raised.
ErrorKind eval_row_cpu(const Program& program, const BatchView& batch, std::int64_t row, bool& passed,
                       Selected& word, std::int32_t detail[2]);

// The message PostgreSQL gives for an error (no SQLSTATE; see the extension).
std::string error_message(const EvalError& e);

}  // namespace gknn::expr
