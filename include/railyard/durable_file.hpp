#pragma once
// Private, durable files for checkpoints: directories 0700 and files 0600 (they hold the model),
// symlinks never followed when writing, and a rename that is durable once it returns (the file
// fsync'd before, its directory fsync'd after). Errors are std::system_error naming the path.

#include <string>

namespace railyard {

// Creates `dir` and missing parents; the directories created get mode 0700 (existing ones are
// left as they are). Throws when `dir` is empty (std::invalid_argument), is not a directory,
// cannot be created, or is not writable.
void ensure_private_dir(const std::string& dir);

// Creates an empty file with mode 0600; fails if `path` exists (a symlink included).
void create_private_file(const std::string& path);

// fsync of the file at `path`, opened without following a symlink.
void fsync_file(const std::string& path);

// Renames `tmp` to `final_path` in the same directory and fsyncs the directory. Refuses when
// `final_path` is a symlink or not a regular file.
void durable_rename(const std::string& tmp, const std::string& final_path);

// Removes a regular file (never a symlink's target); missing is not an error.
void remove_file(const std::string& path);

// Free bytes for an unprivileged writer on the filesystem holding `dir`.
unsigned long long free_bytes(const std::string& dir);

}  // namespace railyard
