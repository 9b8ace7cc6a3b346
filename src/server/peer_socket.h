// Whether an HTTP client is still connected, for requests whose response is sent only
// at the end (non-streamed completions). cpp-httplib 0.11 gives a handler neither
// its socket nor a close callback, so PeerSocket finds the connection's socket among
// this process's descriptors by the peer's address and port (what httplib reports
// as Request::remote_addr / remote_port), then peeks it: end-of-stream or a reset
// means the client hung up. (A client that half-closes its side while still reading
// counts as gone, as in llama-server's check.) Linux only (/proc/self/fd).
#pragma once

#include <string>

namespace graft::server {

class PeerSocket {
 public:
  // `addr`: numeric host as getnameinfo(NI_NUMERICHOST) writes it; `port`: the peer's.
  PeerSocket(std::string addr, int port) : addr_(std::move(addr)), port_(port) {}

  // True once the peer has closed or reset the connection; false while it is open or
  // when the socket cannot be found (never a false alarm). O(open descriptors) the
  // first time, then O(1).
  bool Closed();

  // The peer of socket `fd` as (numeric host, port); false when `fd` is not a
  // connected TCP socket. O(1).
  static bool PeerOf(int fd, std::string* addr, int* port);

 private:
  int Find() const;

  std::string addr_;
  int port_;
  int fd_ = -1;  // the connection's socket once found
};

}  // namespace graft::server
