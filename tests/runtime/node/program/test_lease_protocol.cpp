// The lease channel's messages (runtime/node/program/lease_protocol.hpp): parsing what a program
// sends (every field, every bound, errors a program's author can act on), the node's answers,
// base64 (RFC 4648 vectors, random round trips, refusal of every non-canonical form) and the
// float32 buffers of an average, bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/node/program/lease_protocol.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::program;
using namespace tessera::test;
using nlohmann::json;

namespace {

/// Parses `line`, failing the test when it is refused.
lease_request parsed(const std::string& line) {
  auto r = parse_request(line);
  INFO(line);
  INFO((r ? std::string() : r.err().message));
  REQUIRE(r);
  return std::move(r).value();
}

/// The message of the error `line` is refused with (the test fails when it is accepted).
std::string refusal(const std::string& line) {
  auto r = parse_request(line);
  INFO(line);
  REQUIRE_FALSE(r);
  CHECK(r.err().kind == error_kind::invalid_input);
  return r.err().message;
}

/// One of the node's answers as JSON: one object, one line, ending in '\n'.
json answer(const std::string& line) {
  REQUIRE(!line.empty());
  CHECK(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);
  const json j = json::parse(line, nullptr, false);
  REQUIRE(j.is_object());
  CHECK(j.at("v") == lease_protocol_version);
  return j;
}

/// An averaged answer read back through parse_request: the node's "averaged" and a program's
/// "average" carry sizes and data in the same form, so only the op is changed.
lease_request averaged_as_request(const std::string& line) {
  json j = answer(line);
  CHECK(j.at("op") == "averaged");
  j["op"] = "average";
  return parsed(j.dump());
}

std::vector<float> random_floats(std::mt19937& rng, std::size_t n) {
  std::vector<float> v(n);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (auto& x : v) {
    const std::uint32_t u = bits(rng);  // every bit pattern: NaNs, infinities, -0, denormals
    std::memcpy(&x, &u, 4);
  }
  return v;
}

std::string b64(const std::string& s) { return base64_encode(s.data(), s.size()); }

}  // namespace

TEST_CASE("lease protocol: each request parses with its fields", "[lease][protocol]") {
  auto h = parsed(R"({"v":1,"op":"hello","token":"ab12","pid":4321})");
  CHECK(h.op == request_op::hello);
  CHECK(h.token == "ab12");
  CHECK(h.pid == 4321);
  CHECK_FALSE(h.own_step);
  CHECK(parsed(R"({"v":1,"op":"hello","token":"t","pid":1,"step":900})").own_step == 900);

  auto r = parsed(R"({"op":"report","v":1,"steps":17,"loss":0.25,"final":true,"extra":[1]})");
  CHECK(r.op == request_op::report);
  CHECK(r.steps == 17);
  CHECK(r.loss == 0.25);
  CHECK(r.final);
  auto plain = parsed(R"({"v":1,"op":"report","steps":0})");
  CHECK_FALSE(plain.loss);
  CHECK_FALSE(plain.final);
  CHECK(parsed(R"({"v":1,"op":"report","steps":3,"loss":2})").loss == 2.0);  // an integer loss

  auto c = parsed(R"({"v":1,"op":"complete","steps":40,"accuracy":0.875})");
  CHECK(c.op == request_op::complete);
  CHECK(c.steps == 40);
  CHECK(c.accuracy == 0.875);
  CHECK_FALSE(c.loss);

  // 1.0f, -2.0f, 0.5f as little-endian float32: 00 00 80 3f | 00 00 00 c0 | 00 00 00 3f.
  auto a = parsed(R"({"v":1,"op":"average","sizes":[1,2],"data":"AACAPwAAAMAAAAA/"})");
  CHECK(a.op == request_op::average);
  CHECK(a.sizes == std::vector<std::size_t>{1, 2});
  CHECK(a.data == std::vector<float>{1.0f, -2.0f, 0.5f});
  auto empty = parsed(R"({"v":1,"op":"average","sizes":[],"data":""})");
  CHECK(empty.sizes.empty());
  CHECK(empty.data.empty());
  CHECK(parsed(R"({"v":1,"op":"average","sizes":[0,1,0],"data":"AACAPw=="})").data.size() == 1);
}

TEST_CASE("lease protocol: counts are bounded to [0, 2^53] and numbers to finite values",
          "[lease][protocol]") {
  const std::string two53 = "9007199254740992";
  CHECK(parsed(R"({"v":1,"op":"report","steps":)" + two53 + "}").steps == (std::int64_t{1} << 53));
  CHECK(parsed(R"({"v":1,"op":"hello","token":"t","pid":)" + two53 + "}").pid ==
        (std::int64_t{1} << 53));
  for (const std::string bad : {"-1", "9007199254740993", "18446744073709551615",
                                "99999999999999999999", "1.5", "1e3", "\"3\"", "true", "null"}) {
    INFO(bad);
    CHECK(has(refusal(R"({"v":1,"op":"report","steps":)" + bad + "}"),
              "'report': field 'steps' must be an integer from 0 to 9007199254740992, got "));
    CHECK(has(refusal(R"({"v":1,"op":"hello","token":"t","pid":1,"step":)" + bad + "}"),
              "'hello': field 'step' must be an integer"));
  }
  // A number past a double's range is refused by the JSON reader, which says so.
  CHECK(has(refusal(R"({"v":1,"op":"report","steps":1,"loss":1e400})"),
            "number overflow parsing '1e400'"));
  CHECK(has(refusal(R"({"v":1,"op":"complete","steps":1,"accuracy":-1e999})"),
            "number overflow parsing '-1e999'"));
  CHECK(has(refusal(R"({"v":1,"op":"report","steps":1,"loss":NaN})"),
            "NaN and Infinity are not JSON numbers"));
}

TEST_CASE("lease protocol: errors say what is wrong in a program author's words",
          "[lease][protocol]") {
  CHECK(refusal(R"({"v":2,"op":"hello","token":"t","pid":1})") ==
        "protocol version 2 is not spoken here (this node speaks 1)");
  CHECK(has(refusal(R"({"v":0})"), "protocol version 0 is not spoken here (this node speaks 1)"));
  CHECK(has(refusal(R"({"v":"1","op":"hello"})"), "field 'v' must be the protocol version"));
  CHECK(has(refusal(R"({"op":"hello","token":"t","pid":1})"), "field 'v' is missing"));
  CHECK(has(refusal("this is not json"),
            "not a line of JSON: 'this is not json': parse error at "
            "column 2: syntax error while parsing value"));
  CHECK(has(refusal(""), "not a line of JSON"));
  CHECK(has(refusal("\x01\xff{"), "not a line of JSON: '\\x01\\xff{'"));
  CHECK(has(refusal(R"({"v":1,"op":"report","steps":1} trailing)"), "not a line of JSON"));
  CHECK(has(refusal("[1,2]"), "a message must be a JSON object, got an array"));
  CHECK(has(refusal("7"), "a message must be a JSON object, got 7"));
  CHECK(has(refusal(R"({"v":1})"), "field 'op' is missing"));
  CHECK(has(refusal(R"({"v":1,"op":3})"), "field 'op' must be a string"));
  CHECK(has(refusal(R"({"v":1,"op":"dance"})"), "unknown op 'dance'"));
  CHECK(has(refusal(R"({"v":1,"op":"averaged","sizes":[],"data":""})"), "unknown op 'averaged'"));
  CHECK(has(refusal(R"({"v":1,"op":"hello","pid":1})"), "'hello' needs field 'token'"));
  CHECK(has(refusal(R"({"v":1,"op":"hello","token":5,"pid":1})"),
            "'hello': field 'token' must be a string, got 5"));
  CHECK(has(refusal(R"({"v":1,"op":"hello","token":"t"})"), "'hello' needs field 'pid'"));
  CHECK(has(refusal(R"({"v":1,"op":"hello","token":"t","pid":"12"})"),
            "'hello': field 'pid' must be an integer from 0 to 9007199254740992, got a string"));
  CHECK(has(refusal(R"({"v":1,"op":"report"})"), "'report' needs field 'steps'"));
  CHECK(has(refusal(R"({"v":1,"op":"report","steps":1,"final":"yes"})"),
            "'report': field 'final' must be true or false, got a string"));
  CHECK(has(refusal(R"({"v":1,"op":"report","steps":1,"loss":[]})"),
            "'report': field 'loss' must be a number, got an array"));
  // An op name is quoted, but never at length.
  const std::string long_op(5000, 'x');
  const auto m = refusal(R"({"v":1,"op":")" + long_op + R"("})");
  CHECK(m.size() < 200);
}

TEST_CASE("lease protocol: an average's sizes and data must agree", "[lease][protocol]") {
  CHECK(has(refusal(R"({"v":1,"op":"average","data":""})"), "'average' needs field 'sizes'"));
  CHECK(has(refusal(R"({"v":1,"op":"average","sizes":3,"data":""})"),
            "'average': field 'sizes' must be an array, got 3"));
  CHECK(has(refusal(R"({"v":1,"op":"average","sizes":[1,-1],"data":""})"),
            "'average': field 'sizes' item 1 must be an integer from 0 to 268435456, got -1"));
  CHECK(has(refusal(R"({"v":1,"op":"average","sizes":[1.0],"data":"AACAPw=="})"),
            "item 0 must be an integer"));
  CHECK(has(refusal(R"({"v":1,"op":"average","sizes":[268435456,1],"data":""})"),
            "adds up to more than 268435456 values"));
  CHECK(has(refusal(R"({"v":1,"op":"average","sizes":[1]})"), "'average' needs field 'data'"));
  CHECK(has(refusal(R"({"v":1,"op":"average","sizes":[1],"data":7})"),
            "'average': field 'data' must be a string"));
  CHECK(has(refusal(R"({"v":1,"op":"average","sizes":[1],"data":"AACAP"})"),
            "'average': field 'data' is not valid base64: its length 5 is not a multiple of 4"));
  CHECK(has(refusal(R"({"v":1,"op":"average","sizes":[1],"data":"AACA"})"),
            "holds 3 bytes, not a whole number of float32 values"));
  CHECK(has(refusal(R"({"v":1,"op":"average","sizes":[2],"data":"AACAPw=="})"),
            "'average': field 'sizes' adds up to 2 values but 'data' holds 1"));
  CHECK(has(refusal(R"({"v":1,"op":"average","sizes":[],"data":"AACAPw=="})"),
            "adds up to 0 values but 'data' holds 1"));
}

TEST_CASE("lease protocol: deep nesting is refused before it is built", "[lease][protocol]") {
  // A line of brackets would otherwise become one JSON value per byte.
  CHECK(has(refusal(std::string(100000, '[')), "brackets nest deeper than 16 levels"));
  CHECK(has(refusal(R"({"v":1,"op":"report","steps":1,"x":)" + std::string(20, '[') +
                    std::string(20, ']') + "}"),
            "nest deeper"));
  // Brackets inside strings do not count.
  CHECK(parsed(R"({"v":1,"op":"hello","pid":1,"token":")" + std::string(100, '[') + "\\\"" +
               std::string(100, '{') + R"("})")
            .token.size() == 201);
}

TEST_CASE("lease protocol: the node's answers", "[lease][protocol]") {
  // job, copy, copies, step, steps, seconds, speed, writer
  lease_terms t{12, 2, 3, 400, 50, 12.5, 0.25, true};
  json j = answer(format_lease(t));
  CHECK(j.at("op") == "lease");
  CHECK(j.at("job") == 12);
  CHECK(j.at("copy") == 2);
  CHECK(j.at("copies") == 3);
  CHECK(j.at("step") == 400);
  CHECK(j.at("steps") == 50);
  CHECK(j.at("seconds") == 12.5);
  CHECK(j.at("speed") == 0.25);
  CHECK(j.at("writer") == true);
  // JSON has no infinity or NaN: an endless lease is "no time cap".
  t.seconds = std::numeric_limits<double>::infinity();
  t.speed = std::nan("");
  j = answer(format_lease(t));
  CHECK(j.at("seconds") == -1.0);
  CHECK(j.at("speed") == 1.0);

  CHECK(answer(format_exit()).at("op") == "exit");
  j = answer(format_error("bad \"quote\"\nand a newline \xff\xfe"));  // invalid UTF-8 too
  CHECK(j.at("op") == "error");
  CHECK(has(j.at("message").get<std::string>(), "bad \"quote\"\nand a newline"));

  j = answer(format_averaged({1, 2}, {1.0f, -2.0f, 0.5f}, 3, 77));
  CHECK(j.at("op") == "averaged");
  CHECK(j.at("sizes") == json::array({1, 2}));
  CHECK(j.at("data") == "AACAPwAAAMAAAAA/");  // little-endian float32, whatever the host
  CHECK(j.at("copies") == 3);
  CHECK(j.at("step") == 77);
}

TEST_CASE("lease protocol: random buffers go through format_averaged and back bit for bit",
          "[lease][protocol][property]") {
  std::mt19937 rng(13);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::size_t> sizes(std::uniform_int_distribution<int>(0, 6)(rng));
    std::size_t total = 0;
    for (auto& s : sizes) total += s = std::uniform_int_distribution<std::size_t>(0, 40)(rng);
    const auto data = random_floats(rng, total);
    const auto line = format_averaged(sizes, data, round % 5 + 1, round);
    const auto back = averaged_as_request(line);
    INFO("round " << round);
    CHECK(back.sizes == sizes);
    CHECK(same_bits(back.data, data));
    CHECK(answer(line).at("copies") == round % 5 + 1);
  }
}

TEST_CASE("base64: RFC 4648 vectors", "[lease][protocol]") {
  const std::pair<std::string, std::string> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : vectors) {
    CHECK(b64(plain) == coded);
    auto d = base64_decode(coded);
    REQUIRE(d);
    CHECK(std::string(d->begin(), d->end()) == plain);
  }
  static const char all[] =
      "\x00\x10\x83\x10\x51\x87\x20\x92\x8b\x30\xd3\x8f\x41\x14\x93\x51"
      "\x55\x97\x61\x96\x9b\x71\xd7\x9f\x82\x18\xa3\x92\x59\xa7\xa2\x9a"
      "\xab\xb2\xdb\xaf\xc3\x1c\xb3\xd3\x5d\xb7\xe3\x9e\xbb\xf3\xdf\xbf";
  CHECK(base64_encode(all, 48) ==
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
}

TEST_CASE("base64: random bytes round trip", "[lease][protocol][property]") {
  std::mt19937 rng(4648);
  for (int round = 0; round < 500; ++round) {
    std::vector<std::uint8_t> bytes(std::uniform_int_distribution<int>(0, 100)(rng));
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    const auto text = base64_encode(bytes.data(), bytes.size());
    CHECK(text.size() == (bytes.size() + 2) / 3 * 4);
    auto back = base64_decode(text);
    REQUIRE(back);
    CHECK(*back == bytes);
  }
}

TEST_CASE("base64: anything not canonical is refused", "[lease][protocol]") {
  const std::pair<const char*, const char*> bad[] = {
      {"Zg", "not a multiple of 4"},
      {"Zg=", "not a multiple of 4"},
      {"Zh==", "not canonical"},  // 'f' with a stray bit after it
      {"Zm9=", "not canonical"},  // "fo" with a stray bit
      {"Zg==Zg==", "padding before the end"},
      {"Z===", "padding before the end"},
      {"====", "padding before the end"},
      {"Zm9v!A==", "'!' at offset 4 is not in the alphabet"},
      {"Zm9v\nYmFy", "not a multiple of 4"},
      {"Zm9 ", "' ' at offset 3 is not in the alphabet"},
      {"Zm-_", "'-' at offset 2 is not in the alphabet"},  // the URL alphabet is not this one
      {"Zm8=\n   ", "'=' at offset 3 is padding before the end"},
  };
  for (const auto& [text, why] : bad) {
    auto r = base64_decode(text);
    INFO(text);
    REQUIRE_FALSE(r);
    CHECK(has(r.err().message, why));
  }
}

TEST_CASE("base64: what decodes is the one encoding of its bytes", "[lease][protocol][property]") {
  // Random strings over the alphabet and '=': every one that is accepted must encode back to
  // itself, so no two texts stand for the same bytes.
  const std::string chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=";
  std::mt19937 rng(7);
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string text(4 * std::uniform_int_distribution<int>(0, 3)(rng), ' ');
    for (auto& c : text) c = chars[rng() % chars.size()];
    // Bias toward a padded end, where the non-canonical forms live.
    if (!text.empty() && round % 2) text.back() = '=';
    auto r = base64_decode(text);
    if (!r) continue;
    ++accepted;
    CHECK(base64_encode(r->data(), r->size()) == text);
  }
  CHECK(accepted > 1000);
}

TEST_CASE("lease protocol: op names and the token of a refused line", "[lease][protocol]") {
  CHECK(std::string(op_name(request_op::hello)) == "hello");
  CHECK(std::string(op_name(request_op::report)) == "report");
  CHECK(std::string(op_name(request_op::average)) == "average");
  CHECK(std::string(op_name(request_op::complete)) == "complete");
  CHECK(token_of(R"({"v":2,"op":"hello","token":"abc"})") == std::optional<std::string>("abc"));
  CHECK_FALSE(token_of(R"({"v":1,"token":5})"));
  CHECK_FALSE(token_of("not json \"token\":\"abc\""));
  CHECK_FALSE(token_of(std::string(1000, '[')));
}
