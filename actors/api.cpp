#include "actors/api.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "actors/api_json.hpp"
#include "actors/protocol.hpp"
#include "runtime/service/http/dashboard.hpp"

namespace tessera::actors {

namespace {

/// How a route answers: status, Content-Type, body.
using reply_fn = std::function<void(int, const std::string&, const std::string&)>;

/// One request on its way from the server's thread to the API actor.
struct api_call {
  http::request req;
  reply_fn answer;
};

/// A recent answer to a GET, reused for api_config::cache_ttl.
struct cached_answer {
  std::chrono::steady_clock::time_point at;
  int status = 0;
  std::string type, body;
};

/// The API actor's state.
struct api_state {
  api_config cfg;
  std::map<std::string, cached_answer> cache;            ///< by cache_key
  std::size_t cached_bytes = 0;                          ///< bodies in `cache`
  std::map<std::string, std::vector<reply_fn>> waiting;  ///< GETs waiting for the scheduler
};

}  // namespace
}  // namespace tessera::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::api_call)

namespace tessera::actors {

namespace {

using ojson = nlohmann::ordered_json;
using api_ptr = caf::stateful_actor<api_state>*;

void reply_json(const api_call& c, int status, const std::string& body) {
  c.answer(status, "application/json", body);
}

void reply_error(const api_call& c, int status, const std::string& message) {
  c.answer(status, "application/json", http::error_body(message));
}

/// Answers `c` when the scheduler replies to `xs`, or 503 after the timeout.
template <class Reply, class F, class... Ts>
void ask(api_ptr self, const api_call& c, F on_reply, Ts&&... xs) {
  self->request(self->state.cfg.scheduler, self->state.cfg.timeout, std::forward<Ts>(xs)...)
      .then([=](Reply& r) { on_reply(r); },
            [=](caf::error& e) {
              reply_error(c, 503, "the scheduler did not answer: " + self->system().render(e));
            });
}

/// The integer an id path segment holds, if it is one.
std::optional<std::int64_t> parse_id(const std::string& s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  for (char ch : s)
    if (!std::isdigit(static_cast<unsigned char>(ch))) return std::nullopt;
  return std::stoll(s);
}

/// Query parameter `name` of `c` as an integer in [lo, hi]: `dflt` when absent, nullopt (after
/// a 400 naming the parameter and `expected`) when it is not one.
std::optional<std::int64_t> query_integer(const api_call& c, const std::string& name,
                                          std::int64_t dflt, std::int64_t lo, std::int64_t hi,
                                          const std::string& expected) {
  const auto it = c.req.query.find(name);
  if (it == c.req.query.end()) return dflt;
  const auto n = parse_id(it->second);
  if (n && *n >= lo && *n <= hi) return n;
  reply_error(c, 400, "query '" + name + "': expected " + expected);
  return std::nullopt;
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
  auto& st = self->state.cfg;
  // A client names the directory its job file came from (`tessera submit`), so a program's
  // relative workdir means what it meant beside the file; else the server's directory.
  std::string base = st.base_dir;
  if (auto it = c.req.query.find("base_dir"); it != c.req.query.end()) {
    if (it->second.empty() || it->second.front() != '/')
      return reply_error(c, 400, "query 'base_dir': expected an absolute directory");
    base = it->second;
  }
  auto jobs = parse_run_jobs(c.req.body, body_format(c.req), "request body", base, &st.known_kinds,
                             st.check);
  if (!jobs) return reply_error(c, 400, jobs.err().message);
  if (jobs->size() > st.max_jobs_per_submission)
    return reply_error(c, 413,
                       "a submission holds at most " + std::to_string(st.max_jobs_per_submission) +
                           " jobs, this one " + std::to_string(jobs->size()) +
                           ": submit them in batches");
  self->request(st.scheduler, st.timeout, submit_job{std::move(*jobs)})
      .then(
          [=](std::vector<std::int64_t>& ids) {
            reply_json(c, 201, ojson{{"ids", ids}}.dump());
          },
          [=](caf::error& e) {
            const auto code = e.category() == run_error_category ? e.code() : 0;
            reply_error(c,
                        code == static_cast<std::uint8_t>(run_errc::bad_job)    ? 400
                        : code == static_cast<std::uint8_t>(run_errc::too_many) ? 429
                                                                                : 503,
                        describe(self->system(), e));
          });
}

/// A page of the job list (`limit` and/or `after` given): the scheduler builds only the page,
/// asked for one job more than `limit` to know whether another page follows ("next": the
/// page's last id, else null).
void list_job_page(api_ptr self, const api_call& c, const std::string& filter) {
  const auto limit = query_integer(c, "limit", 100, 1, 1000, "an integer in [1, 1000]");
  if (!limit) return;
  const auto after = query_integer(c, "after", -1, 0, std::numeric_limits<std::int64_t>::max(),
                                   "a job id (an integer >= 0)");
  if (!after) return;
  ask<std::vector<job_status>>(
      self, c,
      [=](std::vector<job_status>& v) {
        const bool more = static_cast<std::int64_t>(v.size()) > *limit;
        if (more) v.resize(static_cast<std::size_t>(*limit));
        ojson a = ojson::array();
        for (const auto& j : v) a.push_back(to_json(j, false));
        ojson body{{"jobs", std::move(a)}, {"next", nullptr}};
        if (more) body["next"] = v.back().summary.id;
        reply_json(c, 200, body.dump());
      },
      job_page_atom::value, *after, static_cast<std::int32_t>(*limit + 1), filter);
}

void list_jobs(api_ptr self, const api_call& c) {
  std::string filter;
  if (auto it = c.req.query.find("state"); it != c.req.query.end()) filter = it->second;
  if (c.req.query.count("limit") || c.req.query.count("after"))
    return list_job_page(self, c, filter);
  ask<std::vector<job_status>>(
      self, c,
      [=](std::vector<job_status>& v) {
        ojson a = ojson::array();
        for (const auto& j : v)
          if (filter.empty() || j.state == filter) a.push_back(to_json(j, false));
        reply_json(c, 200, ojson{{"jobs", std::move(a)}}.dump());
      },
      jobs_atom::value, std::int64_t{-1}, false);
}

void show_job(api_ptr self, const api_call& c, std::int64_t id) {
  ask<std::vector<job_status>>(
      self, c,
      [=](std::vector<job_status>& v) {
        if (v.empty()) return reply_error(c, 404, "no job " + std::to_string(id));
        reply_json(c, 200, to_json(v.front(), true).dump());
      },
      jobs_atom::value, id, true);
}

void cancel(api_ptr self, const api_call& c, std::int64_t id) {
  ask<cancel_outcome>(
      self, c,
      [=](cancel_outcome o) {
        if (o == cancel_outcome::unknown)
          return reply_error(c, 404, "no job " + std::to_string(id));
        if (o == cancel_outcome::ended)
          return reply_error(c, 409, "job " + std::to_string(id) + " has already ended");
        ask<std::vector<job_status>>(
            self, c,
            [=](std::vector<job_status>& v) {
              if (v.empty()) return reply_error(c, 404, "no job " + std::to_string(id));
              reply_json(c, 202, to_json(v.front(), false).dump());
            },
            jobs_atom::value, id, false);
      },
      cancel_job{id});
}

void rounds(api_ptr self, const api_call& c) {
  const auto limit = query_integer(c, "limit", 50, 1, 1000, "an integer in [1, 1000]");
  if (!limit) return;
  ask<std::vector<round_status>>(
      self, c,
      [=](std::vector<round_status>& v) {
        ojson a = ojson::array();
        for (const auto& r : v) a.push_back(to_json(r));
        reply_json(c, 200, ojson{{"rounds", std::move(a)}}.dump());
      },
      rounds_atom::value, static_cast<std::int32_t>(*limit));
}

/// Routes under /v1/jobs: the list, one job, its cancel.
void jobs_route(api_ptr self, const api_call& c, const std::string& rest) {
  const auto& m = c.req.method;
  if (rest.empty()) {
    if (m == "POST") return submit(self, c);
    if (m == "GET") return list_jobs(self, c);
    return reply_error(c, 405, "/v1/jobs takes GET or POST");
  }
  const auto slash = rest.find('/');
  const auto id = parse_id(rest.substr(0, slash));
  if (!id) return reply_error(c, 404, "no job '" + rest.substr(0, slash) + "'");
  const std::string tail = slash == std::string::npos ? "" : rest.substr(slash);
  if (tail.empty() && m == "GET") return show_job(self, c, *id);
  if (tail == "/cancel" && m == "POST") return cancel(self, c, *id);
  if (tail.empty() || tail == "/cancel")
    return reply_error(c, 405, "method " + m + " not allowed on " + c.req.path);
  reply_error(c, 404, "no such resource: " + c.req.path);
}

void route(api_ptr self, const api_call& c) {
  const auto& p = c.req.path;
  const auto& m = c.req.method;
  if ((p == "/" || p == "/dashboard") && m == "GET")
    return (void)c.answer(200, "text/html; charset=utf-8", std::string(http::dashboard_page()));
  if (p == "/metrics" && m == "GET") {
    auto counts = self->state.cfg.request_counts;
    return ask<cluster_status>(
        self, c,
        [=](cluster_status& s) {
          c.answer(200, "text/plain; version=0.0.4",
                   metrics_text(s, counts ? counts() : decltype(counts())()));
        },
        cluster_atom::value);
  }
  const std::string jobs = "/v1/jobs";
  if (p == jobs) return jobs_route(self, c, "");
  if (p.compare(0, jobs.size() + 1, jobs + "/") == 0)
    return jobs_route(self, c, p.substr(jobs.size() + 1));
  if (p == "/v1/nodes" && m == "GET")
    return ask<std::vector<node_status>>(
        self, c,
        [=](std::vector<node_status>& v) {
          ojson a = ojson::array();
          for (const auto& n : v) a.push_back(to_json(n));
          reply_json(c, 200, ojson{{"nodes", std::move(a)}}.dump());
        },
        nodes_atom::value);
  if (p == "/v1/rounds" && m == "GET") return rounds(self, c);
  if (p == "/v1/cluster" && m == "GET")
    return ask<cluster_status>(
        self, c, [=](cluster_status& s) { reply_json(c, 200, to_json(s).dump()); },
        cluster_atom::value);
  if (p == "/v1/shutdown" && m == "POST")
    return ask<bool>(
        self, c,
        [=](bool) {
          reply_json(c, 202, ojson{{"shutting_down", true}}.dump());
        },
        stop_atom::value);
  reply_error(c, 404, "no such resource: " + m + " " + p);
}

/// Keeps `a` under `key`, first dropping the answers past their time and, while the bodies
/// would pass cache_bytes, the oldest.
void keep_answer(api_state& st, const std::string& key, cached_answer a) {
  const auto now = std::chrono::steady_clock::now();
  auto drop = [&st](std::map<std::string, cached_answer>::iterator it) {
    st.cached_bytes -= it->second.body.size();
    return st.cache.erase(it);
  };
  if (auto it = st.cache.find(key); it != st.cache.end()) drop(it);
  for (auto it = st.cache.begin(); it != st.cache.end();)
    it = now - it->second.at >= st.cfg.cache_ttl ? drop(it) : std::next(it);
  while (!st.cache.empty() && st.cached_bytes + a.body.size() > st.cfg.cache_bytes)
    drop(std::min_element(st.cache.begin(), st.cache.end(),
                          [](const auto& x, const auto& y) { return x.second.at < y.second.at; }));
  if (a.body.size() > st.cfg.cache_bytes) return;
  st.cached_bytes += a.body.size();
  st.cache.emplace(key, std::move(a));
}

/// GETs are answered from an answer of the last cache_ttl when there is one, and the same
/// GET arriving while the scheduler works on it waits for that answer: however many clients
/// poll, the scheduler sees a few queries per second (docs/benchmarks/service.md, "Control
/// API of tessera serve").
void route_cached(api_ptr self, const api_call& c) {
  auto& st = self->state;
  if (auto why = query_refusal(c.req); !why.empty()) return reply_error(c, 400, why);
  if (c.req.method != "GET") {  // a submission or cancel: answers change
    st.cache.clear();
    st.cached_bytes = 0;
  }
  if (c.req.method != "GET" || st.cfg.cache_ttl.count() <= 0 || c.req.path == "/" ||
      c.req.path == "/dashboard")
    return route(self, c);
  const std::string key = cache_key(c.req);
  const auto now = std::chrono::steady_clock::now();
  if (auto it = st.cache.find(key); it != st.cache.end() && now - it->second.at < st.cfg.cache_ttl)
    return c.answer(it->second.status, it->second.type, it->second.body);
  auto& queue = st.waiting[key];
  queue.push_back(c.answer);
  if (queue.size() > 1) return;
  api_call first{
      c.req, [self, key](int status, const std::string& type, const std::string& body) {
        auto& s = self->state;
        if (status == 200)
          keep_answer(s, key, cached_answer{std::chrono::steady_clock::now(), status, type, body});
        auto waiters = std::move(s.waiting[key]);
        s.waiting.erase(key);
        for (auto& w : waiters) w(status, type, body);
      }};
  route(self, first);
}

caf::behavior api_actor(api_ptr self, api_config cfg) {
  self->state.cfg = std::move(cfg);
  return {[=](const api_call& c) { route_cached(self, c); }};
}

}  // namespace

caf::actor spawn_api(caf::actor_system& sys, api_config cfg) {
  return sys.spawn(api_actor, std::move(cfg));
}

http::handler api_handler(caf::actor api) {
  return [api](http::request req, http::responder answer) {
    reply_fn reply = [answer](int status, const std::string& type, const std::string& body) {
      answer(status, type, body);
    };
    caf::anon_send(api, api_call{std::move(req), std::move(reply)});
  };
}

std::string query_refusal(const http::request& r) {
  static const std::map<std::string, std::set<std::string>> reads = {
      {"GET /v1/jobs", {"after", "limit", "state"}},
      {"POST /v1/jobs", {"base_dir"}},
      {"GET /v1/rounds", {"limit"}}};
  const auto it = reads.find(r.method + " " + r.path);
  for (const auto& [name, value] : r.query) {
    if (it != reads.end() && it->second.count(name)) continue;
    if (it == reads.end())
      return "query '" + name + "': " + r.method + " " + r.path + " takes no query parameters";
    std::string names;
    for (const auto& n : it->second) names += (names.empty() ? "'" : ", '") + n + "'";
    return "query '" + name + "': " + r.method + " " + r.path + " takes only " + names;
  }
  return "";
}

std::string cache_key(const http::request& r) {
  std::string key = r.method + " " + r.path;
  for (const auto& [name, value] : r.query) key += "\n" + name + "=" + value;  // sorted by name
  return key;
}

}  // namespace tessera::actors
