// gpu_ivfpq build: sample the heap (reservoir, fixed seed), train the
// quantizer, encode every vector in batches, write the pages, WAL-log them.
//
// Where training and encoding run: with gknn preloaded and its service on,
// in the service (service_build_client.cpp; gknn.device = cpu keeps them on
// this backend's CPU, and a service that stops midway hands them back to it
// under auto), so that the backend never opens CUDA; without the service,
// on the device gknn.device / gknn.gpu_id choose in this backend. The core
// gives the same quantizer and codes on every device, so the pages are the
// same either way.
//
// The indexed value is a column or an expression (table_index_build_scan
// computes it), of the operator class's type: its elements widened to float
// are trained on and encoded, and list items store them as the type stores
// them (float, binary16, a bit string).
#include <cstring>

#include "am/index_build.h"
#include "context_owned.h"
#include "device.h"
#include "ivfpq.h"
#include "service/service.h"

extern "C" {
#include "access/generic_xlog.h"
#include "access/tableam.h"
#include "access/xloginsert.h"
#include "catalog/index.h"
#include "commands/progress.h"
#include "common/pg_prng.h"
#include "pgstat.h"
#include "utils/memutils.h"
#include "utils/backend_progress.h"
}

namespace {

// The quantizer lives on the C++ heap; the build's memory context owns it
// (deleted by a reset callback), so an ERROR anywhere frees it.
using QuantizerHolder = ContextOwned<gknn::ivfpq::Quantizer>;

struct BuildState {
  Relation index;
  IvfpqElement element;
  int dim;    // 0 until known (the column's typmod, or the first vector)
  int m;      // the m option (0: from the dimension) and nbits, to check a
  int nbits;  // dimension before anything is sized by it
  MemoryContext tmp;
  // sampling pass
  pg_prng_state prng;
  int64 cap;
  int64 nsample;
  int64 seen;  // non-NULL vectors
  int64 nulls;
  float* sample;
  // encoding pass
  const gknn::ivfpq::Quantizer* q;
  int device;             // where this backend trains and encodes (-1: its CPU)
  ServiceBuild* service;  // the service's session, when the service does it
  int code_size;
  int vector_dim;  // dim when items store the vector, else 0
  int lists;
  int64 batch_cap;
  int64 nbatch;
  float* batch;
  char* batch_raw;  // the stored elements, when they are not the floats (binary16)
  ItemPointerData* batch_tids;
  int32* list_of;
  uint8* codes;
  char* item;
  Page* list_pages;        // the page being filled, per list
  BlockNumber* list_last;  // the list's last written page
  Page null_page;
  BlockNumber null_last;
  Page pending_page;
  BlockNumber pending_last;
  int64 entries;
  int64 null_entries;
  int64 pending_entries;
};

[[noreturn]] void dim_mismatch(int expected, int got) {
  ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION),
                  errmsg("gpu_ivfpq: expected %d dimensions, not %d", expected, got),
                  errdetail("All vectors of a gpu_ivfpq index have the same dimension.")));
}

// The first vector fixes the dimension (unless the typmod did), checked
// before the sample is sized by it; every later vector must have it. A stored
// vector of 0 dimensions must not pass for "not known yet": the next vector
// would then set another dimension after the sample was sized (the crash of
// issue 16: a 0-dimension row, then a 16001-dimension one, overflowed it).
IvfpqValue detoast_vector(BuildState* st, Datum value) {
  IvfpqValue v = ivfpq_value(st->element, value);
  if (st->dim == 0) {
    ivfpq_check_params(v.dim, st->m > 0 ? st->m : ivfpq_default_m(v.dim), st->nbits);
    st->dim = v.dim;
  }
  if (v.dim != st->dim) dim_mismatch(st->dim, v.dim);
  return v;
}

void sample_callback(Relation, ItemPointer, Datum* values, bool* isnull, bool, void* state) {
  auto* st = static_cast<BuildState*>(state);
  if (isnull[0]) {
    st->nulls++;
    return;
  }
  MemoryContext old = MemoryContextSwitchTo(st->tmp);
  IvfpqValue v = detoast_vector(st, values[0]);
  if (st->sample == nullptr)
    st->sample = static_cast<float*>(
        MemoryContextAllocHuge(old, static_cast<Size>(st->cap) * st->dim * sizeof(float)));
  int64 slot = -1;
  if (st->nsample < st->cap) {
    slot = st->nsample++;
  } else {
    uint64 j = pg_prng_uint64_range(&st->prng, 0, static_cast<uint64>(st->seen));
    if (j < static_cast<uint64>(st->cap)) slot = static_cast<int64>(j);
  }
  if (slot >= 0) ivfpq_value_floats(st->element, v, st->sample + slot * st->dim);
  st->seen++;
  MemoryContextSwitchTo(old);
  MemoryContextReset(st->tmp);
}

// Appends a page image at the end of the index; returns its block.
// Floats packed over consecutive new pages; returns the first block.
BlockNumber write_floats(Relation index, const float* data, int64 count, uint32* npages) {
  Page page = static_cast<Page>(palloc(BLCKSZ));
  BlockNumber first = InvalidBlockNumber;
  *npages = 0;
  for (int64 done = 0; done < count;) {
    int64 n = Min(count - done, static_cast<int64>(kIvfpqFloatsPerPage));
    ivfpq_init_page(page, kIvfpqPageFloats, InvalidBlockNumber);
    memcpy(PageGetContents(page), data + done, n * sizeof(float));
    ivfpq_set_contents_size(page, n * sizeof(float));
    BlockNumber blk = index_build_append_page(index, page);
    if (first == InvalidBlockNumber) first = blk;
    ++*npages;
    done += n;
  }
  pfree(page);
  return first;
}

// Adds an item to the in-memory page of a chain, writing the page out and
// starting the next one (pointing back at it) when it is full.
void chain_add(Relation index, Page* pagep, BlockNumber* last, const char* item, Size size) {
  if (*pagep == nullptr) {
    *pagep = static_cast<Page>(palloc(BLCKSZ));
    ivfpq_init_page(*pagep, kIvfpqPageList, *last);
  } else if (PageGetFreeSpace(*pagep) < MAXALIGN(size)) {
    *last = index_build_append_page(index, *pagep);
    ivfpq_init_page(*pagep, kIvfpqPageList, *last);
  }
  if (PageAddItem(*pagep, (Item)item, size, InvalidOffsetNumber, false, false) == InvalidOffsetNumber)
    elog(ERROR, "gpu_ivfpq: could not add an item to a list page");
}

void chain_flush(Relation index, Page page, BlockNumber* last) {
  if (page != nullptr && PageGetMaxOffsetNumber(page) > 0) *last = index_build_append_page(index, page);
}

bool build_progress(gknn::ivfpq::Phase phase, std::int64_t done, std::int64_t total) {
  // Shared-memory counters only: nothing here can raise an error.
  if (phase != gknn::ivfpq::Phase::Encode)
    build_progress_report(phase == gknn::ivfpq::Phase::CoarseKmeans ? kIvfpqPhaseCoarse : kIvfpqPhasePq,
                          total, done);
  return !ivfpq_interrupt_pending();
}

// The service's progress reports of a training, shown as this backend's own.
void service_progress(int phase, int64 done, int64 total) {
  (void)build_progress(static_cast<gknn::ivfpq::Phase>(phase), done, total);
}

void encode_batch(BuildState* st) {
  if (st->nbatch == 0) return;
  // A service that went away (auto) leaves the rest to this backend's CPU.
  if (st->service && !gknn_service_build_encode(st->service, st->batch, st->nbatch, st->list_of, st->codes))
    st->service = nullptr;
  if (!st->service)
    ivfpq_core_call_cancellable([&] {
      gknn::ivfpq::encode(*st->q, st->batch, st->nbatch, st->device, st->list_of, st->codes, build_progress);
    });
  Size size = ivfpq_item_size(st->code_size, st->vector_dim, st->element);
  Size vector_bytes = ivfpq_element_bytes(st->element, st->vector_dim);
  for (int64 i = 0; i < st->nbatch; ++i) {
    int l = st->list_of[i];
    if (l < 0 || l >= st->lists) elog(ERROR, "gpu_ivfpq: encode returned list %d of %d", l, st->lists);
    memcpy(st->item, &st->batch_tids[i], sizeof(ItemPointerData));
    memcpy(st->item + sizeof(ItemPointerData), st->codes + i * st->code_size, st->code_size);
    if (st->vector_dim > 0) {
      const char* stored = st->batch_raw ? st->batch_raw + i * vector_bytes
                                         : reinterpret_cast<const char*>(st->batch + i * st->dim);
      memcpy(st->item + ivfpq_vector_offset(st->code_size), stored, vector_bytes);
    }
    chain_add(st->index, &st->list_pages[l], &st->list_last[l], st->item, size);
  }
  st->entries += st->nbatch;
  st->nbatch = 0;
  pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, st->entries + st->null_entries);
  CHECK_FOR_INTERRUPTS();
}

void encode_callback(Relation, ItemPointer tid, Datum* values, bool* isnull, bool, void* state) {
  auto* st = static_cast<BuildState*>(state);
  if (isnull[0]) {
    chain_add(st->index, &st->null_page, &st->null_last, reinterpret_cast<const char*>(tid),
              sizeof(ItemPointerData));
    st->null_entries++;
    return;
  }
  if (st->q == nullptr) {
    // No quantizer (the sampling scan saw no vectors; CREATE INDEX
    // CONCURRENTLY's second scan may see new ones): searched exactly.
    MemoryContext old = MemoryContextSwitchTo(st->tmp);
    detoast_vector(st, values[0]);
    MemoryContextSwitchTo(old);
    chain_add(st->index, &st->pending_page, &st->pending_last, reinterpret_cast<const char*>(tid),
              sizeof(ItemPointerData));
    st->pending_entries++;
    MemoryContextReset(st->tmp);
    return;
  }
  MemoryContext old = MemoryContextSwitchTo(st->tmp);
  IvfpqValue v = detoast_vector(st, values[0]);
  ivfpq_value_floats(st->element, v, st->batch + st->nbatch * st->dim);
  if (st->batch_raw) {
    Size bytes = ivfpq_element_bytes(st->element, st->dim);
    memcpy(st->batch_raw + st->nbatch * bytes, v.elements, bytes);
  }
  st->batch_tids[st->nbatch++] = *tid;
  MemoryContextSwitchTo(old);
  MemoryContextReset(st->tmp);
  if (st->nbatch == st->batch_cap) encode_batch(st);
}

IvfpqMeta empty_meta(int dim, IvfpqOpclass opclass) {
  IvfpqMeta meta;
  memset(&meta, 0, sizeof(meta));  // padding included: the metapage is written whole
  meta.magic = kIvfpqMagic;
  meta.version = ivfpq_version_for(opclass.element);
  meta.element = opclass.element;
  meta.trained = 0;
  meta.dim = dim;
  meta.metric = static_cast<int32>(opclass.metric);
  meta.seed = kIvfpqSeed;
  meta.generation = 1;
  meta.centroid_start = meta.codebook_start = meta.directory_start = InvalidBlockNumber;
  meta.pending_last = meta.null_last = InvalidBlockNumber;
  return meta;
}

int typmod_dim(Relation index) {
  int32 typmod = TupleDescAttr(RelationGetDescr(index), 0)->atttypmod;
  return typmod > 0 ? typmod : 0;
}

}  // namespace

IndexBuildResult* ivfpq_build(Relation heap, Relation index, IndexInfo* info) {
  index_build_begin(index);

  IvfpqOptions opt = ivfpq_get_options(index);
  IvfpqOpclass opclass = ivfpq_index_opclass(index);
  // With the service, this backend opens no GPU: the service or its CPU.
  const bool preloaded = gknn_service_preloaded();
  const bool use_service = preloaded && gknn_service_route().use_service;
  int device = preloaded ? gknn::ivfpq::kCpu : gknn_resolve_device();

  BuildState st{};
  st.index = index;
  st.element = opclass.element;
  st.dim = typmod_dim(index);
  st.m = opt.m;
  st.nbits = opt.nbits;
  st.tmp = AllocSetContextCreate(CurrentMemoryContext, "gpu_ivfpq build", ALLOCSET_DEFAULT_SIZES);
  if (st.dim > 0) ivfpq_check_params(st.dim, opt.m > 0 ? opt.m : ivfpq_default_m(st.dim), opt.nbits);
  st.cap = opt.training_sample > 0 ? opt.training_sample : ivfpq_default_training_sample(opt.lists);
  pg_prng_seed(&st.prng, kIvfpqSeed);

  // 1. Sample (and count) the rows.
  pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, kIvfpqPhaseSample);
  table_index_build_scan(heap, index, info, false, true, sample_callback, &st, nullptr);

  IvfpqMeta meta = empty_meta(st.dim, opclass);
  QuantizerHolder* holder = context_owned_new<gknn::ivfpq::Quantizer>();

  // Block 0 is the metapage; it is written last, once everything is known.
  Page page = static_cast<Page>(palloc0(BLCKSZ));
  ivfpq_init_meta_page(page, meta);
  index_build_append_page(index, page);

  if (st.seen > 0) {
    // 2. Train.
    int m = opt.m > 0 ? opt.m : ivfpq_default_m(st.dim);
    ivfpq_check_params(st.dim, m, opt.nbits);
    int lists = opt.lists;
    if (lists > st.seen || lists > st.nsample) {
      int64 clamp = Min(st.seen, st.nsample);
      ereport(
          WARNING,
          (errmsg("gpu_ivfpq: lists = %d is more than the %lld rows %s; using %lld lists", lists,
                  static_cast<long long>(clamp), clamp < st.seen ? "sampled for training" : "in the table",
                  static_cast<long long>(clamp)),
           errhint("REINDEX once the table has more rows, or lower lists or raise training_sample.")));
      lists = static_cast<int>(clamp);
    }
    gknn::ivfpq::Params p;
    p.dim = st.dim;
    p.lists = lists;
    p.m = m;
    p.nbits = opt.nbits;
    p.metric = opclass.metric;
    p.kmeans_iters = opt.kmeans_iters;
    p.seed = kIvfpqSeed;
    gknn_pg::core_call([&] {
      gknn::ivfpq::validate(p);
      holder->object = new gknn::ivfpq::Quantizer();
    });
    st.batch_cap =
        Max(static_cast<int64>(1), Min(static_cast<int64>(8192), (int64{64} << 20) / (4 * st.dim)));
    if (use_service) st.service = gknn_service_build_begin(p, st.nsample, st.batch_cap);
    if (st.service && !gknn_service_build_train(st.service, st.sample, service_progress, holder->object))
      st.service = nullptr;  // gone (auto): trained here instead
    if (!st.service)
      ivfpq_core_call_cancellable(
          [&] { *holder->object = gknn::ivfpq::train(p, st.sample, st.nsample, device, build_progress); });
    CHECK_FOR_INTERRUPTS();
    const gknn::ivfpq::Quantizer* q = holder->object;
    pfree(st.sample);
    st.sample = nullptr;

    meta.trained = 1;
    meta.lists = q->params.lists;
    meta.m = q->params.m;
    meta.nbits = q->params.nbits;
    meta.kmeans_iters = q->params.kmeans_iters;
    gknn_pg::core_call([&] { meta.code_size = gknn::ivfpq::code_size(q->params); });
    meta.build_rows = st.seen;
    meta.sample_rows = st.nsample;
    meta.stores_vectors = ivfpq_vectors_fit(meta.code_size, st.dim, st.element) ? 1 : 0;
    if (q->centroids.size() != static_cast<size_t>(meta.lists) * st.dim ||
        q->codebooks.size() != static_cast<size_t>(st.dim) << meta.nbits)
      elog(ERROR, "gpu_ivfpq: the trained quantizer has unexpected sizes");
    meta.centroid_start = write_floats(index, q->centroids.data(), static_cast<int64>(q->centroids.size()),
                                       &meta.centroid_pages);
    meta.codebook_start = write_floats(index, q->codebooks.data(), static_cast<int64>(q->codebooks.size()),
                                       &meta.codebook_pages);
    // Directory pages are reserved now and written at the end.
    meta.directory_pages = static_cast<uint32>((meta.lists + kIvfpqDirPerPage - 1) / kIvfpqDirPerPage);
    ivfpq_init_page(page, kIvfpqPageDirectory, InvalidBlockNumber);
    for (uint32 i = 0; i < meta.directory_pages; ++i) {
      BlockNumber blk = index_build_append_page(index, page);
      if (i == 0) meta.directory_start = blk;
    }

    st.q = q;
    st.device = device;
    st.code_size = meta.code_size;
    st.vector_dim = meta.stores_vectors ? st.dim : 0;
    st.lists = meta.lists;
    st.batch = static_cast<float*>(palloc(sizeof(float) * st.batch_cap * st.dim));
    st.batch_tids = static_cast<ItemPointerData*>(palloc(sizeof(ItemPointerData) * st.batch_cap));
    if (st.vector_dim > 0 && st.element != kIvfpqFloat32)
      st.batch_raw = static_cast<char*>(palloc(ivfpq_element_bytes(st.element, st.dim) * st.batch_cap));
    st.list_of = static_cast<int32*>(palloc(sizeof(int32) * st.batch_cap));
    st.codes = static_cast<uint8*>(palloc(static_cast<Size>(st.code_size) * st.batch_cap));
    st.item = static_cast<char*>(palloc0(ivfpq_item_size(st.code_size, st.vector_dim, st.element)));
    st.list_pages = static_cast<Page*>(palloc0(sizeof(Page) * st.lists));
    st.list_last = static_cast<BlockNumber*>(palloc(sizeof(BlockNumber) * st.lists));
    for (int l = 0; l < st.lists; ++l) st.list_last[l] = InvalidBlockNumber;
  } else {
    ereport(NOTICE, (errmsg("gpu_ivfpq index \"%s\" created on a table without vectors: it has no quantizer",
                            RelationGetRelationName(index)),
                     errdetail("Rows inserted from now on are searched by their exact distance."),
                     errhint("REINDEX once the table has data.")));
  }

  // 3. Encode every vector and write the lists (and the NULLs' chain).
  st.null_last = st.pending_last = InvalidBlockNumber;
  if (st.seen > 0 || st.nulls > 0) {
    pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, kIvfpqPhaseEncode);
    pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_TOTAL, st.seen + st.nulls);
    pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, 0);
    table_index_build_scan(heap, index, info, false, true, encode_callback, &st, nullptr);
    encode_batch(&st);
    if (st.service) gknn_service_build_end(st.service);
    for (int l = 0; l < st.lists; ++l) chain_flush(index, st.list_pages[l], &st.list_last[l]);
    chain_flush(index, st.null_page, &st.null_last);
    chain_flush(index, st.pending_page, &st.pending_last);
  }
  meta.null_last = st.null_last;
  meta.pending_last = st.pending_last;
  if (meta.trained == 0) meta.dim = st.dim;

  // 4. Directory and metapage.
  for (uint32 p = 0; p < meta.directory_pages; ++p) {
    ivfpq_init_page(page, kIvfpqPageDirectory, InvalidBlockNumber);
    int first = static_cast<int>(p * kIvfpqDirPerPage);
    int n = Min(meta.lists - first, static_cast<int>(kIvfpqDirPerPage));
    memcpy(PageGetContents(page), st.list_last + first, n * sizeof(BlockNumber));
    ivfpq_set_contents_size(page, n * sizeof(BlockNumber));
    index_build_overwrite_page(index, meta.directory_start + p, page);
  }
  ivfpq_init_meta_page(page, meta);
  index_build_overwrite_page(index, kIvfpqMetaBlock, page);

  // 5. WAL: every page as a full image, once.
  MemoryContextDelete(st.tmp);
  return index_build_finish(index, kIvfpqPhaseWal, static_cast<double>(st.seen + st.nulls),
                            static_cast<double>(st.entries + st.null_entries + st.pending_entries));
}

// Unlogged indexes: the init fork holds an empty, untrained index.
void ivfpq_buildempty(Relation index) {
  IvfpqMeta meta = empty_meta(typmod_dim(index), ivfpq_index_opclass(index));
  Buffer buf = ReadBufferExtended(index, INIT_FORKNUM, P_NEW, RBM_NORMAL, nullptr);
  LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
  START_CRIT_SECTION();
  ivfpq_init_meta_page(BufferGetPage(buf), meta);
  MarkBufferDirty(buf);
  log_newpage_buffer(buf, true);
  END_CRIT_SECTION();
  UnlockReleaseBuffer(buf);
}
