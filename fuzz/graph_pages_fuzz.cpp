// libFuzzer target: the checks every gpu_graph page reader runs
// (extension/graph/graph_format.cpp) before it trusts a page.
//
// The input describes a small, valid index (dimension, degree, node count,
// NULL and dead nodes, edges), built page by page as ambuild lays it out,
// then corrupted by the rest of the input (bytes overwritten anywhere in the
// metapage or a node page, or whole pages of input bytes). The readers of
// the extension are replayed on it: the metapage check, then every node page
// the metapage names, checked, and each of its slots read as the image
// loader, gknn_graph_info and VACUUM read them (TID, flags, vector, every
// edge followed to its target's flags). Each page lives in its own 8 KiB
// heap block, so ASan reports any read past a page; whatever a check lets
// through must be readable, and a corrupted page may only be refused (an
// ERROR XX002 in the server).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "graph/graph_format.h"

namespace {

using Page = std::unique_ptr<unsigned char[]>;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "graph_pages_fuzz: %s\n", what);
  __builtin_trap();
}

GraphPageHeader* header(unsigned char* page) { return reinterpret_cast<GraphPageHeader*>(page); }

// PageInit plus gpu_graph's special space (graph_init_page).
Page new_page(GraphPageKind kind) {
  Page p(new unsigned char[kGraphBlockSize]());
  GraphPageHeader* h = header(p.get());
  h->lower = kGraphPageHeaderSize;
  h->upper = h->special = kGraphSpecialOffset;
  h->pagesize_version = kGraphBlockSize | 4;
  GraphPageOpaque o{kind, kGraphPageId, 0};
  std::memcpy(p.get() + kGraphSpecialOffset, &o, sizeof o);
  return p;
}

void set_contents_size(unsigned char* page, std::size_t bytes) {
  header(page)->lower = static_cast<std::uint16_t>(kGraphContentOffset + bytes);
}

// A valid index of `nodes` nodes from the input's choices.
std::vector<Page> build(FuzzedDataProvider& in, GraphMeta* meta) {
  std::memset(meta, 0, sizeof *meta);
  meta->magic = kGraphMagic;
  meta->version = kGraphVersion;
  meta->dim = in.ConsumeIntegralInRange<int>(1, 64);
  meta->degree = 2 * in.ConsumeIntegralInRange<int>(1, 8);
  meta->metric = in.ConsumeIntegralInRange<int>(0, kGraphMetricCount - 1);
  meta->node_bytes = static_cast<std::uint32_t>(graph_node_bytes(meta->dim, meta->degree));
  meta->nodes_per_page = graph_nodes_per_page(meta->dim, meta->degree);
  meta->nodes = in.ConsumeIntegralInRange<int>(0, 3 * static_cast<int>(meta->nodes_per_page));
  meta->entry = meta->nodes > 0 ? 0 : kGraphNoNode;
  meta->generation = 1;
  std::vector<Page> pages;
  Page m = new_page(kGraphPageMeta);
  pages.push_back(std::move(m));
  for (std::int64_t first = 0; first < meta->nodes; first += meta->nodes_per_page) {
    Page p = new_page(kGraphPageNodes);
    const std::int64_t count = std::min<std::int64_t>(meta->nodes - first, meta->nodes_per_page);
    for (std::int64_t i = 0; i < count; ++i) {
      unsigned char* slot = p.get() + kGraphContentOffset + i * meta->node_bytes;
      const std::uint32_t blk = in.ConsumeIntegralInRange<std::uint32_t>(0, 1000);
      const std::uint16_t hi = blk >> 16, lo = blk & 0xffff,
                          off = in.ConsumeIntegralInRange<std::uint16_t>(1, 200);
      std::memcpy(slot, &hi, 2);
      std::memcpy(slot + 2, &lo, 2);
      std::memcpy(slot + 4, &off, 2);
      constexpr std::uint16_t kChoices[] = {0, kGraphNodeNull, kGraphNodeDead, kGraphNodeEntry};
      const std::uint16_t flags = kChoices[in.ConsumeIntegralInRange<int>(0, 3)];
      std::memcpy(slot + kGraphTidBytes, &flags, 2);
      if (flags == kGraphNodeNull) meta->nulls++;
      if (flags == kGraphNodeDead) meta->dead++;
      std::uint32_t* adj = reinterpret_cast<std::uint32_t*>(slot + graph_adjacency_offset(meta->dim));
      for (int j = 0; j < meta->degree; ++j)
        adj[j] =
            flags == kGraphNodeNull || !in.ConsumeBool()
                ? kGraphNoNode
                : in.ConsumeIntegralInRange<std::uint32_t>(0, static_cast<std::uint32_t>(meta->nodes - 1));
    }
    set_contents_size(p.get(), count * meta->node_bytes);
    pages.push_back(std::move(p));
  }
  std::memcpy(pages[0].get() + kGraphContentOffset, meta, sizeof *meta);
  set_contents_size(pages[0].get(), sizeof *meta);
  return pages;
}

void corrupt(FuzzedDataProvider& in, std::vector<Page>& pages) {
  while (in.remaining_bytes() > 0) {
    const std::size_t which = in.ConsumeIntegralInRange<std::size_t>(0, pages.size() - 1);
    unsigned char* page = pages[which].get();
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:  // the header
        page[in.ConsumeIntegralInRange<std::size_t>(0, kGraphPageHeaderSize - 1)] =
            in.ConsumeIntegral<std::uint8_t>();
        break;
      case 1:  // the metapage's fields or a slot's first bytes
        page[kGraphContentOffset + in.ConsumeIntegralInRange<std::size_t>(0, 127)] =
            in.ConsumeIntegral<std::uint8_t>();
        break;
      case 2:  // anywhere
        page[in.ConsumeIntegralInRange<std::size_t>(0, kGraphBlockSize - 1)] =
            in.ConsumeIntegral<std::uint8_t>();
        break;
      default: {  // a whole page of input bytes
        std::vector<std::uint8_t> bytes = in.ConsumeBytes<std::uint8_t>(kGraphBlockSize);
        if (!bytes.empty()) std::memcpy(page, bytes.data(), bytes.size());
      }
    }
  }
}

// The readers: metapage, then every node page it names and every slot.
void read_index(const std::vector<Page>& pages) {
  const std::uint32_t nblocks = static_cast<std::uint32_t>(pages.size());
  const unsigned char* mp = pages[0].get();
  if (graph_page_problem(mp, kGraphPageMeta) != nullptr) return;
  if (graph_page_header(mp)->lower < kGraphContentOffset + sizeof(GraphMeta)) return;
  GraphMeta meta;
  std::memcpy(&meta, mp + kGraphContentOffset, sizeof meta);
  if (graph_meta_problem(meta, nblocks) != nullptr) return;
  const std::uint32_t npages = graph_node_pages(meta, meta.nodes);
  if (kGraphFirstNodeBlock + npages > nblocks) fail("the metapage check let pages past the end through");
  std::vector<std::uint8_t> flags(meta.nodes, 0);
  volatile float sink = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (std::uint32_t p = 0; p < npages; ++p) {
      const std::uint32_t blk = kGraphFirstNodeBlock + p;
      const unsigned char* page = pages[blk].get();
      if (graph_node_page_problem(page, meta, blk, meta.nodes) != nullptr) return;
      const std::uint32_t count = graph_nodes_on_page(meta, blk, meta.nodes);
      for (std::uint32_t i = 0; i < count; ++i) {
        const std::uint64_t node = std::uint64_t{p} * meta.nodes_per_page + i;
        const unsigned char* slot = page + graph_node_offset(node, meta.nodes_per_page, meta.node_bytes);
        if (slot + meta.node_bytes > page + kGraphSpecialOffset) fail("a slot past the contents");
        std::uint16_t f;
        std::memcpy(&f, slot + kGraphTidBytes, 2);
        if (pass == 0) {
          flags[node] = static_cast<std::uint8_t>(f);
          float v;
          for (int d = 0; d < meta.dim; ++d) {
            std::memcpy(&v, slot + kGraphVectorOffset + 4 * d, 4);
            sink = sink + v;
          }
          continue;
        }
        for (int j = 0; j < meta.degree; ++j) {
          std::uint32_t to;
          std::memcpy(&to, slot + graph_adjacency_offset(meta.dim) + 4 * j, 4);
          if (to == kGraphNoNode) continue;
          if (to >= meta.nodes) fail("an edge past the node count got through");
          sink = sink + flags[to];
        }
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  GraphMeta meta;
  std::vector<Page> pages = build(in, &meta);
  // An uncorrupted index passes every check.
  if (in.remaining_bytes() == 0) {
    if (graph_meta_problem(meta, static_cast<std::uint32_t>(pages.size())) != nullptr)
      fail("a valid metapage refused");
    for (std::uint32_t b = kGraphFirstNodeBlock; b < pages.size(); ++b)
      if (const char* why = graph_node_page_problem(pages[b].get(), meta, b, meta.nodes)) fail(why);
  }
  corrupt(in, pages);
  read_index(pages);
  return 0;
}
