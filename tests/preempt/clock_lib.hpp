// tests/preempt/clock_lib.hpp — see clock_lib.cpp.
#pragma once

#include <atomic>
#include <cstdint>

// Takes the spin lock (giving up after give_up_cycles of the time stamp
// counter, then -1), reads the clock `reads` times holding it, releases
// it: 1.
extern "C" int clock_lib_locked_reads(std::atomic<bool>* lock, int reads, uint64_t give_up_cycles);
