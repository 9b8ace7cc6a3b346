#include "graft/atomic_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "graft/error.h"

namespace graft {

void WriteFileAtomic(const std::string& path, const std::string& content) {
  namespace fs = std::filesystem;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write " + tmp);
    out << content;
    out.flush();
    if (!out) {
      std::error_code ec;
      out.close();
      fs::remove(tmp, ec);
      throw Error("error writing " + tmp + " (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw Error("cannot replace " + path + ": " + ec.message());
  }
}

}  // namespace graft
