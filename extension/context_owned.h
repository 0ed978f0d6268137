// A C++ object on the C++ heap owned by a PostgreSQL memory context: the
// context's reset callback deletes it, so an ERROR (whose cleanup resets or
// deletes the context) frees it, and no C++ frame owns it across calls that
// may longjmp. Index builds hold their quantizer or graph this way.
#pragma once

#include "pg.h"

extern "C" {
#include "utils/memutils.h"
}

template <typename T>
struct ContextOwned {
  MemoryContextCallback cb;
  T* object;  // null until the owner makes it; deleted with the context
};

// Deletes the object now (the reset callback then finds nothing to do).
// Calls no PostgreSQL function and throws nothing (T's destructor must not).
template <typename T>
void context_owned_free(void* arg) {
  auto* h = static_cast<ContextOwned<T>*>(arg);
  delete h->object;
  h->object = nullptr;
}

// A holder palloc'd in the current memory context, its object null, its
// reset callback registered.
template <typename T>
ContextOwned<T>* context_owned_new() {
  auto* h = static_cast<ContextOwned<T>*>(palloc0(sizeof(ContextOwned<T>)));
  h->cb.func = context_owned_free<T>;
  h->cb.arg = h;
  MemoryContextRegisterResetCallback(CurrentMemoryContext, &h->cb);
  return h;
}
