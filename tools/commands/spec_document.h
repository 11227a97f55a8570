// SPDX-License-Identifier: Apache-2.0
// Reading a job spec document for `tally plan`: JSON, JSON with comments (Vertex AI's own examples
// carry `//` lines), or YAML (what `gcloud ai custom-jobs create --config` takes), all into the
// same nlohmann::json value, so that one parser checks every field whatever the syntax.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace tally::plan {

// Parses `text` into *out. A document whose first character (after blanks and comments) is `{` or
// `[` is read as JSON with `//` and `/* */` comments; if that fails it is tried as YAML (YAML's
// flow style also starts with `{`), and the JSON error is reported when both fail. Anything else
// is YAML: a plain scalar becomes null, a bool, an integer or a float when it reads as one in
// YAML's core schema, and a string otherwise; a quoted scalar is always a string. On error
// (kInvalidUsage, "not valid JSON: ..." or "not valid YAML: line L, column C: ...") *out is
// untouched.
Status parseSpecDocument(const std::string& text, nlohmann::json* out);

}  // namespace tally::plan
