#pragma once
// An mHC site's write-back (hc_post: the sublayer output mixed back into the streams) handed to
// the sublayer's last op, which does it as it produces the output (decoder_layer.h): on a GPU,
// in the kernel that computes the output instead of in a launch of its own.
#include "frank/model/config_common.h"

namespace frank::engine {

template <class Mix, class Array>
struct SiteWriteBack {
  const Mix& mix;  // the site's, from hc_pre
  Array& streams;
  const model::CommonConfig& c;
};

}  // namespace frank::engine
