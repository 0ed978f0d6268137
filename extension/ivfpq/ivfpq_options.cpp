// gpu_ivfpq reloptions: WITH (lists, m, nbits, training_sample, kmeans_iters),
// and the checks of a parameter set against the indexed dimension.
#include "ivfpq.h"

extern "C" {
#include "access/reloptions.h"
#include "lib/stringinfo.h"
}

static relopt_kind ivfpq_relopt_kind;

void ivfpq_register_options() {
  ivfpq_relopt_kind = add_reloption_kind();
  add_int_reloption(ivfpq_relopt_kind, "lists", "Number of coarse lists (IVF centroids)", kIvfpqDefaultLists,
                    1, kIvfpqMaxLists, AccessExclusiveLock);
  add_int_reloption(ivfpq_relopt_kind, "m",
                    "Number of PQ sub-quantizers (divides the dimension; 0: automatic)", 0, 0,
                    gknn::ivfpq::kMaxDim, AccessExclusiveLock);
  add_int_reloption(ivfpq_relopt_kind, "nbits", "Bits per PQ sub-quantizer code", kIvfpqDefaultNbits,
                    gknn::ivfpq::kMinNbits, gknn::ivfpq::kMaxNbits, AccessExclusiveLock);
  add_int_reloption(ivfpq_relopt_kind, "training_sample", "Rows sampled for training (0: automatic)", 0, 0,
                    kIvfpqMaxTrainingSample, AccessExclusiveLock);
  add_int_reloption(ivfpq_relopt_kind, "kmeans_iters", "k-means iterations when training", kIvfpqDefaultIters,
                    1, 1000, AccessExclusiveLock);
}

bytea* ivfpq_options(Datum reloptions, bool validate) {
  static const relopt_parse_elt tab[] = {
      {"lists", RELOPT_TYPE_INT, offsetof(IvfpqOptions, lists)},
      {"m", RELOPT_TYPE_INT, offsetof(IvfpqOptions, m)},
      {"nbits", RELOPT_TYPE_INT, offsetof(IvfpqOptions, nbits)},
      {"training_sample", RELOPT_TYPE_INT, offsetof(IvfpqOptions, training_sample)},
      {"kmeans_iters", RELOPT_TYPE_INT, offsetof(IvfpqOptions, kmeans_iters)},
  };
  return static_cast<bytea*>(
      build_reloptions(reloptions, validate, ivfpq_relopt_kind, sizeof(IvfpqOptions), tab, lengthof(tab)));
}

IvfpqOptions ivfpq_get_options(Relation index) {
  IvfpqOptions o{};
  o.lists = kIvfpqDefaultLists;
  o.m = 0;
  o.nbits = kIvfpqDefaultNbits;
  o.training_sample = 0;
  o.kmeans_iters = kIvfpqDefaultIters;
  if (index->rd_options) o = *reinterpret_cast<IvfpqOptions*>(index->rd_options);
  return o;
}

int ivfpq_default_m(int dim) {
  int cap = Max(1, Min(64, dim / 2));
  for (int m = cap; m > 1; --m)
    if (dim % m == 0) return m;
  return 1;
}

int64 ivfpq_default_training_sample(int lists) {
  int64 n = static_cast<int64>(lists) * 50;
  return Min(Max(n, static_cast<int64>(10000)), static_cast<int64>(100000));
}

void ivfpq_check_vector_dim(int dim) {
  if (dim < 1)
    ereport(ERROR,
            (errcode(ERRCODE_DATA_EXCEPTION), errmsg("gpu_ivfpq cannot index a vector of %d dimensions", dim),
             errdetail("A vector has 1 to %d dimensions.", gknn::ivfpq::kMaxDim),
             errhint("Find the row with vector_dims() and correct or delete it.")));
  if (dim > gknn::ivfpq::kMaxDim)
    ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                    errmsg("gpu_ivfpq indexes at most %d dimensions, the column has %d", gknn::ivfpq::kMaxDim,
                           dim)));
}

void ivfpq_check_params(int dim, int m, int nbits) {
  ivfpq_check_vector_dim(dim);
  if (m > dim || dim % m != 0) {
    StringInfoData valid;
    initStringInfo(&valid);
    int shown = 0;
    for (int d = 1; d <= dim && shown < 12; ++d)
      if (dim % d == 0) appendStringInfo(&valid, shown++ ? ", %d" : "%d", d);
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("gpu_ivfpq option m = %d does not divide the vector dimension %d", m, dim),
                    errhint("m must divide %d: %s%s.", dim, valid.data, shown == 12 ? ", ..." : "")));
  }
  int code_bytes = (m * nbits + 7) / 8;
  if (code_bytes > kIvfpqMaxCodeSize)
    ereport(ERROR,
            (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
             errmsg("gpu_ivfpq codes of m = %d and nbits = %d take %d bytes, more than the %d an index "
                    "page holds",
                    m, nbits, code_bytes, kIvfpqMaxCodeSize),
             errhint("Use a smaller m.")));
}
