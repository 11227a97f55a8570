// SPDX-License-Identifier: Apache-2.0
// JSON with comments and YAML into nlohmann::json (spec_document.h).
#include "tools/commands/spec_document.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <regex>

namespace tally::plan {
namespace {

using nlohmann::json;

// The first character that is neither a blank nor inside a comment, or '\0'.
char firstSignificant(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      ++i;
    } else if (text.compare(i, 2, "//") == 0) {
      size_t end = text.find('\n', i);
      i = end == std::string::npos ? text.size() : end + 1;
    } else if (text.compare(i, 2, "/*") == 0) {
      size_t end = text.find("*/", i + 2);
      i = end == std::string::npos ? text.size() : end + 2;
    } else {
      return c;
    }
  }
  return '\0';
}

// A plain (unquoted) YAML scalar, resolved as YAML 1.2's core schema does.
json plainScalar(const std::string& text) {
  static const std::regex kNull("null|Null|NULL|~|");
  static const std::regex kTrue("true|True|TRUE");
  static const std::regex kFalse("false|False|FALSE");
  static const std::regex kInt("[-+]?[0-9]+");
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (std::regex_match(text, kNull)) return nullptr;
  if (std::regex_match(text, kTrue)) return true;
  if (std::regex_match(text, kFalse)) return false;
  if (std::regex_match(text, kInt)) {
    errno = 0;
    char* end = nullptr;
    if (text[0] == '-') {
      long long n = std::strtoll(text.c_str(), &end, 10);
      if (errno == 0) return n;
    } else {
      unsigned long long n = std::strtoull(text.c_str(), &end, 10);
      if (errno == 0) return n;
    }
    return text;  // out of range: leave it to the field's own check, which names it
  }
  if (std::regex_match(text, kFloat)) return std::strtod(text.c_str(), nullptr);
  return text;
}

Status yamlToJson(const YAML::Node& node, json* out) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      *out = nullptr;
      return Status::ok();
    case YAML::NodeType::Scalar:
      // yaml-cpp tags a plain scalar "?" and a quoted one "!"; an explicit tag names its type.
      if (node.Tag() == "?") {
        *out = plainScalar(node.Scalar());
      } else {
        *out = node.Scalar();
      }
      return Status::ok();
    case YAML::NodeType::Sequence: {
      json array = json::array();
      for (const auto& item : node) {
        json value;
        TALLY_RETURN_IF_ERROR(yamlToJson(item, &value));
        array.push_back(std::move(value));
      }
      *out = std::move(array);
      return Status::ok();
    }
    case YAML::NodeType::Map: {
      json object = json::object();
      for (const auto& entry : node) {
        if (!entry.first.IsScalar()) {
          return Status::invalidUsage("not valid YAML: line " +
                                      std::to_string(entry.first.Mark().line + 1) +
                                      ": a mapping key must be a plain name");
        }
        json value;
        TALLY_RETURN_IF_ERROR(yamlToJson(entry.second, &value));
        object[entry.first.Scalar()] = std::move(value);
      }
      *out = std::move(object);
      return Status::ok();
    }
  }
  return Status::invalidUsage("not valid YAML: unknown node type");
}

Status parseYaml(const std::string& text, json* out) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::invalidUsage("not valid YAML: line " + std::to_string(e.mark.line + 1) +
                                ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  return yamlToJson(root, out);
}

}  // namespace

Status parseSpecDocument(const std::string& text, json* out) {
  char first = firstSignificant(text);
  if (first != '{' && first != '[') return parseYaml(text, out);
  try {
    *out = json::parse(text, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
    return Status::ok();
  } catch (const json::parse_error& e) {
    json as_yaml;
    if (parseYaml(text, &as_yaml).isOk() && as_yaml.is_object()) {
      *out = std::move(as_yaml);
      return Status::ok();
    }
    // e.what() reads "[json.exception.parse_error.101] parse error at line 3, column 5: ...".
    std::string what = e.what();
    size_t start = what.find("] ");
    return Status::invalidUsage("not valid JSON: " +
                                (start == std::string::npos ? what : what.substr(start + 2)));
  }
}

}  // namespace tally::plan
