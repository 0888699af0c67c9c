#include "actors/api.hpp"

#include <cctype>
#include <optional>

#include "actors/api_json.hpp"
#include "actors/protocol.hpp"
#include "runtime/http/dashboard.hpp"

namespace tessera::actors {

namespace {

/// One request on its way from the server's thread to the API actor.
struct api_call {
  http::request req;
  http::responder answer;
};

}  // namespace
}  // namespace tessera::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::api_call)

namespace tessera::actors {

namespace {

using ojson = nlohmann::ordered_json;
using api_ptr = caf::stateful_actor<api_config>*;

/// Answers `c` when the scheduler replies to `xs`, or 503 after the timeout.
template <class Reply, class F, class... Ts>
void ask(api_ptr self, const api_call& c, F on_reply, Ts&&... xs) {
  auto answer = c.answer;
  self->request(self->state.scheduler, self->state.timeout, std::forward<Ts>(xs)...)
      .then([=](Reply& r) { on_reply(r); },
            [=](caf::error& e) {
              answer.error(503, "the scheduler did not answer: " + self->system().render(e));
            });
}

/// The integer an id path segment holds, if it is one.
std::optional<std::int64_t> parse_id(const std::string& s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  for (char ch : s)
    if (!std::isdigit(static_cast<unsigned char>(ch))) return std::nullopt;
  return std::stoll(s);
}

/// JSON when the body says so (Content-Type, else a first character of '{'), else TOML.
job_text_format body_format(const http::request& r) {
  if (r.content_type.find("json") != std::string::npos) return job_text_format::json;
  if (r.content_type.find("toml") != std::string::npos) return job_text_format::toml;
  const auto first = r.body.find_first_not_of(" \t\r\n");
  return first != std::string::npos && r.body[first] == '{' ? job_text_format::json
                                                             : job_text_format::toml;
}

void submit(api_ptr self, const api_call& c) {
  auto& st = self->state;
  // A client names the directory its job file came from (`tessera submit`), so a program's
  // relative workdir means what it meant beside the file; else the server's directory.
  std::string base = st.base_dir;
  if (auto it = c.req.query.find("base_dir"); it != c.req.query.end()) {
    if (it->second.empty() || it->second.front() != '/')
      return (void)c.answer.error(400, "query 'base_dir': expected an absolute directory");
    base = it->second;
  }
  auto jobs = parse_run_jobs(c.req.body, body_format(c.req), "request body", base,
                             &st.known_kinds, st.check);
  if (!jobs) return (void)c.answer.error(400, jobs.err().message);
  auto answer = c.answer;
  self->request(st.scheduler, st.timeout, submit_job{std::move(*jobs)})
      .then([=](std::vector<std::int64_t>& ids) { answer.json(201, ojson{{"ids", ids}}.dump()); },
            [=](caf::error& e) {
              const bool refused = e.category() == run_error_category &&
                                   e.code() == static_cast<std::uint8_t>(run_errc::bad_job);
              answer.error(refused ? 400 : 503, describe(self->system(), e));
            });
}

void list_jobs(api_ptr self, const api_call& c) {
  std::string filter;
  if (auto it = c.req.query.find("state"); it != c.req.query.end()) filter = it->second;
  ask<std::vector<job_status>>(self, c, [=](std::vector<job_status>& v) {
    ojson a = ojson::array();
    for (const auto& j : v)
      if (filter.empty() || j.state == filter) a.push_back(to_json(j, false));
    c.answer.json(200, ojson{{"jobs", std::move(a)}}.dump());
  }, jobs_atom::value, std::int64_t{-1}, false);
}

void show_job(api_ptr self, const api_call& c, std::int64_t id) {
  ask<std::vector<job_status>>(self, c, [=](std::vector<job_status>& v) {
    if (v.empty()) return (void)c.answer.error(404, "no job " + std::to_string(id));
    c.answer.json(200, to_json(v.front(), true).dump());
  }, jobs_atom::value, id, true);
}

void cancel(api_ptr self, const api_call& c, std::int64_t id) {
  ask<cancel_outcome>(self, c, [=](cancel_outcome o) {
    if (o == cancel_outcome::unknown) return (void)c.answer.error(404, "no job " + std::to_string(id));
    if (o == cancel_outcome::ended)
      return (void)c.answer.error(409, "job " + std::to_string(id) + " has already ended");
    ask<std::vector<job_status>>(self, c, [=](std::vector<job_status>& v) {
      if (v.empty()) return (void)c.answer.error(404, "no job " + std::to_string(id));
      c.answer.json(202, to_json(v.front(), false).dump());
    }, jobs_atom::value, id, false);
  }, cancel_job{id});
}

void rounds(api_ptr self, const api_call& c) {
  std::int32_t limit = 50;
  if (auto it = c.req.query.find("limit"); it != c.req.query.end()) {
    auto n = parse_id(it->second);
    if (!n || *n < 1 || *n > 1000)
      return (void)c.answer.error(400, "query 'limit': expected an integer in [1, 1000]");
    limit = static_cast<std::int32_t>(*n);
  }
  ask<std::vector<round_status>>(self, c, [=](std::vector<round_status>& v) {
    ojson a = ojson::array();
    for (const auto& r : v) a.push_back(to_json(r));
    c.answer.json(200, ojson{{"rounds", std::move(a)}}.dump());
  }, rounds_atom::value, limit);
}

/// Routes under /v1/jobs: the list, one job, its cancel.
void jobs_route(api_ptr self, const api_call& c, const std::string& rest) {
  const auto& m = c.req.method;
  if (rest.empty()) {
    if (m == "POST") return submit(self, c);
    if (m == "GET") return list_jobs(self, c);
    return (void)c.answer.error(405, "/v1/jobs takes GET or POST");
  }
  const auto slash = rest.find('/');
  const auto id = parse_id(rest.substr(0, slash));
  if (!id) return (void)c.answer.error(404, "no job '" + rest.substr(0, slash) + "'");
  const std::string tail = slash == std::string::npos ? "" : rest.substr(slash);
  if (tail.empty() && m == "GET") return show_job(self, c, *id);
  if (tail == "/cancel" && m == "POST") return cancel(self, c, *id);
  if (tail.empty() || tail == "/cancel")
    return (void)c.answer.error(405, "method " + m + " not allowed on " + c.req.path);
  c.answer.error(404, "no such resource: " + c.req.path);
}

void route(api_ptr self, const api_call& c) {
  const auto& p = c.req.path;
  const auto& m = c.req.method;
  if ((p == "/" || p == "/dashboard") && m == "GET")
    return (void)c.answer(200, "text/html; charset=utf-8", std::string(http::dashboard_page()));
  if (p == "/metrics" && m == "GET") {
    auto counts = self->state.request_counts;
    return ask<cluster_status>(self, c, [=](cluster_status& s) {
      c.answer(200, "text/plain; version=0.0.4", metrics_text(s, counts ? counts() : decltype(counts())()));
    }, cluster_atom::value);
  }
  const std::string jobs = "/v1/jobs";
  if (p == jobs) return jobs_route(self, c, "");
  if (p.compare(0, jobs.size() + 1, jobs + "/") == 0) return jobs_route(self, c, p.substr(jobs.size() + 1));
  if (p == "/v1/nodes" && m == "GET")
    return ask<std::vector<node_status>>(self, c, [=](std::vector<node_status>& v) {
      ojson a = ojson::array();
      for (const auto& n : v) a.push_back(to_json(n));
      c.answer.json(200, ojson{{"nodes", std::move(a)}}.dump());
    }, nodes_atom::value);
  if (p == "/v1/rounds" && m == "GET") return rounds(self, c);
  if (p == "/v1/cluster" && m == "GET")
    return ask<cluster_status>(self, c, [=](cluster_status& s) {
      c.answer.json(200, to_json(s).dump());
    }, cluster_atom::value);
  if (p == "/v1/shutdown" && m == "POST")
    return ask<bool>(self, c, [=](bool) {
      c.answer.json(202, ojson{{"shutting_down", true}}.dump());
    }, stop_atom::value);
  c.answer.error(404, "no such resource: " + m + " " + p);
}

caf::behavior api_actor(api_ptr self, api_config cfg) {
  self->state = std::move(cfg);
  return {[=](const api_call& c) { route(self, c); }};
}

}  // namespace

caf::actor spawn_api(caf::actor_system& sys, api_config cfg) {
  return sys.spawn(api_actor, std::move(cfg));
}

http::handler api_handler(caf::actor api) {
  return [api](http::request req, http::responder answer) {
    caf::anon_send(api, api_call{std::move(req), std::move(answer)});
  };
}

}  // namespace tessera::actors
