// SPDX-License-Identifier: Apache-2.0
// Conversions between float32 and the narrow floating-point formats NCCL reduces:
// IEEE binary16 (float16), bfloat16, and OCP float8 E4M3 (no infinities, max 448) and E5M2.
// All narrowing conversions round to nearest even. See kernels/kernels.h for overflow rules.
#pragma once

#include <cstdint>

namespace tally {

float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bfloat16ToFloat(uint16_t b);
uint16_t floatToBfloat16(float f);
float fp8e4m3ToFloat(uint8_t v);
uint8_t floatToFp8e4m3(float f);  // saturates finite overflow and infinities to +-448
float fp8e5m2ToFloat(uint8_t v);
uint8_t floatToFp8e5m2(float f);  // keeps infinities, saturates finite overflow to +-57344

}  // namespace tally
