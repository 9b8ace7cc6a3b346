#include "server/peer_socket.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <filesystem>

namespace graft::server {

bool PeerSocket::PeerOf(int fd, std::string* addr, int* port) {
  sockaddr_storage sa{};
  socklen_t len = sizeof(sa);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return false;
  if (sa.ss_family != AF_INET && sa.ss_family != AF_INET6) return false;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&sa), len, host, sizeof(host), serv, sizeof(serv),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  *addr = host;
  *port = std::atoi(serv);
  return true;
}

int PeerSocket::Find() const {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string name = entry.path().filename().string();
    int fd = -1;
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ec != std::errc()) continue;
    std::string addr;
    int port = 0;
    if (PeerOf(fd, &addr, &port) && port == port_ && addr == addr_) return fd;
  }
  return -1;
}

bool PeerSocket::Closed() {
  if (fd_ < 0) fd_ = Find();
  if (fd_ < 0) return false;
  // The descriptor stays this connection's while its handler runs (httplib closes it after).
  char c;
  const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;  // end of stream: the client closed
  if (n > 0) return false;  // bytes waiting (a pipelined request): still there
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;  // reset and the like
}

}  // namespace graft::server
