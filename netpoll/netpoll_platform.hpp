// netpoll/netpoll_platform.hpp — what a platform poller provides (see the
// contract in netpoll.hpp). Linux: netpoll_epoll.cpp.
#pragma once

#include <cstdint>

#include "gmp/g.hpp"

namespace gort::internal {

struct PollDesc;

void netpoll_init();
void netpoll_shutdown();
// Returns 0 or an errno value.
int netpoll_open(int fd, PollDesc* pd, uint64_t tag);
int netpoll_close(int fd);
// Re-registers fd with the same events and tag: 0, or ENOENT (or EBADF)
// when the number no longer names the file registered under it.
int netpoll_modify(int fd, uint64_t tag);
bool netpoll(int64_t timeout_ns, GQueue* out);
void netpoll_break();

// Called by the platform poller for each event: mode 'r', 'w' or 'r'+'w'.
// `tag` is what netpoll_open was given; stale tags are ignored.
// `exceptional`: the peer shut down, the connection hung up or has an error
// pending, or urgent data arrived (poll_exceptional_seen). `harvest`: what
// netpoll_harvest_begin returned before the kernel was asked for this
// event, or 0 for readiness nobody asked the kernel about. `woken`: see
// unblock (poll_desc.hpp); null takes each G off the waiter count at once.
void netpoll_ready(uint64_t tag, int mode, bool exceptional, GQueue* out, uint32_t harvest,
                   int64_t* woken = nullptr);
// Takes n Gs a harvest woke off the waiter count, before it hands them on.
void netpoll_waiters_done(int64_t n);
// Numbers the harvest about to ask the kernel (odd, growing modulo 2^32):
// a reader that parked before it began can trust what it reports
// (poll_wait's `trusted`).
uint32_t netpoll_harvest_begin();
// Hints for a batch of events, a few ahead of netpoll_ready: fetch the
// descriptor `tag` names, then (once it has arrived) the G waiting on it
// in `mode`. Each is a cache miss netpoll_ready would otherwise take in
// turn. Stale tags are harmless (descriptors are never freed).
void netpoll_prefetch_desc(uint64_t tag);
void netpoll_prefetch_waiter(uint64_t tag, int mode);

}  // namespace gort::internal
