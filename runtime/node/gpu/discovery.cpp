#include "runtime/node/gpu/discovery.hpp"

#include <sstream>

#include "runtime/core/detail/text.hpp"

namespace tessera::gpu {

namespace {

constexpr long long max_fake_count = 1024;

/// Appends the devices of one "[<count>*]<model name>" entry of a fake list.
status add_fake_entry(std::string_view entry, std::vector<device_info>& out,
                      const std::string& where) {
  entry = detail::trim(entry);
  long long count = 1;
  if (const auto star = entry.find('*'); star != std::string_view::npos) {
    const auto n = detail::parse_int(entry.substr(0, star));
    if (!n || *n < 1 || *n > max_fake_count)
      return error{error_kind::invalid_input, where + ": '" + std::string(entry) +
                                                  "': the count before '*' must be 1 to " +
                                                  std::to_string(max_fake_count)};
    count = *n;
    entry = detail::trim(entry.substr(star + 1));
  }
  if (entry.empty())
    return error{error_kind::invalid_input, where + ": a fake device without a model name"};
  for (long long i = 0; i < count; ++i)
    out.push_back(device_info{static_cast<int>(out.size()), std::string(entry), 0});
  return {};
}

}  // namespace

result<discovery> parse_discovery(const std::string& text, const std::string& where) {
  discovery d;
  const auto t = detail::trim(text);
  if (t.empty() || t == "auto") return d;
  if (t == "off") {
    d.mode = discovery_mode::off;
    return d;
  }
  const std::string_view prefix = "fake:";
  if (t.substr(0, prefix.size()) != prefix)
    return error{error_kind::invalid_input,
                 where + ": expected auto, off or fake:<devices>, got '" + std::string(t) + "'"};
  d.mode = discovery_mode::fake;
  for (const auto entry : detail::split(t.substr(prefix.size()), ','))
    if (auto st = add_fake_entry(entry, d.fake, where); !st) return st.err();
  if (static_cast<long long>(d.fake.size()) > max_fake_count)
    return error{error_kind::invalid_input,
                 where + ": more than " + std::to_string(max_fake_count) + " fake devices"};
  return d;
}

result<node_gpus> discover_node_gpus(const server& srv, const discovery& how, const probe_fn& probe,
                                     const std::string& where) {
  node_gpus g;
  g.visible = how.visible;
  switch (how.mode) {
    case discovery_mode::off:
      g.why_none = "discovery is off";
      break;
    case discovery_mode::fake:
      g.devices = how.fake;
      break;
    case discovery_mode::automatic: {
      auto found = probe();
      g.devices = std::move(found.devices);
      g.why_none = std::move(found.why_none);
      break;
    }
  }
  if (g.real())
    if (auto st = check_devices(srv, g.devices, where); !st) return st.err();
  return g;
}

std::string summary(const node_gpus& g, const server& srv) {
  std::ostringstream s;
  if (g.real()) {
    s << g.devices.size() << (g.devices.size() == 1 ? " GPU" : " GPUs") << " found (";
    for (std::size_t i = 0; i < g.devices.size(); ++i)
      s << (i ? "; " : "") << describe(g.devices[i]);
    s << "): steps are not throttled";
    return s.str();
  }
  s << "no GPU found (" << g.why_none << "): runs on its " << srv.gpus << " declared "
    << srv.gpu_type << (srv.gpus == 1 ? " GPU" : " GPUs") << ", throttled by its speed factor "
    << srv.speed;
  return s.str();
}

}  // namespace tessera::gpu
