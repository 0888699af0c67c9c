// Tests of the helpers the CLI commands share (launcher/common.cpp).
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "launcher/common.hpp"

using namespace tessera;

TEST_CASE("policy options: a number or true/false, and nothing after it", "[cli]") {
  auto ok = cli::parse_policy_args({"a=3", "b=-0.5", "c=true", "d=false", "e=1e3"});
  INFO((ok ? "" : ok.err().message));
  REQUIRE(ok);
  CHECK(*ok ==
        std::map<std::string, double>{{"a", 3}, {"b", -0.5}, {"c", 1}, {"d", 0}, {"e", 1000}});
  for (const char* bad : {"x=3abc", "x=", "x=yes", "x=True", "x=3 ", "=3", "x"}) {
    INFO(bad);
    auto r = cli::parse_policy_args({bad});
    REQUIRE_FALSE(r);
    CHECK(r.err().kind == error_kind::invalid_input);
  }
  CHECK(cli::parse_policy_args({"key=3abc"}).err().message ==
        "--policy-arg: field 'key': '3abc' is not a number (or true/false)");
}

TEST_CASE("printable: a program's terminal escapes are shown, not obeyed", "[cli]") {
  using tessera::cli::printable;
  CHECK(printable("plain text\nline two\tcol") == "plain text\nline two\tcol");
  // ESC [2J clears the screen, ESC ]0; sets the title, BEL ends it, DEL, a C1 CSI (U+009B).
  CHECK(printable("a\x1b[2Jb") == "a\\x1b[2Jb");
  CHECK(printable("\x1b]0;pwned\x07") == "\\x1b]0;pwned\\x07");
  CHECK(printable("x\x7fy\r") == "x\\x7fy\\x0d");
  CHECK(printable("\xc2\x9b"
                  "31m") == "\\u009b31m");
  CHECK(printable("caf\xc3\xa9") == "caf\xc3\xa9");  // other UTF-8 stays as it is
}
