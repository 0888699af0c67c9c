#include "policies/gavel_family.hpp"

#include <utility>

#include "policies/mechanism.hpp"

namespace tessera {

namespace {

/// An allocation policy run through the shared mechanism.
class gavel_policy final : public policy {
 public:
  gavel_policy(std::string name, std::unique_ptr<allocation_policy> alloc)
      : name_(std::move(name)), alloc_(std::move(alloc)) {}

  std::string name() const override { return name_; }

  result<round_plan> plan(const snapshot& s) override {
    const bool new_set = !have_ || s.job_set_version != version_;
    if (new_set || alloc_->recompute_every_round()) {
      if (have_) alloc_->recycle(std::move(current_));  // its storage serves the next one
      have_ = false;
      auto a = alloc_->allocate(s);
      if (!a) return error{a.err().kind, name_ + ": " + a.err().message};
      if (a->x.size() != s.jobs.size())
        return error{error_kind::internal, name_ + ": allocation has " +
                                               std::to_string(a->x.size()) + " rows for " +
                                               std::to_string(s.jobs.size()) + " jobs"};
      current_ = std::move(a.value());
      if (new_set) mechanism_.reset(s.now);
      have_ = true;
      version_ = s.job_set_version;
    }
    return mechanism_.plan(s, current_);
  }

 private:
  std::string name_;
  std::unique_ptr<allocation_policy> alloc_;
  gavel_mechanism mechanism_;
  allocation current_;
  bool have_ = false;
  std::uint64_t version_ = 0;
};

}  // namespace

std::unique_ptr<policy> make_gavel_policy(std::string name,
                                          std::unique_ptr<allocation_policy> alloc) {
  return std::make_unique<gavel_policy>(std::move(name), std::move(alloc));
}

}  // namespace tessera
