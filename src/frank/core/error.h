#pragma once
// frank::Error is the one exception type for bad input and unsupported features.
// Every message names the thing that was wrong (file, tensor, field) so a user can act on it;
// the CLI prints what() and exits non-zero.
#include <stdexcept>
#include <string>

namespace frank {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace frank
