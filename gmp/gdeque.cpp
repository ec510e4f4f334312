// gmp/gdeque.cpp — see gdeque.hpp.
#include "gmp/gdeque.hpp"

#include <new>

namespace gort::internal {

GDeque::Chunk* GDeque::new_chunk() {
  Chunk* c = spare_;
  if (c != nullptr) {
    spare_ = nullptr;
  } else {
    c = new Chunk;
  }
  c->prev = c->next = nullptr;
  c->begin = c->end = 0;
  return c;
}

void GDeque::free_chunk(Chunk* c) {
  if (spare_ == nullptr) {
    spare_ = c;
  } else {
    delete c;
  }
}

void GDeque::append_chunk() {
  Chunk* c = new_chunk();
  c->prev = tail_;
  if (tail_ != nullptr) tail_->next = c; else head_ = c;
  tail_ = c;
}

void GDeque::drop_head() {
  Chunk* c = head_;
  head_ = c->next;
  if (head_ != nullptr) head_->prev = nullptr; else tail_ = nullptr;
  free_chunk(c);
}

void GDeque::drop_tail() {
  Chunk* c = tail_;
  tail_ = c->prev;
  if (tail_ != nullptr) tail_->next = nullptr; else head_ = nullptr;
  free_chunk(c);
}

void GDeque::clear() {
  while (head_ != nullptr) {
    Chunk* next = head_->next;
    delete head_;
    head_ = next;
  }
  tail_ = nullptr;
  delete spare_;
  spare_ = nullptr;
  size_ = 0;
}

}  // namespace gort::internal
