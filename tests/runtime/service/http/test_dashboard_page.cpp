// Tests of the embedded dashboard page (runtime/service/http/dashboard.hpp, cmake/EmbedFile.cmake).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <string>

#include "runtime/service/http/dashboard.hpp"

namespace {

std::string read_source_page() {
  std::ifstream in(TESSERA_DASHBOARD_HTML, std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

TEST_CASE("dashboard: the embedded bytes are the page's file", "[dashboard]") {
  const std::string file = read_source_page();
  const std::string_view page = tessera::http::dashboard_page();
  REQUIRE(file.size() > 1000);
  CHECK(page.size() == file.size());
  CHECK(page == file);
  CHECK(page.substr(0, 15) == "<!DOCTYPE html>");
}

TEST_CASE("dashboard: the page loads nothing from anywhere but the server's API", "[dashboard]") {
  const std::string page = lower(tessera::http::dashboard_page());
  // No URL of another host, and no element or rule that loads a resource at all: the page's
  // style and script are inline.
  for (const char* ref : {"http://", "https://", "src=", "href=", "<link", "@import", "url(",
                          "action=", "<iframe", "<object", "<embed", "import(", "xmlns"}) {
    INFO(ref);
    CHECK(page.find(ref) == std::string::npos);
  }
  // Every request is a fetch of a path under /v1/ of the origin that served the page.
  std::size_t fetches = 0;
  for (auto at = page.find("fetch("); at != std::string::npos; at = page.find("fetch(", at + 1)) {
    ++fetches;
    CHECK(page.compare(at, 12, "fetch(\"/v1/\"") == 0);
  }
  CHECK(fetches == 1);
  for (const char* api : {"xmlhttprequest", "websocket", "eventsource", "sendbeacon"}) {
    INFO(api);
    CHECK(page.find(api) == std::string::npos);
  }
  // The browser enforces the same: nothing may load but inline style and script, and
  // connections go to the page's own origin only.
  CHECK(page.find("content-security-policy") != std::string::npos);
  CHECK(page.find("default-src 'none'; connect-src 'self'") != std::string::npos);
}
