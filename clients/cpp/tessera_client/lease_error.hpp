#pragma once
/// @file lease_error.hpp
/// The exception of the C++ lease client (tessera_client.hpp, which includes this part).

#include <stdexcept>

namespace tessera_client {

/// The node refused the program, the channel broke, or a reply made no sense.
class lease_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tessera_client
