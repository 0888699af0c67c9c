// Warm leases in the lease protocol (docs/lease-protocol.md, "Warm leases"): the `renew` op,
// the hello's "renew" and the lease's "renewable" and "ends_job", and a lease_slot renewed in
// place or released. The executor's side is tests/actors/test_program_warm.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/node/program/lease_slot.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::program;
using tessera::test::has;
using json = nlohmann::json;

TEST_CASE("renew parses with its steps and loss, and hello says whether it renews",
          "[lease][renew]") {
  auto r = parse_request(R"({"v":2,"op":"renew","steps":12,"loss":0.25})");
  REQUIRE(r);
  CHECK(r->op == request_op::renew);
  CHECK(r->steps == 12);
  REQUIRE(r->loss);
  CHECK(*r->loss == 0.25);
  CHECK(std::string(op_name(request_op::renew)) == "renew");
  auto no_steps = parse_request(R"({"v":2,"op":"renew"})");
  REQUIRE_FALSE(no_steps);
  CHECK(has(no_steps.err().message, "'renew' needs field 'steps'"));

  auto warm = parse_request(R"({"v":2,"op":"hello","token":"t","pid":3,"renew":true})");
  REQUIRE(warm);
  CHECK(warm->renew);
  auto cold = parse_request(R"({"v":2,"op":"hello","token":"t","pid":3})");
  REQUIRE(cold);
  CHECK_FALSE(cold->renew);
  auto bad = parse_request(R"({"v":2,"op":"hello","token":"t","pid":3,"renew":"yes"})");
  REQUIRE_FALSE(bad);
  CHECK(has(bad.err().message, "'hello': field 'renew' must be true or false"));
  auto unknown = parse_request(R"({"v":2,"op":"prolong","steps":1})");
  REQUIRE_FALSE(unknown);
  CHECK(has(unknown.err().message, "complete or renew"));

  lease_terms t;
  t.renewable = true;
  t.ends_job = true;
  const auto j = json::parse(format_lease(t));
  CHECK(j.at("renewable") == true);
  CHECK(j.at("ends_job") == true);
  CHECK(j.at("checkpoint") == true);  // saved unless the node says otherwise
  t.checkpoint = false;
  CHECK(json::parse(format_lease(t)).at("checkpoint") == false);
}

namespace {

lease_terms renewable_terms() {
  lease_terms t;
  t.job = 3;
  t.step = 100;
  t.steps = -1;
  t.renewable = true;
  return t;
}

lease_request hello(bool renew) {
  lease_request r;
  r.op = request_op::hello;
  r.pid = 9;
  r.own_step = 100;
  r.renew = renew;
  return r;
}

lease_request renew_at(std::int64_t steps) {
  lease_request r;
  r.op = request_op::renew;
  r.steps = steps;
  return r;
}

}  // namespace

TEST_CASE("a lease slot renews in place: steps from zero, the next step, then exit",
          "[lease][renew]") {
  using namespace std::chrono_literals;
  lease_slot slot(renewable_terms(), lease_clock::now() + 5s);
  std::vector<std::string> sent;
  slot.set_sender([&](std::string l) { sent.push_back(std::move(l)); });
  const auto first = json::parse(slot.on_request(hello(true)));
  CHECK(first.at("renewable") == true);
  CHECK(slot.view().renewable);

  // renew: no answer yet; every other request (and a second renew) is out of order now.
  CHECK(slot.on_request(renew_at(40)).empty());
  auto v = slot.view();
  CHECK(v.renew_waiting);
  CHECK(v.steps == 40);
  lease_request report;
  report.op = request_op::report;
  report.steps = 41;
  CHECK(has(order_error(report, v), "'report' sent while its 'renew' waits"));
  CHECK(has(order_error(renew_at(41), v), "'renew' sent while its 'renew' waits"));
  CHECK(sent.empty());

  // renew(): a lease from the job's new step, with steps counted afresh.
  auto next = renewable_terms();
  next.step = 140;
  next.steps = 30;
  REQUIRE(slot.renew(next, lease_clock::now() + 2s, 0));
  REQUIRE(sent.size() == 1);
  const auto lease = json::parse(sent[0]);
  CHECK(lease.at("op") == "lease");
  CHECK(lease.at("step") == 140);
  CHECK(lease.at("steps") == 30);
  CHECK(lease.at("seconds").get<double>() > 1.5);
  CHECK(lease.at("renewable") == true);
  v = slot.view();
  CHECK_FALSE(v.renew_waiting);
  CHECK(v.renewals == 1);
  CHECK(v.steps == 0);
  REQUIRE(v.own_step);
  CHECK(*v.own_step == 140);
  report.steps = 5;
  CHECK(order_error(report, v).empty());           // counted from the renewal, not from hello
  CHECK_FALSE(slot.renew(next, std::nullopt, 0));  // nothing waits: nothing sent
  CHECK(sent.size() == 1);

  // release(): exit, once.
  slot.on_request(report);
  CHECK(slot.on_request(renew_at(9)).empty());
  slot.release();
  slot.release();
  REQUIRE(sent.size() == 2);
  CHECK(json::parse(sent[1]).at("op") == "exit");
  CHECK_FALSE(slot.view().renew_waiting);
}

TEST_CASE("renew is refused on a lease the hello or the node did not make renewable",
          "[lease][renew]") {
  lease_slot cold(renewable_terms());
  CHECK(json::parse(cold.on_request(hello(false))).at("renewable") == false);
  CHECK(has(order_error(renew_at(1), cold.view()), "did not make renewable"));

  auto no = renewable_terms();
  no.renewable = false;
  lease_slot refused(no);
  CHECK(json::parse(refused.on_request(hello(true))).at("renewable") == false);
  CHECK(has(order_error(renew_at(1), refused.view()), "did not make renewable"));

  // A renewal keeps the hello's answer: a program that did not ask is never renewable.
  lease_slot asked(renewable_terms());
  asked.set_sender([](std::string) {});
  asked.on_request(hello(true));
  lease_request avg;
  avg.op = request_op::average;
  avg.sizes = {1};
  asked.on_request(avg);
  CHECK(has(order_error(renew_at(1), asked.view()), "'renew' sent while its 'average' waits"));
  // A closed connection: nothing to renew.
  lease_slot gone(renewable_terms());
  gone.set_sender([](std::string) {});
  gone.on_request(hello(true));
  gone.on_request(renew_at(2));
  gone.on_closed("");
  CHECK_FALSE(gone.renew(renewable_terms(), std::nullopt, 0));
}
