// A served cluster's journal under a full disk, with the scheduler and node actors in one
// process (actors/cluster_journal.hpp): while the journal cannot write, no round of work
// starts and the API shows why; when it writes again the jobs finish, every one recorded; at
// every moment the checkpoint files the journal names are on disk.
#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <memory>
#include <future>
#include <optional>
#include <thread>

#include "actor_support.hpp"
#include "actors/cluster_journal.hpp"
#include "actors/journal_records.hpp"
#include "runtime/service/journal.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::actors;
using namespace tessera::actors::test;

namespace {

/// The journal file at `path` replayed as it is on disk now (a crash's view), and its size.
std::pair<restored_cluster, std::uintmax_t> disk_view(const std::string& path) {
  const std::string bytes = tessera::test::file_contents(path);
  auto scan = scan_journal(bytes, path);
  REQUIRE(scan);
  auto c = replay_journal(scan->records);
  REQUIRE(c);
  return {std::move(*c), bytes.size()};
}

/// True when every checkpoint file the journal at `path` names for an open job exists; a
/// view the journal moved past while it was checked is taken again.
bool named_files_exist(const std::string& path, std::string& missing) {
  for (;;) {
    auto [view, size] = disk_view(path);
    missing.clear();
    for (const auto& j : view.jobs)
      if (!is_final(j.life))
        for (const auto& f : j.checkpoints)
          if (!f.path.empty() && !std::filesystem::exists(f.path)) missing = f.path;
    if (std::filesystem::file_size(path) == size) return missing.empty();
  }
}

}  // namespace

TEST_CASE("a journal that cannot write: rounds wait, the API says why, nothing is lost",
          "[actors][scheduler][journal][full]") {
  temp_dir dir("sched_journal_full");
  const std::string path = dir.str() + "/journal";
  std::atomic<bool> full{false};
  journal_options opt;
  opt.retry_seconds = 0.05;
  opt.inject_errno = [&](journal_step s) {
    return s == journal_step::append_write && full.load() ? ENOSPC : 0;
  };
  auto opened = journal::open(path, opt);
  REQUIRE(opened);
  auto log = std::make_shared<cluster_journal>(std::move(opened->file));
  std::vector<run_job> jobs;
  for (int i = 0; i < 3; ++i)
    jobs.push_back(make_run_job(i, "softmax_regression", 150, 0.01, i + 1));
  std::promise<std::string> synced;
  log->submitted(jobs, [&](std::string err) { synced.set_value(std::move(err)); });
  REQUIRE(synced.get_future().get().empty());

  const auto kinds = train::builtin_trainables();  // outlives the actor system
  test_config cfg;
  std::optional<run_summary> sum;
  cluster_status during;
  bool saw_wait = false;
  std::string missing;
  bool files_ok = true;
  {
    caf::actor_system sys{cfg};
    const cluster cl = speed_cluster({1.0, 1.0});
    auto sc = make_sched_config(cl, jobs, dir.str());
    sc.log = log;
    sc.max_seconds = 120;
    caf::scoped_actor listener{sys};
    auto sched = sys.spawn(scheduler_actor, sc, caf::actor_cast<caf::actor>(listener));
    for (int r = 0; r < 2; ++r) sys.spawn(node_actor, make_node_config(cl, r, kinds), sched);
    caf::scoped_actor client{sys};
    auto cluster_now = [&] {
      cluster_status c;
      client->request(sched, std::chrono::seconds(5), cluster_atom::value)
          .receive([&](cluster_status& s) { c = std::move(s); }, [](caf::error&) {});
      return c;
    };
    // Full once an open job's journal names two checkpoints, for about 2 s of rounds: the
    // round in flight then confirms a third, which replaces the oldest in the job's book
    // while the journal on disk (its record held) still names that one.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      auto [view, size] = disk_view(path);
      bool two = false;
      for (const auto& j : view.jobs) two |= !is_final(j.life) && j.checkpoints.size() == 2;
      if (two) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    full = true;
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration<double>(2.0 * tessera::test::time_scale());
    while (std::chrono::steady_clock::now() < until) {
      files_ok = files_ok && named_files_exist(path, missing);
      auto c = cluster_now();
      if (c.journal.present && !c.journal.writable && c.journal.paused_rounds >= 2) {
        saw_wait = true;
        during = c;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    full = false;
    listener->receive([&](run_summary& s) { sum = std::move(s); },
                      caf::after(std::chrono::seconds(60)) >> [] {});
  }
  REQUIRE(sum);
  INFO(sum->error);
  REQUIRE(sum->ok);
  INFO("missing " << missing);
  CHECK(files_ok);  // before the pin: the files of the journal's view were removed
  REQUIRE(saw_wait);
  CHECK(during.journal.present);
  CHECK_THAT(during.journal.error, Catch::Contains("No space left on device"));
  CHECK(during.journal.write_errors >= 1);
  for (const auto& j : sum->jobs) CHECK(j.finished);
  log.reset();  // closes the journal: everything held is on disk
  auto [view, size] = disk_view(path);
  REQUIRE(view.jobs.size() == 3);
  for (const auto& j : view.jobs) {
    INFO("job " << j.spec.spec.id);
    CHECK(j.life == job_state::finished);
    REQUIRE(j.ended);
    CHECK(j.ended->steps == 150);
    CHECK(j.ended->finish > 0);
  }
}
