/// @file launch_mpi.cpp
/// The mpirun layout of a run (actors/run.hpp): every rank loads the inputs and they agree
/// before any goes on; rank 0 hosts the scheduler and node 0 and broadcasts (MPI_Bcast) where
/// the scheduler listens and the cluster secret; every other rank runs its node. MPI_Finalize
/// is bounded, since a lost rank can hold it forever.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <arpa/inet.h>
#include <mpi.h>
#include <netdb.h>

#include "actors/auth.hpp"
#include "actors/launch.hpp"
#include "actors/run.hpp"
#include "runtime/node/comm/mpi_aggregator.hpp"

namespace tessera::actors {

namespace {

using exit_code::bad_input;
using exit_code::failed;
using exit_code::ok;
using launch::check_size;
using launch::connect_and_run_node;
using launch::find_node_gpus;
using launch::host_name;
using launch::load_inputs;
using launch::run_inputs;
using launch::run_rank0;
using launch::run_secret;

/// The address an IPv4 host name resolves to that is not a loopback one, or "".
std::string routable_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return "";
  std::string found;
  for (auto* a = res; a && found.empty(); a = a->ai_next) {
    char buf[64] = {0};
    const auto* in4 = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
    if (::inet_ntop(AF_INET, &in4->sin_addr, buf, sizeof buf) &&
        std::string(buf).rfind("127.", 0) != 0)
      found = buf;
  }
  ::freeaddrinfo(res);
  return found;
}

/// What rank 0 of an mpirun run tells the others: where the scheduler listens, the secret.
struct mpi_rendezvous {
  int port = 0;                             ///< 0: the scheduler did not open
  char address[256] = {0};                  ///< address to dial
  std::uint8_t secret[secret_bytes] = {0};  ///< the cluster secret
};

/// True on every rank when every rank runs on rank 0's host (collective).
bool all_on_rank0_host() {
  char host[256] = {0};
  std::snprintf(host, sizeof host, "%s", host_name().c_str());
  char root[256] = {0};
  std::memcpy(root, host, sizeof host);
  MPI_Bcast(root, sizeof root, MPI_CHAR, 0, MPI_COMM_WORLD);
  int same = std::strncmp(root, host, sizeof host) == 0 ? 1 : 0, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

/// Where rank 0's scheduler listens: --bind, else loopback when every rank is on this host,
/// else this host's routable address (every interface, with a warning, when it has none).
std::string mpi_bind_address(const run_settings& s, bool one_host) {
  if (!s.bind.empty()) return s.bind;
  if (one_host) return "127.0.0.1";
  const auto a = routable_address(host_name());
  if (!a.empty()) return a;
  std::cerr << "tessera: " << host_name() << " resolves to no routable IPv4 address; the "
            << "scheduler listens on every interface (set --bind to choose one)\n";
  return "0.0.0.0";
}

/// Every rank's inputs and aggregator under mpirun, or the problem that stops this rank.
struct mpi_start {
  std::optional<run_inputs> in;
  std::shared_ptr<comm::aggregator> agg;
  std::string problem;  ///< empty when this rank can go on
};

mpi_start prepare_mpi_rank(const run_settings& s, const train::trainable_registry& kinds, int rank,
                           int size) {
  mpi_start st;
  auto in = load_inputs(s, kinds);
  if (!in) {
    st.problem = in.err().message;
    return st;
  }
  st.in = std::move(*in);
  // With a secret file the servers past the world may join (tessera node --join), as under
  // --local; without one every server needs a rank.
  const bool joins = !s.secret_file.empty() && size <= static_cast<int>(st.in->cl.servers.size());
  if (auto bad = check_size(s, st.in->cl, size, "mpirun -np " + std::to_string(size));
      bad && !joins) {
    st.problem = *bad;
    return st;
  }
  if (auto found = find_node_gpus(s, *st.in, rank); !found) {
    st.problem = "node rank " + std::to_string(rank) + ": " + found.err().message;
    return st;
  }
  if (auto made = comm::mpi_aggregator::create(); made)
    st.agg = std::move(made.value());
  else
    st.problem = made.err().message;
  return st;
}

/// A non-zero rank under mpirun: receives the scheduler's address and the secret from rank 0,
/// runs its node.
int run_mpi_node(const run_settings& s, const run_inputs& in, int rank,
                 const train::trainable_registry& kinds, const node_setup& setup,
                 std::shared_ptr<comm::aggregator> agg) {
  mpi_rendezvous rv;
  MPI_Bcast(&rv, sizeof rv, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (rv.port == 0) return failed;
  const secret_key key(rv.secret, rv.secret + secret_bytes);
  return connect_and_run_node(s, in, rank, rv.address, rv.port, kinds, setup, std::move(agg), key);
}

}  // namespace

bool under_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}

/// MPI_Finalize, bounded: it is collective, and after a rank died (or while a communicator
/// thread is stuck in a collective with it) it can wait forever. The run's outcome is known by
/// then, so past `grace` seconds the process flushes its output and exits with `code`.
int finalize_mpi(int code, double grace) {
  std::atomic<bool> done{false};
  std::thread watchdog([&done, code, grace] {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<long>(grace * 1000));
    while (!done.load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (done.load()) return;
    std::cout.flush();
    std::cerr << "tessera: MPI_Finalize did not return within " << grace
              << " s (a lost rank's collectives); exiting with the run's status\n";
    std::_Exit(code);
  });
  MPI_Finalize();
  done.store(true);
  watchdog.join();
  return code;
}

int run_mpi(const run_settings& s, const train::trainable_registry& kinds, const node_setup& setup,
            const scheduler_setup& sched_setup) {
  int provided = 0;
  // MPI_THREAD_MULTIPLE: the aggregator's communicator threads call MPI concurrently.
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto st = prepare_mpi_rank(s, kinds, rank, size);
  int good = st.problem.empty() ? 1 : 0, all_good = 0, rank0_good = good;
  MPI_Allreduce(&good, &all_good, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Bcast(&rank0_good, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!all_good) {
    // One message: rank 0's, else those of the ranks whose view differs (e.g. a file they
    // cannot read).
    if (!st.problem.empty() && (rank == 0 || rank0_good == 1))
      std::cerr << "tessera: " << st.problem << '\n';
    st.agg.reset();
    if (rank == 0) write_status_file(s.status_file, bad_input);
    MPI_Finalize();
    return bad_input;
  }
  const bool one_host = all_on_rank0_host();
  int code = ok;
  if (rank == 0) {
    auto key = run_secret(s);
    const std::string bind = mpi_bind_address(s, one_host);
    code = run_rank0(
        s, *st.in, kinds, setup, sched_setup,
        [&](int port) {
          mpi_rendezvous rv;
          rv.port = key ? port : 0;
          std::snprintf(rv.address, sizeof rv.address, "%s",
                        bind == "0.0.0.0" ? host_name().c_str() : bind.c_str());
          if (key) std::copy(key->begin(), key->end(), rv.secret);
          MPI_Bcast(&rv, sizeof rv, MPI_BYTE, 0, MPI_COMM_WORLD);
          return rv.port != 0;
        },
        key ? *key : secret_key{}, bind, st.agg);
  } else {
    code = run_mpi_node(s, *st.in, rank, kinds, setup, st.agg);
  }
  st.agg.reset();  // its communicator threads end (or are left stuck) before MPI does
  if (rank == 0) write_status_file(s.status_file, code);
  return finalize_mpi(code, 10);
}

}  // namespace tessera::actors
