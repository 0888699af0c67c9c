// The lease channel's messages (runtime/node/program/lease_protocol.hpp), version 2: parsing
// what a program sends (every field, every bound, errors a program's author can act on, version
// 1's lines refused naming both versions), and the node's answers. An average's buffers travel
// in shared memory, not in the line (test_lease_server.cpp, test_shared_floats.cpp), so here an
// average is its sizes only.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
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
/// "average" carry their sizes in the same form, so only the op is changed (and the reply's
/// own fields, which a request would ignore, are left in).
lease_request averaged_as_request(const std::string& line) {
  json j = answer(line);
  CHECK(j.at("op") == "averaged");
  j["op"] = "average";
  return parsed(j.dump());
}

/// The most float32 values one average may name (the parser's bound on arithmetic), 2^42.
constexpr std::uint64_t max_floats = std::uint64_t{1} << 42;

}  // namespace

TEST_CASE("lease protocol: each request parses with its fields", "[lease][protocol]") {
  auto h = parsed(R"({"v":2,"op":"hello","token":"ab12","pid":4321})");
  CHECK(h.op == request_op::hello);
  CHECK(h.token == "ab12");
  CHECK(h.pid == 4321);
  CHECK_FALSE(h.own_step);
  CHECK(parsed(R"({"v":2,"op":"hello","token":"t","pid":1,"step":900})").own_step == 900);

  auto r = parsed(R"({"op":"report","v":2,"steps":17,"loss":0.25,"final":true,"extra":[1]})");
  CHECK(r.op == request_op::report);
  CHECK(r.steps == 17);
  CHECK(r.loss == 0.25);
  CHECK(r.final);
  auto plain = parsed(R"({"v":2,"op":"report","steps":0})");
  CHECK_FALSE(plain.loss);
  CHECK_FALSE(plain.final);
  CHECK(parsed(R"({"v":2,"op":"report","steps":3,"loss":2})").loss == 2.0);  // an integer loss

  auto c = parsed(R"({"v":2,"op":"complete","steps":40,"accuracy":0.875})");
  CHECK(c.op == request_op::complete);
  CHECK(c.steps == 40);
  CHECK(c.accuracy == 0.875);
  CHECK_FALSE(c.loss);

  // An average is its sizes: the float32 values come in shared memory with the line.
  auto a = parsed(R"({"v":2,"op":"average","sizes":[1,2]})");
  CHECK(a.op == request_op::average);
  CHECK(a.sizes == std::vector<std::size_t>{1, 2});
  auto empty = parsed(R"({"v":2,"op":"average","sizes":[]})");
  CHECK(empty.op == request_op::average);
  CHECK(empty.sizes.empty());
  CHECK(parsed(R"({"sizes":[0,1,0],"op":"average","v":2,"extra":"x"})").sizes ==
        std::vector<std::size_t>{0, 1, 0});
}

TEST_CASE("lease protocol: counts are bounded to [0, 2^53] and numbers to finite values",
          "[lease][protocol]") {
  const std::string two53 = "9007199254740992";
  CHECK(parsed(R"({"v":2,"op":"report","steps":)" + two53 + "}").steps == (std::int64_t{1} << 53));
  CHECK(parsed(R"({"v":2,"op":"hello","token":"t","pid":)" + two53 + "}").pid ==
        (std::int64_t{1} << 53));
  for (const std::string bad : {"-1", "9007199254740993", "18446744073709551615",
                                "99999999999999999999", "1.5", "1e3", "\"3\"", "true", "null"}) {
    INFO(bad);
    CHECK(has(refusal(R"({"v":2,"op":"report","steps":)" + bad + "}"),
              "'report': field 'steps' must be an integer from 0 to 9007199254740992, got "));
    CHECK(has(refusal(R"({"v":2,"op":"hello","token":"t","pid":1,"step":)" + bad + "}"),
              "'hello': field 'step' must be an integer"));
  }
  // A number past a double's range is refused by the JSON reader, which says so.
  CHECK(has(refusal(R"({"v":2,"op":"report","steps":1,"loss":1e400})"),
            "number overflow parsing '1e400'"));
  CHECK(has(refusal(R"({"v":2,"op":"complete","steps":1,"accuracy":-1e999})"),
            "number overflow parsing '-1e999'"));
  CHECK(has(refusal(R"({"v":2,"op":"report","steps":1,"loss":NaN})"),
            "NaN and Infinity are not JSON numbers"));
}

TEST_CASE("lease protocol: errors say what is wrong in a program author's words",
          "[lease][protocol]") {
  CHECK(lease_protocol_version == 2);
  // Version 1's lines, every op of them, are refused naming both versions.
  CHECK(refusal(R"({"v":1,"op":"hello","token":"t","pid":1})") ==
        "protocol version 1 is not spoken here (this node speaks 2)");
  CHECK(refusal(R"({"v":1,"op":"report","steps":3})") ==
        "protocol version 1 is not spoken here (this node speaks 2)");
  CHECK(refusal(R"({"v":1,"op":"average","sizes":[1],"data":"AACAPw=="})") ==
        "protocol version 1 is not spoken here (this node speaks 2)");
  CHECK(has(refusal(R"({"v":0})"), "protocol version 0 is not spoken here (this node speaks 2)"));
  CHECK(has(refusal(R"({"v":3,"op":"hello","token":"t","pid":1})"),
            "protocol version 3 is not spoken here (this node speaks 2)"));
  CHECK(has(refusal(R"({"v":"2","op":"hello"})"),
            "field 'v' must be the protocol version as an integer (this node speaks 2), got a "
            "string"));
  CHECK(has(refusal(R"({"v":2.0,"op":"hello","token":"t","pid":1})"),
            "field 'v' must be the protocol version"));
  CHECK(has(refusal(R"({"op":"hello","token":"t","pid":1})"),
            "field 'v' is missing: every message carries the protocol version (\"v\": 2)"));
  CHECK(has(refusal("this is not json"),
            "not a line of JSON: 'this is not json': parse error at "
            "column 2: syntax error while parsing value"));
  CHECK(has(refusal(""), "not a line of JSON"));
  CHECK(has(refusal("\x01\xff{"), "not a line of JSON: '\\x01\\xff{'"));
  CHECK(has(refusal(R"({"v":2,"op":"report","steps":1} trailing)"), "not a line of JSON"));
  CHECK(has(refusal("[1,2]"), "a message must be a JSON object, got an array"));
  CHECK(has(refusal("7"), "a message must be a JSON object, got 7"));
  CHECK(has(refusal(R"({"v":2})"), "field 'op' is missing"));
  CHECK(has(refusal(R"({"v":2,"op":3})"), "field 'op' must be a string"));
  CHECK(has(refusal(R"({"v":2,"op":"dance"})"), "unknown op 'dance'"));
  CHECK(has(refusal(R"({"v":2,"op":"averaged","sizes":[],"copies":1,"step":0})"),
            "unknown op 'averaged'"));
  CHECK(has(refusal(R"({"v":2,"op":"hello","pid":1})"), "'hello' needs field 'token'"));
  CHECK(has(refusal(R"({"v":2,"op":"hello","token":5,"pid":1})"),
            "'hello': field 'token' must be a string, got 5"));
  CHECK(has(refusal(R"({"v":2,"op":"hello","token":"t"})"), "'hello' needs field 'pid'"));
  CHECK(has(refusal(R"({"v":2,"op":"hello","token":"t","pid":"12"})"),
            "'hello': field 'pid' must be an integer from 0 to 9007199254740992, got a string"));
  CHECK(has(refusal(R"({"v":2,"op":"report"})"), "'report' needs field 'steps'"));
  CHECK(has(refusal(R"({"v":2,"op":"report","steps":1,"final":"yes"})"),
            "'report': field 'final' must be true or false, got a string"));
  CHECK(has(refusal(R"({"v":2,"op":"report","steps":1,"loss":[]})"),
            "'report': field 'loss' must be a number, got an array"));
  // An op name is quoted, but never at length.
  const std::string long_op(5000, 'x');
  const auto m = refusal(R"({"v":2,"op":")" + long_op + R"("})");
  CHECK(m.size() < 200);
}

TEST_CASE("lease protocol: an average's sizes are checked, and data in the line is refused",
          "[lease][protocol]") {
  CHECK(has(refusal(R"({"v":2,"op":"average"})"),
            "'average' needs field 'sizes' (an array of integers)"));
  CHECK(has(refusal(R"({"v":2,"op":"average","sizes":3})"),
            "'average': field 'sizes' must be an array, got 3"));
  CHECK(has(refusal(R"({"v":2,"op":"average","sizes":{"a":1}})"),
            "'average': field 'sizes' must be an array, got an object"));
  CHECK(has(refusal(R"({"v":2,"op":"average","sizes":[1,-1]})"),
            "'average': field 'sizes' item 1 must be an integer from 0 to 4398046511104, got -1"));
  CHECK(has(refusal(R"({"v":2,"op":"average","sizes":[1.0]})"), "item 0 must be an integer"));
  CHECK(has(refusal(R"({"v":2,"op":"average","sizes":["1"]})"),
            "item 0 must be an integer from 0 to 4398046511104, got a string"));
  CHECK(has(refusal(R"({"v":2,"op":"average","sizes":[4398046511105]})"),
            "item 0 must be an integer from 0 to 4398046511104, got 4398046511105"));
  CHECK(has(refusal(R"({"v":2,"op":"average","sizes":[18446744073709551615]})"),
            "item 0 must be an integer"));

  // 2^42 values is a bound on arithmetic only (what the memfd holds is checked when the node
  // maps it): exactly 2^42 in all parses, one more is refused.
  const std::string half = std::to_string(max_floats / 2);
  CHECK(parsed(R"({"v":2,"op":"average","sizes":[4398046511104]})").sizes ==
        std::vector<std::size_t>{static_cast<std::size_t>(max_floats)});
  CHECK(parsed(R"({"v":2,"op":"average","sizes":[)" + half + "," + half + "]}").sizes.size() == 2);
  CHECK(has(refusal(R"({"v":2,"op":"average","sizes":[)" + half + "," + half + ",1]}"),
            "'average': field 'sizes' adds up to more than 4398046511104 values, the most one "
            "average carries"));
  CHECK(has(refusal(R"({"v":2,"op":"average","sizes":[4398046511104,1]})"),
            "adds up to more than 4398046511104 values"));
  // Far more than 268435456 values (version 1's cap on a line's data) is fine now.
  CHECK(parsed(R"({"v":2,"op":"average","sizes":[268435456,268435456,1]})").sizes.size() == 3);

  // A "data" field is version 1's way, whatever it holds: the message says what to do instead.
  for (const std::string data : {R"("AACAPw==")", R"("")", "7", "null", "[1.0]"}) {
    INFO(data);
    const auto m = refusal(R"({"v":2,"op":"average","sizes":[1],"data":)" + data + "}");
    CHECK(has(m, "'average': field 'data' is lease protocol version 1's"));
    CHECK(has(m, "shared memory"));
    CHECK(has(m, "memfd"));
    CHECK(has(m, "SCM_RIGHTS"));
  }
  CHECK(has(refusal(R"({"v":2,"op":"average","sizes":[],"data":""})"), "version 1's"));
  // A missing or bad "sizes" is named first.
  CHECK(has(refusal(R"({"v":2,"op":"average","data":""})"), "'average' needs field 'sizes'"));
  // Other ops do not look at "data".
  CHECK(parsed(R"({"v":2,"op":"report","steps":1,"data":"x"})").steps == 1);
}

TEST_CASE("lease protocol: deep nesting is refused before it is built", "[lease][protocol]") {
  // A line of brackets would otherwise become one JSON value per byte.
  CHECK(has(refusal(std::string(100000, '[')), "brackets nest deeper than 16 levels"));
  CHECK(has(refusal(R"({"v":2,"op":"report","steps":1,"x":)" + std::string(20, '[') +
                    std::string(20, ']') + "}"),
            "nest deeper"));
  // Brackets inside strings do not count.
  CHECK(parsed(R"({"v":2,"op":"hello","pid":1,"token":")" + std::string(100, '[') + "\\\"" +
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

  // averaged: the mean is in the program's shared memory, so the line has no data.
  j = answer(format_averaged({1, 2}, 3, 77));
  CHECK(j.at("op") == "averaged");
  CHECK(j.at("sizes") == json::array({1, 2}));
  CHECK(j.at("copies") == 3);
  CHECK(j.at("step") == 77);
  CHECK_FALSE(j.contains("data"));
  CHECK(j.size() == 5);  // v, op, sizes, copies, step
  CHECK(format_averaged({1, 2}, 3, 77) ==
        R"({"v":2,"op":"averaged","sizes":[1,2],"copies":3,"step":77})"
        "\n");
  j = answer(format_averaged({}, 1, 0));
  CHECK(j.at("sizes") == json::array());
  CHECK(j.at("copies") == 1);
  CHECK(j.at("step") == 0);
  const std::size_t big = std::size_t{1} << 40;
  j = answer(format_averaged({big, 0}, 2, std::int64_t{1} << 53));
  CHECK(j.at("sizes") == json::array({big, 0}));
  CHECK(j.at("step") == (std::int64_t{1} << 53));
}

TEST_CASE("lease protocol: random sizes go through format_averaged and back",
          "[lease][protocol][property]") {
  std::mt19937_64 rng(13);
  for (int round = 0; round < 500; ++round) {
    std::vector<std::size_t> sizes(std::uniform_int_distribution<int>(0, 8)(rng));
    // Small sizes, and some up to 2^38 (8 of them stay under the 2^42 bound together).
    const std::size_t top = round % 3 ? 40 : std::size_t{1} << 38;
    for (auto& s : sizes) s = std::uniform_int_distribution<std::size_t>(0, top)(rng);
    const std::int32_t copies = round % 5 + 1;
    const std::int64_t step = std::uniform_int_distribution<std::int64_t>(0, 1LL << 53)(rng);
    const auto line = format_averaged(sizes, copies, step);
    INFO("round " << round << ": " << line);
    const auto back = averaged_as_request(line);
    CHECK(back.op == request_op::average);
    CHECK(back.sizes == sizes);
    const json j = answer(line);
    CHECK(j.at("copies") == copies);
    CHECK(j.at("step") == step);
    CHECK_FALSE(j.contains("data"));
  }
}

TEST_CASE("lease protocol: op names and the token of a refused line", "[lease][protocol]") {
  CHECK(std::string(op_name(request_op::hello)) == "hello");
  CHECK(std::string(op_name(request_op::report)) == "report");
  CHECK(std::string(op_name(request_op::average)) == "average");
  CHECK(std::string(op_name(request_op::complete)) == "complete");
  CHECK(token_of(R"({"v":2,"op":"hello","token":"abc"})") == std::optional<std::string>("abc"));
  CHECK_FALSE(token_of(R"({"v":2,"token":5})"));
  CHECK_FALSE(token_of("not json \"token\":\"abc\""));
  CHECK_FALSE(token_of(std::string(1000, '[')));
}
