// docs/openapi.yaml and the router agree: the same paths, methods and roles, every operation has
// responses, and every $ref names a defined component. A small line-based reader of the YAML
// subset the file uses (2-space indents, one key per line) is enough here.
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "coordinator/core/router.h"
#include "tests/unit/core/test_env.h"

using namespace gleaner;

namespace {

struct Operation {
  std::set<std::string> roles;
  bool has_responses = false;
};

std::string ReadDoc() {
  std::ifstream f(std::string(GLEANER_SOURCE_DIR) + "/docs/openapi.yaml");
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

size_t Indent(const std::string& line) {
  return line.find_first_not_of(' ');
}

std::set<std::string> SplitList(const std::string& inside) {
  std::set<std::string> out;
  std::stringstream ss(inside);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    if (a != std::string::npos) out.insert(item.substr(a, b - a + 1));
  }
  return out;
}

// "POST /v1/jobs" -> operation, from the paths: section.
std::map<std::string, Operation> ReadOperations(const std::string& doc,
                                                std::set<std::string>* schemas,
                                                std::set<std::string>* refs) {
  std::map<std::string, Operation> ops;
  std::stringstream in(doc);
  std::string line, section, path, op, comp;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t ind = Indent(line);
    if (ind == std::string::npos) continue;
    if (ind == 0) {
      section = line.substr(0, line.find(':'));
      continue;
    }
    std::string text = line.substr(ind);
    for (size_t at = text.find("$ref: '#/components/"); at != std::string::npos;
         at = text.find("$ref: '#/components/", at + 1)) {
      size_t start = at + 20, end = text.find('\'', start);
      refs->insert(text.substr(start, end - start));
    }
    if (section == "paths") {
      if (ind == 2 && text.back() == ':') {
        path = text.substr(0, text.size() - 1);
      } else if (ind == 4 && text.back() == ':') {
        op = text.substr(0, text.size() - 1);
        for (char& c : op) c = char(std::toupper(static_cast<unsigned char>(c)));
        op += " " + path;
        ops[op];
      } else if (ind == 6 && text.rfind("x-roles: [", 0) == 0) {
        ops[op].roles = SplitList(text.substr(10, text.size() - 11));
      } else if (ind == 6 && text == "responses:") {
        ops[op].has_responses = true;
      }
    } else if (section == "components") {
      if (ind == 2) comp = text.substr(0, text.find(':'));
      if (ind == 4) schemas->insert(comp + "/" + text.substr(0, text.find(':')));
    }
  }
  return ops;
}

}  // namespace

TEST_CASE("docs/openapi.yaml describes exactly the router's routes and roles", "[openapi][docs]") {
  std::string doc = ReadDoc();
  REQUIRE(doc.rfind("openapi: 3.1.0\n", 0) == 0);
  std::set<std::string> schemas, refs;
  std::map<std::string, Operation> ops = ReadOperations(doc, &schemas, &refs);
  std::set<std::string> routes;
  for (const core::RouteInfo& r : core::Routes()) {
    std::string key = std::string(r.method) + " " + r.pattern;
    routes.insert(key);
    INFO(key);
    REQUIRE(ops.count(key) == 1);
    std::set<std::string> roles;
    for (unsigned bit :
         {core::kRoleDeveloper, core::kRoleNode, core::kRoleOperator, core::kRoleEnroll}) {
      if (r.roles & bit) roles.insert(core::RoleName(bit));
    }
    CHECK(ops[key].roles == roles);
    CHECK(ops[key].has_responses);
  }
  for (const auto& [key, op] : ops) {
    INFO("documented but not routed: " << key);
    CHECK(routes.count(key) == 1);
  }
  CHECK(!refs.empty());
  for (const std::string& ref : refs) {
    INFO("$ref " << ref);
    CHECK(schemas.count(ref) == 1);
  }
}
