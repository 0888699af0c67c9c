#pragma once
/// @file work_queue.hpp
/// Work handed to one thread in order: producers push functions, the thread pops them until
/// the queue is stopped and drained. The MPI backend drives each communicator from such a
/// thread (a caller can then wait with a time-out), and bench/allreduce_bench.cpp measures
/// what that hand-off costs.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

namespace tessera::comm {

/// A FIFO of work for one consuming thread.
class work_queue {
 public:
  /// Adds `fn` at the back and wakes the consumer.
  void push(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> g(mu_);
      items_.push_back(std::move(fn));
    }
    cv_.notify_all();
  }
  /// The next item, waiting for one; an empty function once stop() was called and every item
  /// pushed before has been taken.
  std::function<void()> pop() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stopped_ || !items_.empty(); });
    if (items_.empty()) return {};
    auto next = std::move(items_.front());
    items_.pop_front();
    return next;
  }
  /// Lets the consumer finish: pop() returns empty once the queue is drained.
  void stop() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stopped_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> items_;
  bool stopped_ = false;
};

}  // namespace tessera::comm
