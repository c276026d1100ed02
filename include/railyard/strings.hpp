#pragma once
// String helpers shared by the plugin and the runtime, each with one meaning.

#include <string>
#include <string_view>
#include <vector>

namespace railyard {

// The fields between the separators, empty ones included: n separators always give n + 1
// fields, so "a,,b" -> {"a", "", "b"}, "a," -> {"a", ""} and "" -> {""}. A caller that allows
// no empty field rejects it by name; one that ignores them filters them out.
std::vector<std::string> split(std::string_view text, char sep);

// The parts with `sep` between them: {"a", "b"} -> "a,b"; {} -> "".
std::string join(const std::vector<std::string>& parts, std::string_view sep);

// True for one or more ASCII digits and nothing else ("007"); false for "", "+1", "1.0", " 1".
bool all_digits(std::string_view text);

}  // namespace railyard
