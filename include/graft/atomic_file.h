// Files that readers never see half-written.
#pragma once

#include <string>

namespace graft {

// Writes `content` to a temporary file beside `path` (same folder, name + ".tmp.<pid>"),
// flushes it, and renames it over `path`, so readers see the old or the new file, never
// a partial one, and two writers leave one whole file. Throws graft::Error naming the
// file when it cannot (the temporary file is removed).
void WriteFileAtomic(const std::string& path, const std::string& content);

}  // namespace graft
