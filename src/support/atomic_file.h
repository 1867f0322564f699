// Writing a file so that nothing else is ever written: every file Solder writes (the CLI's -o
// outputs, the compile cache) goes through here.
//
// The data go to a fresh temporary file in the target's directory, created with
// O_CREAT|O_EXCL|O_NOFOLLOW under a random name (".NAME.tmp-solder-PID-RANDOM"), so a file or a
// symlink planted at a predictable name is never opened; the temporary is written in full, synced
// and then renamed over the target. Readers see the old file or the complete new one; on any
// failure the temporary is removed and the target is left as it was.
//
// A target that exists and is not a regular file (a directory, FIFO, socket or device node, or a
// symlink to one) is refused: rename() would replace the node. A symlink to a regular file is
// replaced by the new file (the link's target is not written).
#pragma once

#include <string>
#include <string_view>

namespace solder {

// Writes `data` to `path` as above. Returns "" on success, otherwise a message that names the
// path and the system's reason (strerror), e.g. "cannot write 'out.cu': Permission denied".
std::string write_file_atomically(const std::string& path, std::string_view data);

// The same, throwing solder::Error with that message on failure.
void write_file_atomically_or_throw(const std::string& path, std::string_view data);

}  // namespace solder
