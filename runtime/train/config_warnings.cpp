#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/train_config.hpp"

namespace railyard {
namespace {

// Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b`.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string variable_of(const std::string& option) {
  std::string name = "RAILYARD_" + option;
  for (char& ch : name) ch = ch == '-' ? '_' : static_cast<char>(std::toupper(ch));
  return name;
}

// The option `variable` (RAILYARD_...) nearly spells, or "" when it names one or none is close.
// Close: one edit for names up to 6 letters, two beyond; the plugin's own variables (CPUS,
// LOCAL_RANK, ...) are that far from every option.
std::string nearest_option(const std::string& variable, const std::vector<std::string>& options) {
  std::string best;
  size_t best_distance = variable.size() <= 6 + 9 ? 1 : 2;
  for (const std::string& option : options) {
    const std::string name = variable_of(option);
    if (name == variable) return "";
    const size_t distance = edit_distance(variable, name);
    if (distance <= best_distance && (best.empty() || distance < best_distance)) {
      best = option;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace

std::vector<std::string> train_config_warnings(const TrainConfig& c, const char* const* env) {
  std::vector<std::string> out;
  if (c.warmup >= c.steps) {
    out.push_back("--warmup " + std::to_string(c.warmup) + " is not shorter than --steps " +
                  std::to_string(c.steps) +
                  ": the learning rate never reaches --lr and never decays; give a --warmup "
                  "below the step count (e.g. --warmup " +
                  std::to_string(std::max<int64_t>(c.steps / 10, 0)) + ")");
  }
  const std::vector<std::string> options = train_option_names();
  for (; env != nullptr && *env != nullptr; ++env) {
    const std::string_view kv = *env;
    const std::string name(kv.substr(0, kv.find('=')));
    if (name.rfind("RAILYARD_", 0) != 0) continue;
    const std::string option = nearest_option(name, options);
    if (option.empty()) continue;
    out.push_back(name + " is not an option variable and is ignored; did you mean " +
                  variable_of(option) + " (--" + option + ")?");
  }
  return out;
}

}  // namespace railyard
