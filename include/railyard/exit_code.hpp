#pragma once
// Process exit codes of every railyard command (docs/training.md, the tools' --help).

namespace railyard::exit_code {

constexpr int kOk = 0;
constexpr int kFailure = 1;   // the work failed (e.g. an invalid checkpoint or topology)
constexpr int kUsage = 2;     // bad option or input
constexpr int kStopped = 3;   // railyard-train: saved a checkpoint and stopped on a signal
constexpr int kRequeued = 4;  // railyard-train: saved, requeued itself, stopped
constexpr int kDiverged = 5;  // railyard-train: loss or gradient norm not finite: stopped, that
                              // state not saved

}  // namespace railyard::exit_code
