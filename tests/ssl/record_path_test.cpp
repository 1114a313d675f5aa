// The kTLS probe: parsing the kernel's list of upper-layer protocols, and what this machine's
// kernel says.
#include <niox/ssl/record_path.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace niox {
namespace {

TEST(RecordPathTest, UlpListOffersTlsOnlyAsAWholeName) {
  EXPECT_TRUE(ulp_list_offers_tls("tls"));
  EXPECT_TRUE(ulp_list_offers_tls("mptcp tls\n"));
  EXPECT_TRUE(ulp_list_offers_tls("tls mptcp"));
  EXPECT_FALSE(ulp_list_offers_tls("mptcp\n"));
  EXPECT_FALSE(ulp_list_offers_tls(""));
  EXPECT_FALSE(ulp_list_offers_tls("tlsx espintcp"));
  EXPECT_FALSE(ulp_list_offers_tls("ktls"));
}

TEST(RecordPathTest, ProbeAgreesWithTheKernelsList) {
  std::ifstream in("/proc/sys/net/ipv4/tcp_available_ulp");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(kernel_tls_available(), ulp_list_offers_tls(text.str())) << "list: " << text.str();
}

TEST(RecordPathTest, Names) {
  EXPECT_EQ(to_string(RecordPath::user_space), "user_space");
  EXPECT_EQ(to_string(RecordPath::ktls), "ktls");
}

}  // namespace
}  // namespace niox
