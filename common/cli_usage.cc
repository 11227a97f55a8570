// SPDX-License-Identifier: Apache-2.0
#include "common/cli_usage.h"

#include <cctype>
#include <regex>

#include "common/strings.h"
#include "common/suggest.h"

namespace tally::cli {
namespace {

// "-n", "--workers", "--workers=3", "-n5"; not "-", "-1" or "-0.5", which are values.
bool isOptionWord(const std::string& word) {
  if (word.size() < 2 || word[0] != '-' || word == "--") return false;
  return !(std::isdigit(static_cast<unsigned char>(word[1])) || word[1] == '.');
}

// The option's name as written in `word`: "--workers" of "--workers=3", "-n" of "-n5".
std::string optionName(const std::string& word) {
  if (startsWith(word, "--")) return word.substr(0, word.find('='));
  return word.substr(0, 2);
}

// True when the word carries its value: "--workers=3", "-n5".
bool valueAttached(const std::string& word) {
  if (startsWith(word, "--")) return word.find('=') != std::string::npos;
  return word.size() > 2;
}

// Flags expect no value (CLI11 gives them a type size of 1, but 0 values expected).
bool takesValue(const CLI::Option& option) { return option.get_items_expected_max() > 0; }

bool takesPositionals(const CLI::App& app) {
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_positional() && option->get_lnames().empty() && option->get_snames().empty()) {
      return true;
    }
  }
  return false;
}

// The long names `app` shows in --help: "--workers"; hidden options (group "") left out.
std::vector<std::string> visibleLongNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_group().empty()) continue;
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  }
  return names;
}

// "Bytes of the all-reduce" -> "bytes of the all-reduce"; "HOST:PORT to listen" unchanged.
std::string lowerFirst(std::string text) {
  if (text.size() >= 2 && std::isupper(static_cast<unsigned char>(text[0])) &&
      std::islower(static_cast<unsigned char>(text[1]))) {
    text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  }
  return text;
}

// What the option takes, with its description: "an integer from 2 to 64 (worker processes
// (ranks))", or the description alone for plain text.
std::string takes(const CLI::Option& option) {
  const std::string kind = valueKind(option);
  const std::string description = lowerFirst(option.get_description());
  if (kind.empty()) return description.empty() ? "a value" : description;
  return description.empty() ? kind : kind + " (" + description + ")";
}

// The last value given to `option` in args ("" when none is found).
std::string lastValue(const CLI::Option& option, const std::vector<std::string>& args) {
  std::string value;
  for (size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
    if (!isOptionWord(args[i]) || !option.check_name(optionName(args[i]))) continue;
    if (valueAttached(args[i])) {
      const std::string& word = args[i];
      value = startsWith(word, "--") ? word.substr(word.find('=') + 1) : word.substr(2);
    } else if (i + 1 < args.size()) {
      value = args[i + 1];
    }
  }
  return value;
}

// The option CLI11 names at the start of its message: "--workers: Value 1 not in range",
// "--listen is required", "Could not convert: --mtu = abc". "" when there is none.
std::string nameInMessage(const std::string& message) {
  static const std::regex kConvert("^Could not convert: (\\S+) = ");
  static const std::regex kLeading("^(-{1,2}[A-Za-z0-9][A-Za-z0-9_-]*)(:| is | was )");
  std::smatch m;
  if (std::regex_search(message, m, kConvert)) return m[1];
  if (std::regex_search(message, m, kLeading)) return m[1];
  return "";
}

}  // namespace

std::string valueKind(const CLI::Option& option) {
  const std::string type = option.get_type_name();
  const size_t colon = type.find(':');
  const std::string base = type.substr(0, colon);
  const std::string check = colon == std::string::npos ? "" : type.substr(colon + 1);
  std::string kind;
  if (base == "INT" || base == "UINT") {
    kind = "an integer";
  } else if (base == "FLOAT") {
    kind = "a number";
  }
  static const std::regex kRange(".* in \\[(\\S+) - (\\S+)\\]");
  std::smatch m;
  if (std::regex_match(check, m, kRange)) {
    return (kind.empty() ? std::string("a value") : kind) + " from " + m[1].str() + " to " +
           m[2].str();
  }
  if (check.size() > 2 && check.front() == '{' && check.back() == '}') {
    return "one of " + join(split(check.substr(1, check.size() - 2), ','), ", ");
  }
  if (!kind.empty() && check == "NONNEGATIVE") return kind + " of 0 or more";
  if (!kind.empty() && check == "POSITIVE") return kind + " above 0";
  if (base == "UINT" && check.empty()) return "an integer of 0 or more";
  return kind;
}

std::string strayWord(const CLI::App& app, const std::vector<std::string>& args) {
  const bool positionals = takesPositionals(app);
  bool after_separator = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (after_separator) {
      if (!positionals) return word;
      continue;
    }
    if (word == "--") {
      after_separator = true;
      continue;
    }
    if (!isOptionWord(word)) {
      if (!positionals) return word;
      continue;
    }
    const std::string name = optionName(word);
    const CLI::Option* option = app.get_option_no_throw(name);
    if (option == nullptr) return name;
    if (!takesValue(*option) || valueAttached(word)) continue;
    // Its value, or values: an option that takes several takes the words up to the next option.
    const bool several = option->get_expected_max() > 1;
    while (i + 1 < args.size() && args[i + 1] != "--" && !isOptionWord(args[i + 1])) {
      ++i;
      if (!several) break;
    }
  }
  return "";
}

std::string strayWordMessage(const CLI::App& app, const std::string& word) {
  if (!isOptionWord(word)) {
    return "unexpected argument '" + word + "': " + app.get_name() + " takes options only";
  }
  const std::string name = optionName(word);
  std::string message = "unknown option " + name;
  // One letter is too little to guess from: "-x" gets no suggestion.
  if (!startsWith(name, "--")) return message;
  const std::string nearest = nearestName(name, visibleLongNames(app));
  if (!nearest.empty()) message += "; did you mean " + nearest + "?";
  return message;
}

std::string usageError(const CLI::App& app, const CLI::ParseError& error,
                       const std::vector<std::string>& args) {
  const std::string message = error.what();
  // A word with no place comes first: CLI11 checks required options, and often values, before
  // it looks at the words it did not take, so "--lisen x" would otherwise read "--listen is
  // required".
  if (const std::string word = strayWord(app, args); !word.empty()) {
    return strayWordMessage(app, word);
  }
  const std::string name = nameInMessage(message);
  const CLI::Option* option = name.empty() ? nullptr : app.get_option_no_throw(name);
  if (option == nullptr) return message;
  if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr) {
    return name + " is required: " + takes(*option);
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr) {
    if (message.find("missing") != std::string::npos ||
        message.find("At least") != std::string::npos) {
      return name + " needs a value: " + takes(*option);
    }
    return message;
  }
  if (dynamic_cast<const CLI::ConversionError*>(&error) == nullptr &&
      dynamic_cast<const CLI::ValidationError*>(&error) == nullptr) {
    return message;
  }
  if (!takesValue(*option)) return name + " takes no value";
  const std::string value = lastValue(*option, args);
  const std::string kind = valueKind(*option);
  if (!kind.empty()) return name + ": expected " + kind + ", got '" + value + "'";
  // A check of our own (an address, a size): its message says what is wrong.
  const std::string prefix = name + ": ";
  return startsWith(message, prefix) ? message : prefix + message;
}

}  // namespace tally::cli
