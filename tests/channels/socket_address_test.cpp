// InetSocketAddress and SocketAddress: both IP forms survive the trip to the kernel form and
// back, and an address costs a channel what the form needs, not a sockaddr_storage.
#include <niox/channels/socket_address.hpp>

#include <gtest/gtest.h>

#include <cstring>

#include <arpa/inet.h>

namespace niox {
namespace {

TEST(SocketAddress, BothIpFormsRoundTripThroughTheKernelForm) {
  for (const InetSocketAddress& a :
       {InetSocketAddress("127.0.0.1", 8080), InetSocketAddress("::1", 443),
        InetSocketAddress("fe80::1:2:3:4", 65535), InetSocketAddress::any_v6(9)}) {
    sockaddr_storage native{};
    const socklen_t len = SocketAddress(a).to_native(native);
    EXPECT_EQ(len, a.is_ipv6() ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    const InetSocketAddress back =
        InetSocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&native), len);
    EXPECT_EQ(back, a) << a.host_string();
    EXPECT_EQ(back.port(), a.port());
    EXPECT_EQ(back.host_string(), a.host_string());
  }
}

TEST(SocketAddress, TheIpv6ScopeAndFlowSurviveFromTheKernelForm) {
  sockaddr_in6 in{};
  in.sin6_family = AF_INET6;
  in.sin6_port = htons(7000);
  in.sin6_scope_id = 3;
  ASSERT_EQ(inet_pton(AF_INET6, "fe80::99", &in.sin6_addr), 1);
  auto a = InetSocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&in), sizeof in);
  ASSERT_TRUE(a.is_ipv6());
  ASSERT_EQ(a.native_size(), sizeof(sockaddr_in6));
  EXPECT_EQ(std::memcmp(a.native(), &in, sizeof in), 0);
}

TEST(SocketAddress, AnAddressIsNoLargerThanItsLargestForm) {
  // 128-byte sockaddr_storage per address was most of what a connection's two addresses cost.
  EXPECT_LE(sizeof(InetSocketAddress), sizeof(sockaddr_in6));
  EXPECT_LE(sizeof(SocketAddress), sizeof(UnixDomainSocketAddress) + 8);
}

}  // namespace
}  // namespace niox
