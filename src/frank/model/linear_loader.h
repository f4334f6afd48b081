#pragma once
// Reads one Linear weight from a checkpoint in the format it ships in: fp32 (F32, BF16 and F16
// widened), FP8 e4m3 with ue8m0 block scales (`<name minus .weight>.scale`, or transformers'
// `.weight_scale_inv` holding powers of two), or FP4 e2m1 packed two per byte (I8/U8
// [out, in/2]) with one ue8m0 scale per 32 values. FP8 and FP4 stay as shipped (LinearWeight).
#include <set>
#include <string>
#include <vector>

#include "frank/core/linear_weight.h"
#include "frank/model/checkpoint.h"

namespace frank::model {

// `shape` is the weight's [out, in]; the names read are added to `used`. Throws frank::Error
// naming the tensor for a dtype, shape or scale grid that does not fit.
void load_linear(const Checkpoint& checkpoint, const std::string& name, const std::vector<int64_t>& shape,
                 LinearWeight& dst, std::set<std::string>& used);

}  // namespace frank::model
