// The layout of SHM.CALL's arguments, `<n> (<index> <offset> <length>){n} <command> <arg> ...`:
// which words are the carried command and which of its arguments lie in the passed file. The one
// reading of that layout, for SHM.CALL's handler (which builds the carried command from it) and
// COMMAND GETKEYS (which finds the carried command's keys); pure, on the calling io thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/request.h"

namespace prefixd::commands {

// [offset, offset + length) of the passed file.
struct FileRange {
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct ShmCallLayout {
  // Where the carried command's name stands in SHM.CALL's arguments.
  size_t carried_at = 0;
  // One entry per word of the carried command (0: its name, never from the file): the range of
  // the file that is that argument, or nullopt for the word sent.
  std::vector<std::optional<FileRange>> from_file;
};

// Lays out `args` (SHM.CALL's, args[0] its name; at least its arity's 6 words): the triples'
// numbers checked (integers, offsets and lengths not negative, each index an argument of the
// carried command and named once). The error text when they are not; `layout` is then partial.
// Lengths are not checked against proto-max-bulk-len: that is the handler's, which reads them.
std::string ParseShmCall(const protocol::Request& args, ShmCallLayout& layout);

}  // namespace prefixd::commands
