// AS-84: which endpoints an identified caller may use, and whose records it then sees.
#include "protocol/tenant_scope.hpp"

#include <catch2/catch.hpp>

using namespace troupe::protocol;

TEST_CASE("AS-84 the control endpoints are open to identified callers, the operator endpoints are not", "[tenant_scope]") {
  struct row {
    const char* method;
    const char* path;
    bool control;
  };
  const row rows[] = {
    {"GET", "/v1/runs", true},
    {"GET", "/v1/runs/r1", true},
    {"GET", "/v1/runs/r1/events", true},
    {"GET", "/v1/runs/r1/stream", true},
    {"POST", "/v1/runs/r1/cancel", true},
    {"GET", "/v1/traces", true},
    {"GET", "/v1/traces/r1", true},
    {"GET", "/v1/traces/r1/events", true},
    {"GET", "/v1/approvals", true},
    {"GET", "/v1/approvals/a1", true},
    {"POST", "/v1/approvals/a1/approve", true},
    {"POST", "/v1/approvals/a1/deny", true},
    {"GET", "/v1/metrics", true},
    // operator endpoints (AS-1) and anything else
    {"GET", "/ready", false},
    {"GET", "/metrics", false},
    {"GET", "/v1/policy", false},
    {"POST", "/v1/policy/check", false},
    {"POST", "/v1/runs/r1/events", false},
    {"DELETE", "/v1/runs/r1", false},
    {"GET", "/v1/runs/r1/cancel", false},
    {"GET", "/v1/traces/r1/stream", false},
    {"GET", "/v1/approvals/a1/approve", false},
    {"GET", "/v1/metrics/x", false},
    {"GET", "/v1/runs/r1/events/x", false},
    {"GET", "/v1/runs//events", false},
    {"GET", "/v1/runs/", false},
    {"GET", "/v2/runs", false},
  };
  for (auto& r : rows) {
    INFO(r.method << " " << r.path);
    CHECK(is_control_endpoint(r.method, r.path) == r.control);
  }
}

TEST_CASE("AS-84 the service token sees every tenant, any other identity only its own, the empty tenant included", "[tenant_scope]") {
  identity op;
  op.service_token = true;
  op.tenant_key = "acme";
  auto all = scope_of(op);
  CHECK_FALSE(all.tenant);
  CHECK(all.sees("acme"));
  CHECK(all.sees("other"));
  CHECK(all.sees(""));

  identity caller;
  caller.tenant_key = "acme";
  auto acme = scope_of(caller);
  CHECK(acme.sees("acme"));
  CHECK_FALSE(acme.sees("other"));
  CHECK_FALSE(acme.sees(""));

  identity tenantless; // a user key without a prefix: the "" tenant
  auto none = scope_of(tenantless);
  REQUIRE(none.tenant);
  CHECK(none.sees(""));
  CHECK_FALSE(none.sees("acme"));
}
