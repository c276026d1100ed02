#include <signal.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <csignal>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "railyard/preempt.hpp"

namespace railyard {
namespace {

// Written only before handlers are installed and after they are removed; the handler reads it.
std::array<int, NSIG> g_action_of{};
// The handler's only effects: lock-free atomics, which are async-signal-safe.
std::atomic<int> g_pending{0};
std::atomic<int> g_last_signal{0};
std::atomic<int64_t> g_first_ns{0};  // CLOCK_MONOTONIC of the first watched signal
static_assert(std::atomic<int64_t>::is_always_lock_free);
std::atomic<bool> g_alive{false};
static_assert(std::atomic<int>::is_always_lock_free);

struct Installed {
  int signo;
  struct sigaction previous;
};
std::vector<Installed> g_installed;

extern "C" void on_signal(int signo) {
  const int action = (signo > 0 && signo < NSIG) ? g_action_of[signo] : 0;
  int current = g_pending.load(std::memory_order_relaxed);
  while (action > current && !g_pending.compare_exchange_weak(current, action)) {
  }
  g_last_signal.store(signo, std::memory_order_relaxed);
  if (action > 0 && g_first_ns.load(std::memory_order_relaxed) == 0) {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
    int64_t none = 0;
    g_first_ns.compare_exchange_strong(none, int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec);
  }
}

const std::vector<std::pair<std::string, int>>& known_signals() {
  static const std::vector<std::pair<std::string, int>> names = {
      {"TERM", SIGTERM}, {"INT", SIGINT},   {"HUP", SIGHUP},   {"QUIT", SIGQUIT},
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"XCPU", SIGXCPU},
  };
  return names;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

int parse_signal(const std::string& entry, std::string name) {
  name = upper(name);
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  for (const auto& [known, signo] : known_signals()) {
    if (known == name) return signo;
  }
  throw std::invalid_argument("signal spec entry '" + entry + "': unknown signal '" + name +
                              "' (allowed: TERM, INT, HUP, QUIT, USR1, USR2, XCPU)");
}

StopAction parse_action(const std::string& entry, const std::string& word) {
  const std::string w = upper(word);
  if (w == "EXIT") return StopAction::kSaveExit;
  if (w == "REQUEUE") return StopAction::kSaveRequeue;
  throw std::invalid_argument("signal spec entry '" + entry + "': unknown action '" + word +
                              "' (allowed: exit, requeue)");
}

// Parses the whole spec before anything is installed, so a bad spec changes no handler.
std::vector<std::pair<int, StopAction>> parse_spec(const std::string& spec) {
  std::vector<std::pair<int, StopAction>> out;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string entry = trim(spec.substr(pos, comma - pos));
    pos = comma + 1;
    if (entry.empty()) {
      if (trim(spec).empty()) break;
      throw std::invalid_argument("signal spec '" + spec +
                                  "': empty entry (expected SIGNAL=ACTION, e.g. TERM=exit)");
    }
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) {
      throw std::invalid_argument("signal spec entry '" + entry +
                                  "': expected SIGNAL=ACTION, e.g. USR1=requeue");
    }
    const int signo = parse_signal(entry, trim(entry.substr(0, eq)));
    const StopAction action = parse_action(entry, trim(entry.substr(eq + 1)));
    for (const auto& [seen, unused] : out) {
      if (seen == signo) {
        throw std::invalid_argument("signal spec entry '" + entry + "': signal given twice");
      }
    }
    out.emplace_back(signo, action);
  }
  return out;
}

}  // namespace

const char* stop_action_name(StopAction action) {
  switch (action) {
    case StopAction::kNone:
      return "none";
    case StopAction::kSaveExit:
      return "exit";
    case StopAction::kSaveRequeue:
      return "requeue";
  }
  return "unknown";
}

SignalWatcher::SignalWatcher(const std::string& spec) {
  const auto entries = parse_spec(spec);
  if (g_alive.exchange(true)) {
    throw std::logic_error("SignalWatcher: another watcher is already installed");
  }
  g_action_of.fill(0);
  g_pending.store(0);
  g_last_signal.store(0);
  g_first_ns.store(0);
  for (const auto& [signo, action] : entries) g_action_of[signo] = static_cast<int>(action);

  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  // SA_RESTART: a signal arriving during a read() or write() of the save must not fail it.
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (const auto& [signo, action] : entries) {
    Installed inst{signo, {}};
    if (sigaction(signo, &sa, &inst.previous) != 0) {
      const std::string err = std::strerror(errno);
      for (const Installed& done : g_installed) sigaction(done.signo, &done.previous, nullptr);
      g_installed.clear();
      g_alive.store(false);
      throw std::runtime_error("SignalWatcher: sigaction(" + std::to_string(signo) +
                               ") failed: " + err);
    }
    g_installed.push_back(inst);
  }
}

SignalWatcher::~SignalWatcher() {
  for (const Installed& inst : g_installed) sigaction(inst.signo, &inst.previous, nullptr);
  g_installed.clear();
  g_action_of.fill(0);
  g_alive.store(false);
}

StopAction SignalWatcher::pending() const {
  return static_cast<StopAction>(g_pending.load());
}

int SignalWatcher::last_signal() const {
  return g_last_signal.load();
}

double SignalWatcher::first_signal_time() const {
  return static_cast<double>(g_first_ns.load()) * 1e-9;
}

StopAction SignalWatcher::action_for(int signo) const {
  if (signo <= 0 || signo >= NSIG) return StopAction::kNone;
  return static_cast<StopAction>(g_action_of[signo]);
}

}  // namespace railyard
