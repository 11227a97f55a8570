// SPDX-License-Identifier: Apache-2.0
// The scalar conversions, shared with the kernels (kernels/kernels_loops.h) so that there is one
// definition of every rounding rule.
#include "kernels/float_formats.h"

#include "kernels/kernels_loops.h"

namespace tally {

float halfToFloat(uint16_t h) { return kernels_detail::decodeHalf(h); }
uint16_t floatToHalf(float f) { return kernels_detail::encodeHalf(f); }
float bfloat16ToFloat(uint16_t b) { return kernels_detail::decodeBfloat16(b); }
uint16_t floatToBfloat16(float f) { return kernels_detail::encodeBfloat16(f); }
float fp8e4m3ToFloat(uint8_t v) { return kernels_detail::decodeE4m3(v); }
uint8_t floatToFp8e4m3(float f) { return kernels_detail::encodeE4m3(f); }
float fp8e5m2ToFloat(uint8_t v) { return kernels_detail::decodeE5m2(v); }
uint8_t floatToFp8e5m2(float f) { return kernels_detail::encodeE5m2(f); }

}  // namespace tally
