// AS-84: the control plane for callers of every auth mode. The service token is the cross-tenant
// operator credential; a caller identified in jwt or trusted_headers mode uses the same control
// endpoints, confined to the records that carry its tenant_key ("" is a tenant too).
#pragma once

#include "protocol/identity.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace troupe::protocol {

struct tenant_scope {
  std::optional<std::string> tenant; // nullopt: every tenant (the operator)

  // Whether a record of `record_tenant` exists for this caller; one it may not see is not found.
  bool sees(const std::string& record_tenant) const { return !tenant || *tenant == record_tenant; }
};

// The service token (or an open service_token mode) spans tenants; any other identity is its tenant.
tenant_scope scope_of(const identity& id);

// The control endpoints of AS-1, which an identified caller may use within its tenant: GET
// /v1/runs[/{id}[/events|/stream]], /v1/traces[/{id}[/events]], /v1/approvals[/{id}], /v1/metrics;
// POST /v1/runs/{id}/cancel, /v1/approvals/{id}/approve|deny. The operator endpoints (/ready,
// /v1/policy, POST /v1/policy/check, the Prometheus /metrics) are not among them.
bool is_control_endpoint(std::string_view method, std::string_view path);

} // namespace troupe::protocol
