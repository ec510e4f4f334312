/* tests/netpoll/c_event_loop.h — see c_event_loop.c. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

enum cel_wait { CEL_POLL, CEL_SELECT, CEL_EPOLL };
long cel_read_all(int fd, char* buf, long want, enum cel_wait how, int timeout_ms);

#ifdef __cplusplus
}
#endif
