// gort/gort.hpp — the umbrella header: everything public in gort.
#pragma once

#include "gort/runtime.hpp"
