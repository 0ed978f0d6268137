// The GPU service's shared memory: one control block and one request slot
// per PGPROC (a backend, parallel worker or auxiliary process asks through
// its own slot, so slots never need allocating or locking against each
// other). Internal to extension/service/.
//
// A slot's life (its spinlock guards `state`; the payload belongs to whoever
// the state says):
//
//   Free --backend fills payload--> Submitted --service takes it--> Running
//   Running --service writes reply--> Done | Failed --backend reads--> Free
//   Submitted --backend gives up (cancel, exit)--> Free
//   Running --backend gives up--> Abandoned --service finishes--> Free
//
// A backend that gave up never touches the payload again until the slot is
// Free, so the service may keep writing into it; a new request from the same
// process waits for that.
#pragma once

#include "pg.h"

extern "C" {
#include "storage/dsm.h"
#include "storage/latch.h"
#include "storage/relfilenode.h"
#include "storage/spin.h"
}

namespace gknn_service {

enum SlotState : uint32 { kFree = 0, kSubmitted, kRunning, kDone, kFailed, kAbandoned };

enum RequestKind : uint32 {
  kSearchIvfpq = 1,  // PQ candidates of one query from a resident image
  kLoadBegin,        // start shipping an image: its shape
  kLoadChunk,        // a piece of one of its arrays
  kLoadEnd,          // the image is complete: make it resident
};

enum ReplyCode : uint32 {
  kOk = 0,
  kNeedImage,    // the image is not resident: ship it (kLoad*), then ask again
  kError,        // sqlstate + message
  kServiceGone,  // the service stopped before answering
};

enum ServiceState : uint32 {
  kStopped = 0,  // no service process (not preloaded, or between restarts)
  kStarting,     // opening the devices
  kReady,        // serving
  kNoDevice,     // running, but found no device it may use (reason says why)
};

// Which resident image a request means. The generation is the metapage's:
// a changed index is a different image.
struct ImageKey {
  Oid database;
  Oid index;
  RelFileNode node;
  uint64 generation;
};

inline bool key_equal(const ImageKey& a, const ImageKey& b) {
  return a.database == b.database && a.index == b.index && RelFileNodeEquals(a.node, b.node) &&
         a.generation == b.generation;
}

// Arrays of an image, shipped in chunks (kLoadChunk's `section`).
enum ImageSection : uint32 { kCentroids = 0, kCodebooks, kOffsets, kCodes, kIds, kVectors, kSections };

// What a search returns (all: ids and float8 distances, best first).
enum SearchMode : uint32 {
  kModePq = 0,       // PQ-estimated distances (the backend re-ranks from the heap)
  kModeRefined = 1,  // the PQ candidates re-ranked by their exact distance (stored vectors)
  kModeExact = 2,    // every entry ranked by its exact distance (stored vectors)
};

// The shape of an image (kLoadBegin).
struct ImageShape {
  int32 dim, lists, m, nbits, metric, kmeans_iters;
  uint64 seed;
  int64 entries;
  int32 vectors;  // StoredVectors (service_images.h): the entries' vectors, and their element type
};

constexpr int kInlineBytes = 64 * 1024;  // payload kept in the slot itself
constexpr int kMessageBytes = 256;

struct RequestSlot {
  slock_t mutex;
  uint32 state;  // SlotState
  Latch* owner_latch;
  int owner_pid;
  uint64 incarnation;  // of the service the request was submitted to

  // Request.
  uint32 kind;
  ImageKey key;
  int32 dim;               // query dimensions (search)
  int32 probes;            // search
  int32 mode;              // search: SearchMode
  int64 k;                 // candidates wanted (search)
  int32 section;           // kLoadChunk
  int64 section_offset;    // kLoadChunk: byte offset in the section
  int64 payload_bytes;     // bytes of payload the request carries
  ImageShape shape;        // kLoadBegin
  dsm_handle payload_dsm;  // DSM_HANDLE_INVALID: the payload is `inline_payload`

  // Reply.
  uint32 reply;      // ReplyCode
  int32 sqlstate;    // kError
  int64 count;       // search: candidates returned (ids then float8 distances in the payload)
  int64 entries;     // search: entries of the resident image
  uint64 batch_id;   // search: the batch it rode in
  int32 batch_size;  // search: queries in that batch
  int64 submit_us, start_us, end_us;  // when submitted, taken, answered (GetCurrentTimestamp)
  char message[kMessageBytes];

  alignas(16) char inline_payload[kInlineBytes];
};

// Images shown by gknn_service_images(): a copy the service refreshes.
constexpr int kMaxShownImages = 64;
struct ShownImage {
  ImageKey key;
  int32 device;
  int64 bytes;
  int64 entries;
  int64 hits;
  int64 loaded_us;
  int64 last_used_us;
};

struct ServiceShared {
  slock_t mutex;  // guards everything below but the slots
  uint32 state;   // ServiceState
  int pid;
  Latch* latch;
  uint64 incarnation;  // bumped at every service start
  int64 started_us;
  char device_name[128];
  int32 device;  // the device searches run on (-1: the CPU)
  char reason[kMessageBytes];

  // Counters since the service started.
  int64 requests, searches, batches, batched_queries, loads, evictions, errors;
  int64 busy_us;  // time spent running batches
  int64 memory_budget, memory_used;
  int32 nimages;
  ShownImage images[kMaxShownImages];

  int32 nslots;
  RequestSlot slots[FLEXIBLE_ARRAY_MEMBER];
};

// The shared block (null when the library was not preloaded).
ServiceShared* shared();
// Microseconds on the service's clock (GetCurrentTimestamp).
int64 now_us();

}  // namespace gknn_service
