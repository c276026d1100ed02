#pragma once
// Times as railyard writes them everywhere (checkpoint metadata, tools, reports): ISO 8601 in
// UTC, to the second.

#include <string>

namespace railyard {

// "2026-12-01T19:04:05Z" for a time in seconds since the Unix epoch (fractions dropped).
std::string iso_time(double unix_seconds);

}  // namespace railyard
