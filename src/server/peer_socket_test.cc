#include "server/peer_socket.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace graft::server {
namespace {

// A loopback connection inside this process: the server side is what httplib's
// handler would hold; the client side is the one that hangs up.
struct Loopback {
  int listener = -1, client = -1, accepted = -1;
  std::string client_addr;
  int client_port = 0;

  Loopback() {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    if (bind(listener, reinterpret_cast<sockaddr*>(&sa), len) != 0 || listen(listener, 1) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
      return;
    }
    client = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(client, reinterpret_cast<sockaddr*>(&sa), len) != 0) ADD_FAILURE() << "cannot connect";
    accepted = accept(listener, nullptr, nullptr);
    EXPECT_TRUE(PeerSocket::PeerOf(accepted, &client_addr, &client_port));
  }
  ~Loopback() {
    for (int fd : {listener, client, accepted}) {
      if (fd >= 0) close(fd);
    }
  }
};

TEST(PeerSocketTest, SeesTheClientHangUp) {
  Loopback lo;
  ASSERT_EQ(lo.client_addr, "127.0.0.1");
  PeerSocket peer(lo.client_addr, lo.client_port);
  EXPECT_FALSE(peer.Closed());
  // Bytes waiting (a pipelined request) are not a hang-up.
  ASSERT_EQ(write(lo.client, "x", 1), 1);
  EXPECT_FALSE(peer.Closed());
  char c;
  ASSERT_EQ(read(lo.accepted, &c, 1), 1);  // the server reads it
  close(lo.client);
  lo.client = -1;
  EXPECT_TRUE(peer.Closed());
}

TEST(PeerSocketTest, AnUnknownPeerIsNeverReportedClosed) {
  Loopback lo;
  PeerSocket stranger("127.0.0.1", lo.client_port == 1 ? 2 : 1);
  EXPECT_FALSE(stranger.Closed());
  close(lo.client);
  lo.client = -1;
  EXPECT_FALSE(stranger.Closed());
}

}  // namespace
}  // namespace graft::server
